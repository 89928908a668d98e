// Variations of the AVX2 SVDQuant register blocks (SvdquantTile<Avx2> in
// svdquant_w4a4_impl.hpp) for bench_svdquant_tunings: each differs from the
// default in one member.
#include "kernels/x86/no_fp_contract.hpp"
#include "kernels/x86/svdquant_w4a4_impl.hpp"
#include "support/svdquant_tunings.hpp"

namespace mixq::kernels::x86 {
namespace {

using Base = SvdquantTile<Avx2>;
template <int Panels>
struct OneRowPanels : Base {
  static constexpr int kOneRowPanels = Panels;
};
template <int Rows, int Panels>
struct Block : Base {
  static constexpr int kRows = Rows, kPanels = Panels;
};

template <class T>
void run(const SvdquantPacked& w, const float* x, int64_t m, float* y) {
  svdquant_forward<Avx2, T>(w, x, m, y);
}

}  // namespace
}  // namespace mixq::kernels::x86

namespace mixq::bench {

std::vector<SvdquantTuning> svdquant_tunings_avx2() {
  using namespace kernels::x86;
  return {{"default", run<Base>},
          {"M=1 block 1 row x 1 panel (before)", run<OneRowPanels<1>>},
          {"M=1 block 1 row x 2 panels", run<OneRowPanels<2>>},
          {"M=1 block 1 row x 3 panels", run<OneRowPanels<3>>},
          {"2+ rows: block 2 rows x 1 panel", run<Block<2, 1>>},
          {"2+ rows: block 3 rows x 1 panel", run<Block<3, 1>>},
          {"2+ rows: block 2 rows x 2 panels", run<Block<2, 2>>}};
}

}  // namespace mixq::bench
