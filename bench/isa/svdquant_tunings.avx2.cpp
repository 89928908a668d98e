// Variations of the AVX2 SVDQuant register blocks (SvdquantTile<Avx2> in
// svdquant_w4a4_impl.hpp) for bench_svdquant_tunings: each differs from the
// default in one member; the last row is the library's own build of the
// default (svdquant_tunings.avx512.cpp says why).
#include "isa/svdquant_tunings_variants.hpp"
#include "support/svdquant_tunings.hpp"

namespace mixq::bench {

std::vector<SvdquantTuning> svdquant_tunings_avx2() {
  using namespace kernels::x86;
  using Base = SvdquantTile<Avx2>;
  return {{"default", run_tuned<Avx2, Base>},
          {"M=1 block 1 row x 1 panel (before)", run_tuned<Avx2, OneRowPanels<Base, 1>>},
          {"M=1 block 1 row x 2 panels", run_tuned<Avx2, OneRowPanels<Base, 2>>},
          {"M=1 block 1 row x 3 panels", run_tuned<Avx2, OneRowPanels<Base, 3>>},
          {"2+ rows: block 2 rows x 1 panel", run_tuned<Avx2, Block<Base, 2, 1>>},
          {"2+ rows: block 3 rows x 1 panel", run_tuned<Avx2, Block<Base, 3, 1>>},
          {"2+ rows: block 2 rows x 2 panels", run_tuned<Avx2, Block<Base, 2, 2>>},
          {"large M: nibbles split per block (before)", run_tuned<Avx2, NibblesPerBlock<Base>>},
          {"large M: panels unpacked up to K = 3072 only", run_tuned<Avx2, UnpackMaxK<Base, 3072>>},
          {"the layer's kernel (the library's build of the default)",
           [](const SvdquantPacked& w, const float* x, int64_t m, float* y) { svdquant_avx2(w, x, m, y, false); }}};
}

}  // namespace mixq::bench
