// Reference quantizers with T = f32 (docs/FORMATS.md §2.5, §3.1–3.3). These are
// the eager semantics: divide by the scale (never multiply by a reciprocal,
// except FP8 which docs/FORMATS.md §3.1 defines with 1/s), round half to even.
#include "numeric/quantizers.hpp"

#include <algorithm>
#include <cmath>

#include "util/parallel.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::quant {
namespace {

int64_t roundup(int64_t a, int64_t m) { return (a + m - 1) / m * m; }

void check_shape(const char* what, int64_t m, int64_t k) {
  if (m < 0 || k < 0) fail("{}: negative shape [{}, {}]", what, m, k);
}

// rint then clamp to [lo, hi]; NaN (0/0 or inf/inf from degenerate rows) -> 0.
int clamp_rint(float v, int lo, int hi) {
  if (std::isnan(v)) return 0;
  const float r = std::nearbyint(std::clamp(v, static_cast<float>(lo), static_cast<float>(hi)));
  return static_cast<int>(r);
}

// max |x| ignoring NaN (comparisons with NaN are false).
float absmax(const float* x, int64_t count) {
  float a = 0.0f;
  for (int64_t i = 0; i < count; ++i) a = std::max(a, std::fabs(x[i]));
  return a;
}

// Exact ceil(log2(r)) for a positive finite f32 r (frexp is exact).
int ceil_log2(float r) {
  int exponent = 0;
  const float mantissa = std::frexp(r, &exponent);  // r = mantissa · 2^exponent, mantissa in [0.5, 1)
  return mantissa == 0.5f ? exponent - 1 : exponent;
}

// Rows are independent: split them over the thread pool (serial when nested
// inside another parallel_for, or for small inputs).
template <class Body>
void each_row(int64_t rows, int64_t row_len, Body body) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_len));
  util::parallel_for(rows, grain, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) body(r);
  });
}

}  // namespace

void q8row(const float* x, int64_t m, int64_t k, int8_t* q, float* scale) {
  check_shape("q8row", m, k);
  each_row(m, k, [&](int64_t r) {
    const float* row = x + r * k;
    const float s = std::max(absmax(row, k) / 127.0f, 1e-30f);
    scale[r] = s;
    for (int64_t i = 0; i < k; ++i) q[r * k + i] = static_cast<int8_t>(clamp_rint(row[i] / s, -128, 127));
  });
}

void q4row(const float* x, int64_t m, int64_t k, int8_t* q, float* scale) {
  check_shape("q4row", m, k);
  each_row(m, k, [&](int64_t r) {
    const float* row = x + r * k;
    const float s = std::max(absmax(row, k), 1e-10f) / 7.0f;
    scale[r] = s;
    for (int64_t i = 0; i < k; ++i) q[r * k + i] = static_cast<int8_t>(clamp_rint(row[i] / s, -7, 7));
  });
}

Nvfp4Blocks quantize_nvfp4(const float* x, int64_t m, int64_t k, std::optional<float> global_scale) {
  check_shape("quantize_nvfp4", m, k);
  Nvfp4Blocks out;
  out.rows = roundup(m, 16);
  out.cols = roundup(k, 16);
  const int64_t blocks_per_row = out.cols / 16;
  out.codes.assign(static_cast<size_t>(out.rows * out.cols), 0);
  out.block_scales.assign(static_cast<size_t>(out.rows * blocks_per_row), 0);

  float g;
  if (global_scale) {
    g = *global_scale;
    if (!std::isfinite(g) || g <= 0.0f) fail("NVFP4 global scale must be finite and > 0, got {}", g);
  } else {
    const float amax = absmax(x, m * k);
    if (!std::isfinite(amax)) fail("NVFP4: the tensor holds an infinite value");
    g = amax / 2688.0f;  // 448 · 6
    // eager divides by g = 0 for an all-zero tensor (NaN scales); mixq keeps
    // every block scale and code 0, which decodes to the same zeros.
    if (g == 0.0f) return out;
  }
  out.global_scale = g;

  each_row(m, k, [&](int64_t r) {
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      const int64_t begin = b * 16, end = std::min(k, begin + 16);
      const float* src = x + r * k;
      const float a = begin < end ? absmax(src + begin, end - begin) : 0.0f;
      const float t = (a / 6.0f) / g;
      const uint8_t s = f32_to_e4m3(std::min(t, 448.0f));
      out.block_scales[static_cast<size_t>(r * blocks_per_row + b)] = s;
      const float block = g * e4m3_to_f32(s);
      if (block == 0.0f) continue;  // zero block or S underflowed: codes stay 0
      uint8_t* codes = out.codes.data() + r * out.cols;
      for (int64_t i = begin; i < end; ++i)
        codes[i] = f32_to_e2m1(std::clamp(src[i] / block, -6.0f, 6.0f));
    }
  });
  return out;
}

Mxfp8Blocks quantize_mxfp8(const float* x, int64_t m, int64_t k) {
  check_shape("quantize_mxfp8", m, k);
  Mxfp8Blocks out;
  out.rows = roundup(m, 32);
  out.cols = roundup(k, 32);
  const int64_t blocks_per_row = out.cols / 32;
  out.codes.assign(static_cast<size_t>(out.rows * out.cols), 0);
  out.exponents.assign(static_cast<size_t>(out.rows * blocks_per_row), 0);
  const float min_ratio = std::ldexp(1.0f, -127);

  each_row(m, k, [&](int64_t r) {
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      const int64_t begin = b * 32, end = std::min(k, begin + 32);
      const float* src = x + r * k;
      const float a = begin < end ? absmax(src + begin, end - begin) : 0.0f;
      if (a == 0.0f) continue;  // exponent byte 0, codes 0
      const float ratio = a / 448.0f;
      const int e = std::isfinite(ratio)
                        ? std::clamp(ceil_log2(std::max(ratio, min_ratio)) + 127, 0, 254)
                        : 254;
      out.exponents[static_cast<size_t>(r * blocks_per_row + b)] = static_cast<uint8_t>(e);
      const float scale = std::ldexp(1.0f, e - 127);
      uint8_t* codes = out.codes.data() + r * out.cols;
      for (int64_t i = begin; i < end; ++i) codes[i] = f32_to_e4m3(std::clamp(src[i] / scale, -448.0f, 448.0f));
    }
  });
  return out;
}

void quantize_fp8(const float* x, int64_t count, float scale, DType fp8_dtype, uint8_t* out) {
  if (count < 0) fail("quantize_fp8: negative count {}", count);
  if (fp8_dtype != DType::F8_E4M3 && fp8_dtype != DType::F8_E5M2)
    fail("quantize_fp8: unsupported output type {} (F8_E4M3 or F8_E5M2)", dtype_name(fp8_dtype));
  const float inv = 1.0f / scale;
  const bool e4m3 = fp8_dtype == DType::F8_E4M3;
  const float max = e4m3 ? 448.0f : 57344.0f;
  constexpr int64_t kChunk = 16384;
  each_row((count + kChunk - 1) / kChunk, kChunk, [&](int64_t chunk) {
    const int64_t end = std::min(count, (chunk + 1) * kChunk);
    for (int64_t i = chunk * kChunk; i < end; ++i) {
      const float v = std::clamp(x[i] * inv, -max, max);
      out[i] = e4m3 ? f32_to_e4m3(v) : f32_to_e5m2(v);
    }
  });
}

}  // namespace mixq::quant
