#include "kernels/ref/float_ref.hpp"

#include <cmath>
#include <vector>

#include "numeric/quantizers.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "numeric/swizzle.hpp"

namespace mixq::kernels::ref {

void linear_f32(const float* x, int64_t m, int64_t k, const float* w, int64_t n, const float* bias,
                float* y) {
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      float acc = 0.0f;
      for (int64_t i = 0; i < k; ++i) acc += x[r * k + i] * w[c * k + i];
      y[r * n + c] = bias ? acc + bias[c] : acc;
    }
  }
}

namespace {

uint8_t nvfp4_code(const Nvfp4Weight& w, int64_t row, int64_t col) {
  const uint8_t byte = w.codes[row * w.row_bytes + col / 2];
  return (col % 2 == 0) ? byte >> 4 : byte & 0x0F;  // high nibble = even element
}

}  // namespace

void nvfp4_w4a4(const float* x, int64_t m, int64_t k, const Nvfp4Weight& w, int64_t n,
                std::optional<float> input_scale, const float* pre_quant_scale, const float* bias,
                float* y) {
  const int64_t weight_blocks = w.row_bytes * 2 / 16;
  if (n > w.rows || (k + 15) / 16 > weight_blocks)
    fail("nvfp4 reference: x is [{}, {}] and y has {} columns, the weight holds [{}, {}]", m, k, n,
         w.rows, w.row_bytes * 2);
  std::vector<float> scaled(x, x + m * k);
  if (pre_quant_scale)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t i = 0; i < k; ++i) scaled[r * k + i] *= pre_quant_scale[i];
  const quant::Nvfp4Blocks q = quant::quantize_nvfp4(scaled.data(), m, k, input_scale);
  const int64_t blocks = q.cols / 16;
  const float alpha = q.global_scale * w.global;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      float acc = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        float dot = 0.0f;  // exact: multiples of 0.25, |dot| <= 576
        for (int64_t i = b * 16; i < b * 16 + 16; ++i)
          dot += e2m1_to_f32(q.codes[r * q.cols + i]) * e2m1_to_f32(nvfp4_code(w, c, i));
        const float sx = e4m3_to_f32(q.block_scales[r * blocks + b]);
        const float sw = e4m3_to_f32(w.scales[swizzled_offset(c, b, weight_blocks)]);
        acc = std::fma(dot, sx * sw, acc);
      }
      const float out = alpha * acc;
      y[r * n + c] = bias ? out + bias[c] : out;
    }
  }
}

void fp8_linear(const float* x, int64_t m, int64_t k, const uint8_t* w, int64_t n, DType dtype,
                float weight_scale, float input_scale, const float* bias, float* y) {
  std::vector<uint8_t> q(static_cast<size_t>(m * k));
  quant::quantize_fp8(x, m * k, input_scale, dtype, q.data());
  auto decode = dtype == DType::F8_E4M3 ? e4m3_to_f32 : e5m2_to_f32;
  std::vector<float> wf(static_cast<size_t>(n * k)), xf(static_cast<size_t>(m * k));
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = decode(w[i]);
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = decode(q[i]);
  const float alpha = input_scale * weight_scale;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      float acc = 0.0f;
      for (int64_t i = 0; i < k; ++i) acc += xf[r * k + i] * wf[c * k + i];
      const float out = acc * alpha;
      y[r * n + c] = bias ? out + bias[c] : out;
    }
  }
}

void mxfp8_linear(const float* x, int64_t m, int64_t k, const Mxfp8Weight& w, int64_t n,
                  const float* bias, float* y) {
  const int64_t weight_blocks = w.cols / 32;
  if (n > w.rows || (k + 31) / 32 > weight_blocks)
    fail("mxfp8 reference: x is [{}, {}] and y has {} columns, the weight holds [{}, {}]", m, k, n,
         w.rows, w.cols);
  const quant::Mxfp8Blocks q = quant::quantize_mxfp8(x, m, k);
  const int64_t blocks = q.cols / 32;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      float acc = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        float dot = 0.0f;
        for (int64_t i = b * 32; i < b * 32 + 32; ++i)
          dot += e4m3_to_f32(q.codes[r * q.cols + i]) * e4m3_to_f32(w.codes[c * w.cols + i]);
        const float sx = e8m0_to_f32(q.exponents[r * blocks + b]);
        const float sw = e8m0_to_f32(w.scales[swizzled_offset(c, b, weight_blocks)]);
        acc = std::fma(dot, sx * sw, acc);
      }
      y[r * n + c] = bias ? acc + bias[c] : acc;
    }
  }
}

}  // namespace mixq::kernels::ref
