#pragma once
// Reference kernels of the float family (docs/FORMATS.md §3.1–3.3 "Linear"):
// T = f32, fp32 accumulation, one final rounding. They are the oracle for the
// fast kernels and run `--kernel ref`. Plain loops, no ISA-specific code.
#include <cstdint>
#include <optional>

#include "mixq/dtype.hpp"

namespace mixq::kernels::ref {

// y[m,n] = Σ_k x[m,k]·w[n,k] + bias[n] (bias may be null); f32 accumulation
// in k order.
void linear_f32(const float* x, int64_t m, int64_t k, const float* w, int64_t n, const float* bias,
                float* y);

// linear_f32 over a weight as stored: `w` [n, k] of F32, F16, BF16 or F64
// (little-endian), decoded one row at a time (no f32 copy of the weight).
void linear_stored(const float* x, int64_t m, int64_t k, const uint8_t* w, DType dtype, int64_t n,
                   const float* bias, float* y);

// NVFP4 weights as stored: `codes` [rows, row_bytes] E2M1 pairs, high nibble =
// even element (§2.2a); `scales` the swizzled E4M3 block scales of the logical
// [rows, 2*row_bytes/16] matrix (§2.3); `global` = weight_scale_2.
struct Nvfp4Weight {
  const uint8_t* codes = nullptr;
  int64_t rows = 0;
  int64_t row_bytes = 0;
  const uint8_t* scales = nullptr;
  float global = 0.0f;
};

// NVFP4 W4A4 (§3.2 "Linear"): x (times pre_quant_scale[k] when given) is
// quantized to NVFP4 with g_x = input_scale or amax/2688; then
//   y = (g_x·g_w) · Σ_b fma-accumulated (S_x·S_w)·Σ_{k∈b} e2m1(x)·e2m1(w) + bias.
// Block sums are exact; the block loop accumulates with fma in block order.
void nvfp4_w4a4(const float* x, int64_t m, int64_t k, const Nvfp4Weight& w, int64_t n,
                std::optional<float> input_scale, const float* pre_quant_scale, const float* bias,
                float* y);

// Full precision (full_precision_matrix_mult, §3.2 decode with T = f32):
// linear_f32 over W = e2m1·(S·g), each row decoded when it is used.
void nvfp4_linear_full_precision(const float* x, int64_t m, int64_t k, const Nvfp4Weight& w, int64_t n,
                                 const float* bias, float* y);

// FP8 per tensor (§3.1, ComfyUI semantics): x quantized to `dtype` (F8_E4M3 or
// F8_E5M2) with scale s_x (input_scale, or 1.0 when the layer has none);
//   y = (Σ_k fp8(q_x)·fp8(q_w)) · (s_x·s_w) + bias.
void fp8_linear(const float* x, int64_t m, int64_t k, const uint8_t* w, int64_t n, DType dtype,
                float weight_scale, float input_scale, const float* bias, float* y);

// Full precision: linear_f32 over W = fp8·weight_scale, each row decoded
// when it is used.
void fp8_linear_full_precision(const float* x, int64_t m, int64_t k, const uint8_t* w, int64_t n, DType dtype,
                               float weight_scale, const float* bias, float* y);

// MXFP8 weights as stored: E4M3 `codes` [rows, cols] and swizzled E8M0
// exponents of the logical [rows, cols/32] matrix.
struct Mxfp8Weight {
  const uint8_t* codes = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* scales = nullptr;
};

// MXFP8 (§3.3): x quantized dynamically per 32-block; then
//   y = Σ_b fma-accumulated (2^(ex-127)·2^(ew-127)) · Σ_{k∈b} e4m3·e4m3 + bias.
void mxfp8_linear(const float* x, int64_t m, int64_t k, const Mxfp8Weight& w, int64_t n,
                  const float* bias, float* y);

// Full precision: linear_f32 over W = e4m3·2^(e-127), each row decoded when
// it is used.
void mxfp8_linear_full_precision(const float* x, int64_t m, int64_t k, const Mxfp8Weight& w, int64_t n,
                                 const float* bias, float* y);

}  // namespace mixq::kernels::ref
