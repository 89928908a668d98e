// Variations of the AVX-512 SVDQuant register blocks (SvdquantTile<Avx512>
// in svdquant_w4a4_impl.hpp) for bench_svdquant_tunings: each differs from
// the default in one member (the blocks BENCHMARKS.md compared, "third
// session").
#include "isa/svdquant_tunings_variants.hpp"
#include "support/svdquant_tunings.hpp"

namespace mixq::bench {

std::vector<SvdquantTuning> svdquant_tunings_avx512() {
  using namespace kernels::x86;
  using Base = SvdquantTile<Avx512>;
  return {{"default", run_tuned<Avx512, Base>},
          {"M=1 block 1 row x 2 panels", run_tuned<Avx512, OneRowPanels<Base, 2>>},
          {"M=1 block 1 row x 4 panels", run_tuned<Avx512, OneRowPanels<Base, 4>>},
          {"2+ rows: block 4 rows x 2 panels", run_tuned<Avx512, Block<Base, 4, 2>>},
          {"2+ rows: block 3 rows x 4 panels", run_tuned<Avx512, Block<Base, 3, 4>>}};
}

}  // namespace mixq::bench
