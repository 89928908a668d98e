#pragma once
// What the NVFP4 W4A4 kernels (nvfp4_w4a4_impl.hpp) and their in-place
// variants (nvfp4_in_place_impl.hpp) share: the weight decode table, the
// decoded-panel sizes and the job. Include only from *_impl.hpp files (the
// per-target translation units' anonymous namespace, simd_traits.hpp).
#include <cstdint>

#include "kernels/x86/nvfp4_w4a4.hpp"

namespace mixq::kernels::x86 {
namespace {

// Nibble code -> 12 + 2·e2m1(code).
constexpr int8_t kWeightTable[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};

// Decoded copy of a packed block, per vector h of columns: the 4 weight parts
// (kLanes·4 bytes each) then kLanes f32 scales; 320 bytes per block.
template <class V>
struct Decoded {
  static constexpr int64_t kVecBytes = 5 * 4 * V::kLanes;  // decode_panel_in_place repeats these
  static constexpr int64_t kBlockBytes = 320;
};

struct Nvfp4Job {
  const Nvfp4Activation* act;
  const float* bias;
  float* y;
  int64_t n;
  float alpha;
};

}  // namespace
}  // namespace mixq::kernels::x86
