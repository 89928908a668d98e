#pragma once
// The FMA core's scaled activations (AVX2, few rows: FloatTile::kScaledXRows):
// FP8 codes widened by integer operations to value·2^-120 (E4M3) or
// value·2^-112 (E5M2) (FloatIo::fp8_by_exponent) against activations times
// 2^112, and for MXFP8 the sums kept divided by their block scales (micro()
// in float_gemm_impl.hpp), each where it gives the f16 widening's bits.
// E5M2's inf and NaN codes (exponent 31) come out finite this way: the GEMM
// runs the panels that hold one again on the f16 widening (packed:
// FloatPanels::nonfinite_panels; in place: found as it packs). Include only
// from float_gemm_impl.hpp (the per-target translation units' anonymous
// namespace).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/x86/float_gemm.hpp"

namespace mixq::kernels::x86 {
namespace {

// The tuning Tune for a call whose activations run scaled by 2^112 (the
// codes of an e4m3, e5m2 or mxfp8 layer decoded by
// FloatIo::fp8_by_exponent).
template <class Tune>
struct WithScaledX : Tune {
  static constexpr bool kScaledX = true;
};

// The denormals-are-zero flag of this thread's MXCSR: with it set, the
// subnormal f32 that fp8_by_exponent makes of subnormal codes would read as
// zero.
inline bool denormals_are_zero() { return (_mm_getcsr() & 0x0040u) != 0; }

// Whether an MXFP8 layer's sums may run divided by their block scales
// (micro() in float_gemm_impl.hpp, kRescaled) with the same bits, for
// activations whose finite nonzero |x| lie in [2^x_lo, 2^(x_hi+1)) (x_lo,
// x_hi: ilogb of the smallest and largest). Rounding commutes with a
// power-of-two scaling unless a value is subnormal or overflows. Every
// partial sum the f16
// widening forms (x · w, w = value·2^-8 · 2^(b-127), b in [scale_min,
// scale_max]) is a multiple of 2^(x_lo-23) · 2^-17 · 2^(scale_min-127),
// since x is a multiple of its ulp and E4M3's smallest step is 2^-9, and a
// rounded sum of such multiples stays one; divided by a block's scale, of
// 2^(x_lo-40+scale_min-scale_max). Both steps at least 2^-126 keep every
// nonzero sum normal in both forms. Below 2^(ceil(log2 k) + x_hi + 2 +
// scale_max - 127) (|value·2^-8| < 2), divided: times 2^(127-scale_min),
// both under 2^127, nothing overflows. A zero scale (byte 0) fails the
// first test; bytes 254 (2^127, whose inverse, which a first block's sums
// are multiplied by, is subnormal) and 255 (NaN) the last.
inline bool mxfp8_sums_rescale(const FloatPanels& w, int x_lo, int x_hi) {
  const int lo = w.scale_min, hi = w.scale_max;
  const int log2_k = std::bit_width(static_cast<uint64_t>(std::max<int64_t>(1, w.k - 1)));
  return x_lo + lo >= 41 && x_lo + lo - hi >= -86 && log2_k + x_hi + hi <= 252 && log2_k + x_hi + hi - lo <= 125 &&
         hi <= 253;
}

// For an FP8 (e4m3, e5m2) or MXFP8 layer of at most Tune::kScaledXRows
// rows: the activations times 2^112 in `scaled` (rows of k values), or null
// where that does not hold every product exactly (a finite |x| >= 2^16
// would overflow), MXFP8's sums could not be rescaled exactly
// (mxfp8_sums_rescale), or the target does not use it. x·2^112 is exact (a
// power of two, no overflow), and x·2^112 · value·2^-120 is the very
// product x · value·2^-8 that the f16 widening gives E4M3 (x·2^112 ·
// value·2^-112 the product x · value it gives E5M2), so the FMA chains keep
// their bits.
template <class Tune>
const float* scaled_x(const float* a, int64_t lda, int64_t m, const FloatPanels& w, std::vector<float>& scaled) {
  const bool mx = w.type == PanelType::mxfp8;
  if (!is_fp8(w.type) || m > Tune::kScaledXRows || denormals_are_zero()) return nullptr;
  scaled.resize(static_cast<size_t>(m * w.k));
  constexpr float kLimit = 65536.0f;  // 2^16: 2^16·2^112 = 2^128 overflows
  float smallest = std::numeric_limits<float>::infinity(), largest = 0.0f;  // finite nonzero |x|
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < w.k; ++c) {
      const float x = a[r * lda + c];
      const float mag = std::fabs(x);
      if (mag >= kLimit && std::isfinite(x)) return nullptr;
      if (mag > 0.0f && mag < kLimit) {
        smallest = std::min(smallest, mag);
        largest = std::max(largest, mag);
      }
      scaled[static_cast<size_t>(r * w.k + c)] = x * 0x1p112f;
    }
  // No finite nonzero x: all sums are 0, ±inf or NaN, which any sane scale
  // range (that of |x| = 1) keeps.
  const bool none = largest == 0.0f;
  if (mx && !mxfp8_sums_rescale(w, none ? 0 : std::ilogb(smallest), none ? 0 : std::ilogb(largest))) return nullptr;
  return scaled.data();
}

}  // namespace
}  // namespace mixq::kernels::x86
