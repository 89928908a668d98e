#include "kernels/ref/float_ref.hpp"

#include <cmath>
#include <cstring>
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

// linear_f32 with W's row c produced by row(c, out[k]) when it is needed:
// the same arithmetic per output (f32 acc += x·w in k order, then + bias).
template <class Row>
void linear_by_rows(const float* x, int64_t m, int64_t k, int64_t n, const float* bias, float* y, Row row) {
  std::vector<float> w(static_cast<size_t>(k));
  for (int64_t c = 0; c < n; ++c) {
    row(c, w.data());
    for (int64_t r = 0; r < m; ++r) {
      float acc = 0.0f;
      for (int64_t i = 0; i < k; ++i) acc += x[r * k + i] * w[i];
      y[r * n + c] = bias ? acc + bias[c] : acc;
    }
  }
}

template <class T, class Decode>
void decode_row(const uint8_t* src, int64_t k, float* out, Decode decode) {
  for (int64_t i = 0; i < k; ++i) {
    T v;
    std::memcpy(&v, src + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    out[i] = decode(v);
  }
}

uint8_t nvfp4_code(const Nvfp4Weight& w, int64_t row, int64_t col) {
  const uint8_t byte = w.codes[row * w.row_bytes + col / 2];
  return (col % 2 == 0) ? byte >> 4 : byte & 0x0F;  // high nibble = even element
}

}  // namespace

void linear_stored(const float* x, int64_t m, int64_t k, const uint8_t* w, DType dtype, int64_t n,
                   const float* bias, float* y) {
  const int64_t bytes = k * static_cast<int64_t>(dtype_size(dtype));
  linear_by_rows(x, m, k, n, bias, y, [&](int64_t c, float* out) {
    const uint8_t* src = w + c * bytes;
    switch (dtype) {  // the unquantized dtypes, as to_f32 converts them
      case DType::F32: std::memcpy(out, src, static_cast<size_t>(bytes)); break;
      case DType::F16: decode_row<uint16_t>(src, k, out, f16_to_f32); break;
      case DType::BF16: decode_row<uint16_t>(src, k, out, bf16_to_f32); break;
      case DType::F64: decode_row<double>(src, k, out, [](double v) { return static_cast<float>(v); }); break;
      default: fail("float reference: unquantized weights are F32, F16, BF16 or F64, not {}", dtype_name(dtype));
    }
  });
}

void nvfp4_linear_full_precision(const float* x, int64_t m, int64_t k, const Nvfp4Weight& w, int64_t n,
                                 const float* bias, float* y) {
  const int64_t blocks = w.row_bytes * 2 / 16;
  if (n > w.rows || k > 2 * w.row_bytes)
    fail("nvfp4 reference: y has {} columns and x {}, the weight holds [{}, {}]", n, k, w.rows, w.row_bytes * 2);
  linear_by_rows(x, m, k, n, bias, y, [&](int64_t r, float* out) {
    for (int64_t c = 0; c < k; ++c)
      out[c] = e2m1_to_f32(nvfp4_code(w, r, c)) * (w.global * e4m3_to_f32(w.scales[swizzled_offset(r, c / 16, blocks)]));
  });
}

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
  std::vector<float> wf(static_cast<size_t>(k)), xf(static_cast<size_t>(m * k));
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = decode(q[i]);
  const float alpha = input_scale * weight_scale;
  for (int64_t c = 0; c < n; ++c) {
    for (int64_t i = 0; i < k; ++i) wf[i] = decode(w[c * k + i]);  // one row at a time
    for (int64_t r = 0; r < m; ++r) {
      float acc = 0.0f;
      for (int64_t i = 0; i < k; ++i) acc += xf[r * k + i] * wf[i];
      const float out = acc * alpha;
      y[r * n + c] = bias ? out + bias[c] : out;
    }
  }
}

void fp8_linear_full_precision(const float* x, int64_t m, int64_t k, const uint8_t* w, int64_t n, DType dtype,
                               float weight_scale, const float* bias, float* y) {
  auto decode = dtype == DType::F8_E4M3 ? e4m3_to_f32 : e5m2_to_f32;
  linear_by_rows(x, m, k, n, bias, y, [&](int64_t c, float* out) {
    for (int64_t i = 0; i < k; ++i) out[i] = decode(w[c * k + i]) * weight_scale;
  });
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

void mxfp8_linear_full_precision(const float* x, int64_t m, int64_t k, const Mxfp8Weight& w, int64_t n,
                                 const float* bias, float* y) {
  const int64_t blocks = w.cols / 32;
  if (n > w.rows || k > w.cols)
    fail("mxfp8 reference: y has {} columns and x {}, the weight holds [{}, {}]", n, k, w.rows, w.cols);
  linear_by_rows(x, m, k, n, bias, y, [&](int64_t r, float* out) {
    for (int64_t c = 0; c < k; ++c)
      out[c] = e4m3_to_f32(w.codes[r * w.cols + c]) * e8m0_to_f32(w.scales[swizzled_offset(r, c / 32, blocks)]);
  });
}

}  // namespace mixq::kernels::ref
