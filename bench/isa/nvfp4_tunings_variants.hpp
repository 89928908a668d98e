#pragma once
// The NVFP4 register-tile variations (Nvfp4Tile members) that
// bench/isa/nvfp4_tunings.*.cpp list, and the GEMM under one of them;
// included only by those files, which have their instruction set's flags.
#include "kernels/x86/nvfp4_w4a4_impl.hpp"

namespace mixq::kernels::x86 {
namespace {

// Large M (from kLargeM rows, and weights read in place from 9 rows): MR rows x J panels.
template <class Base, int MR, int J>
struct LargeTile : Base {
  static constexpr int kLargeMR = MR, kLargeJ = J;
};
// Packed weights from this many rows take the large-M path (panels decoded
// once per row chunk) instead of the mid tiles, which decode in registers.
template <class Base, int64_t M>
struct LargeFrom : Base {
  static constexpr int64_t kLargeM = M;
};
// 3 rows up to kLargeM (packed weights).
template <class Base, int MR, int J>
struct MidTile : Base {
  static constexpr int kMidMR = MR, kMidJ = J;
};
// Column vectors per pass over the weight parts, in every tile (0: all).
template <class Base, int G>
struct DotGroup : Base {
  static constexpr int kDotGroup = G;
};

// The GEMM on target V under tiles T (Nvfp4Tuning::run).
template <class V, class T>
void run_tuned(const Nvfp4Activation& act, const Nvfp4Weights& w, const float* bias, float* y) {
  nvfp4_gemm<V, T>(act, w, bias, y);
}

}  // namespace
}  // namespace mixq::kernels::x86
