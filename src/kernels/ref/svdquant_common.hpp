#pragma once
// Per-row pieces of the SVDQuant W4A4 linear (docs/FORMATS.md §3.8) shared by
// the reference and the AVX-512 kernel. They sit in an anonymous namespace on
// purpose: every translation unit compiles its own copy with its own ISA flags
// (no ODR mixing of AVX-512 and baseline code), and since they are plain IEEE
// operations in a fixed order (no FMA contraction under -std=c++20), every
// copy produces bit-identical results.
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace mixq::kernels::svdq {
namespace {

constexpr int64_t kGroup = 64;
constexpr float kShift = 0.171875f;

// One activation row -> offset-unsigned int4 codes (qa + offset, offset 8 for
// signed activations, 0 for unsigned), one scale and one code sum per group:
//   x_main = x (+0.171875 when unsigned); v = x_main / smooth[k];
//   s = max(max|v|, 1e-10) / qmax (7 signed, 15 unsigned);
//   q = clamp(rint(v / s), -7..7 or 0..15).
// A NaN v (a NaN input, or 0 / 0 where the smoothing factor is 0) gives code
// byte 0, what x86's truncating conversion of NaN (0x80000000) leaves in the
// low byte and the vector kernels store; converting a NaN float to an integer
// is undefined in C++, so it is not left to the cast.
// `tmp` holds k floats.
inline void quantize_act_row(const float* x, const float* smooth, int64_t k, bool act_unsigned, float* tmp,
                             uint8_t* codes, float* scales, int32_t* code_sums) {
  const float shift = act_unsigned ? kShift : 0.0f;
  for (int64_t i = 0; i < k; ++i) tmp[i] = (x[i] + shift) / smooth[i];
  const float qmax = act_unsigned ? 15.0f : 7.0f, lo = act_unsigned ? 0.0f : -7.0f;
  const float offset = act_unsigned ? 0.0f : 8.0f;
  for (int64_t g = 0; g < k / kGroup; ++g) {
    const float* v = tmp + g * kGroup;
    float a = 0.0f;
    for (int64_t i = 0; i < kGroup; ++i) a = std::max(a, std::fabs(v[i]));
    const float s = std::max(a, 1e-10f) / qmax;
    int32_t sum = 0;
    for (int64_t i = 0; i < kGroup; ++i) {
      const float q = std::min(std::max(std::nearbyint(v[i] / s), lo), qmax) + offset;
      const auto c = std::isnan(q) ? uint8_t{0} : static_cast<uint8_t>(static_cast<int32_t>(q));
      codes[g * kGroup + i] = c;
      sum += c;
    }
    scales[g] = s;
    code_sums[g] = sum;
  }
}

// lora[r] = Σ_k x[k]·proj_down[k, r], fp32 in k order.
inline void lora_down_row(const float* x, const float* proj_down, int64_t k, int64_t rank, float* lora) {
  for (int64_t r = 0; r < rank; ++r) lora[r] = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    const float xi = x[i];
    const float* p = proj_down + i * rank;
    for (int64_t r = 0; r < rank; ++r) lora[r] = lora[r] + xi * p[r];
  }
}

// out[n] = Σ_r lora[r]·proj_up_t[r, n] in r order (proj_up_t = proj_upᵀ, [R, N]).
inline void lora_up_row(const float* lora, const float* proj_up_t, int64_t rank, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = 0.0f;
  for (int64_t r = 0; r < rank; ++r) {
    const float l = lora[r];
    const float* p = proj_up_t + r * n;
    for (int64_t j = 0; j < n; ++j) out[j] = out[j] + l * p[j];
  }
}

}  // namespace
}  // namespace mixq::kernels::svdq
