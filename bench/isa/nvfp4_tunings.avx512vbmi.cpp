// Variations of the AVX-512 NVFP4 tiles (Nvfp4Tile<16> in
// nvfp4_w4a4_impl.hpp) for bench_nvfp4_tunings, compiled with the flags of
// the library's nvfp4_w4a4.avx512vbmi.cpp: each differs from the default in
// one member; the last row is the library's own build of the default.
#include "isa/nvfp4_tunings_variants.hpp"
#include "support/nvfp4_tunings.hpp"

namespace mixq::bench {

std::vector<Nvfp4Tuning> nvfp4_tunings_avx512vbmi() {
  using namespace kernels::x86;
  using Base = Nvfp4Tile<16>;
  return {{"default", run_tuned<Avx512, Base>},
          {"large M: 4 rows x 2 panels", run_tuned<Avx512, LargeTile<Base, 4, 2>>},
          {"large M: 8 rows x 1 panel", run_tuned<Avx512, LargeTile<Base, 8, 1>>},
          {"3-31 rows: 6 rows x 2 panels", run_tuned<Avx512, MidTile<Base, 6, 2>>},
          {"packed: large-M path from 16 rows", run_tuned<Avx512, LargeFrom<Base, 16>>},
          {"the layer's kernel (the library's build of the default)", nvfp4_gemm_avx512}};
}

}  // namespace mixq::bench
