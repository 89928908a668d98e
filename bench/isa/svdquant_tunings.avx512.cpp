// Variations of the AVX-512 SVDQuant register blocks (SvdquantTile<Avx512>
// in svdquant_w4a4_impl.hpp) for bench_svdquant_tunings: each differs from
// the default in one member (the blocks BENCHMARKS.md compared, "third
// session"; 6 x 4: "Zen 4, second session"; no unpacking: "Zen 5, eighth
// session"). The last row is not a variant but the layer's own kernel,
// compiled in the library: on Zen 4, with five more blocks compiled into
// this file, its build of the default ran 6-10 % slower than that row and
// 6 x 4 looked 5-12 % faster; without them all three were within 2 %. A
// variant must beat that row, not only the default, before it is taken.
#include "isa/svdquant_tunings_variants.hpp"
#include "support/svdquant_tunings.hpp"

namespace mixq::bench {

std::vector<SvdquantTuning> svdquant_tunings_avx512() {
  using namespace kernels::x86;
  using Base = SvdquantTile<Avx512>;
  return {{"default", run_tuned<Avx512, Base>},
          {"M=1 block 1 row x 2 panels", run_tuned<Avx512, OneRowPanels<Base, 2>>},
          {"M=1 block 1 row x 4 panels", run_tuned<Avx512, OneRowPanels<Base, 4>>},
          {"small M: weights prefetched into L2 (T1)", run_tuned<Avx512, PrefetchIntoL2<Base>>},
          {"2+ rows: block 4 rows x 2 panels", run_tuned<Avx512, Block<Base, 4, 2>>},
          {"2+ rows: block 3 rows x 4 panels", run_tuned<Avx512, Block<Base, 3, 4>>},
          {"2+ rows: block 6 rows x 4 panels", run_tuned<Avx512, Block<Base, 6, 4>>},
          {"large M: nibbles split per block (no unpacking)", run_tuned<Avx512, NibblesPerBlock<Base>>},
          {"the layer's kernel (the library's build of the default)",
           [](const SvdquantPacked& w, const float* x, int64_t m, float* y) { svdquant_avx512(w, x, m, y); }}};
}

}  // namespace mixq::bench
