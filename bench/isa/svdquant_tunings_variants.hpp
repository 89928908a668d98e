#pragma once
// The SVDQuant register-block variations (SvdquantTile members) that
// bench/isa/svdquant_tunings.*.cpp list, and the kernel under one of them;
// included only by those files, which have their instruction set's flags.
#include "kernels/x86/no_fp_contract.hpp"
#include "kernels/x86/svdquant_w4a4_impl.hpp"

namespace mixq::kernels::x86 {
namespace {

template <class Base, int Panels>
struct OneRowPanels : Base {
  static constexpr int kOneRowPanels = Panels;
};
template <class Base, int Rows, int Panels>
struct Block : Base {
  static constexpr int kRows = Rows, kPanels = Panels;
};
template <class Base>
struct PrefetchIntoL2 : Base {
  static constexpr PrefetchHint kStreamPrefetchHint = _MM_HINT_T1;
};

template <class Base>
struct NibblesPerBlock : Base {
  static constexpr bool kUnpackLargeM = false;
};
template <class Base, int64_t MaxK>
struct UnpackMaxK : Base {
  static constexpr int64_t kUnpackMaxK = MaxK;
};

// The whole layer on target V under tile T (SvdquantTuning::run).
template <class V, class T>
void run_tuned(const SvdquantPacked& w, const float* x, int64_t m, float* y) {
  svdquant_forward<V, T>(w, x, m, y);
}

}  // namespace
}  // namespace mixq::kernels::x86
