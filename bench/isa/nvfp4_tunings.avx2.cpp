// Variations of the AVX2 NVFP4 tiles (Nvfp4Tile<8> in nvfp4_w4a4_impl.hpp)
// for bench_nvfp4_tunings: each differs from the default in one member; the
// last row is the library's own build of the default (bench_float_tunings.cpp
// says why). A CPU with AVX-VNNI runs another build (nvfp4_gemm_avx_vnni):
// these rows are the vpmaddubsw kernel.
#include "isa/nvfp4_tunings_variants.hpp"
#include "support/nvfp4_tunings.hpp"

namespace mixq::bench {

std::vector<Nvfp4Tuning> nvfp4_tunings_avx2() {
  using namespace kernels::x86;
  using Base = Nvfp4Tile<8>;
  return {{"default", run_tuned<Avx2, Base>},
          {"large M: 2 rows x 1 panel (before)", run_tuned<Avx2, LargeTile<Base, 2, 1>>},
          {"large M: 4 rows x 1 panel", run_tuned<Avx2, LargeTile<Base, 4, 1>>},
          {"large M: 6 rows x 1 panel", run_tuned<Avx2, LargeTile<Base, 6, 1>>},
          {"large M: 2 rows x 2 panels", run_tuned<Avx2, LargeTile<Base, 2, 2>>},
          {"3-15 rows: 2 rows x 1 panel (before)", run_tuned<Avx2, MidTile<Base, 2, 1>>},
          {"3-15 rows: 3 rows x 1 panel", run_tuned<Avx2, MidTile<Base, 3, 1>>},
          {"packed: large-M path from 9 rows", run_tuned<Avx2, LargeFrom<Base, 9>>},
          {"packed: large-M path from 24 rows", run_tuned<Avx2, LargeFrom<Base, 24>>},
          {"packed: large-M path from 32 rows (before)", run_tuned<Avx2, LargeFrom<Base, 32>>},
          {"one column vector per pass", run_tuned<Avx2, DotGroup<Base, 1>>},
          {"the layer's kernel (the library's build of the default)",
           [](const Nvfp4Activation& act, const Nvfp4Weights& w, const float* bias, float* y) {
             nvfp4_gemm_avx2(act, w, bias, y, false);
           }}};
}

}  // namespace mixq::bench
