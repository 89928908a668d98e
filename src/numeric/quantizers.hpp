#pragma once
// Reference quantizers (docs/FORMATS.md §2.5, §3.1–3.3) with T = f32: the
// formats use them for weights, the linear kernels for activations. Every
// stored scale is a dequantization multiplier (real ≈ q · scale).
#include <cstdint>
#include <optional>
#include <vector>

#include "mixq/dtype.hpp"

namespace mixq::quant {

// Q8row (§2.5), T = f32: s = max(amax/127, 1e-30); q = clamp(rint(x/s), -128, 127).
// x [m, k] row-major; q [m, k]; scale [m].
void q8row(const float* x, int64_t m, int64_t k, int8_t* q, float* scale);

// Q4row (§2.5), T = f32: a = max(amax, 1e-10); s = a/7; q = clamp(rint(x/s), -7, 7)
// (one value per int8, not packed). x [m, k]; q [m, k]; scale [m].
void q4row(const float* x, int64_t m, int64_t k, int8_t* q, float* scale);

// NVFP4 (§3.2). rows/cols padded to 16; codes unpacked (one 4-bit E2M1 code per byte, row-major
// [rows, cols]); block_scales linear (unswizzled) E4M3 bytes [rows, cols/16]; global = given or amax/2688.
struct Nvfp4Blocks {
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> codes, block_scales;
  float global_scale = 0;
};
Nvfp4Blocks quantize_nvfp4(const float* x, int64_t m, int64_t k, std::optional<float> global_scale);

// MXFP8 (§3.3). rows/cols padded to 32; codes E4M3 [rows, cols]; exponents E8M0 [rows, cols/32]
// linear (unswizzled). Uses an exact ceil(log2(amax/448)).
struct Mxfp8Blocks {
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> codes, exponents;
};
Mxfp8Blocks quantize_mxfp8(const float* x, int64_t m, int64_t k);

// FP8 per tensor (§3.1) with T = f32: q = fp8(clamp(x * (1/scale), -max, max)).
// fp8_dtype is F8_E4M3 or F8_E5M2 (else Error).
void quantize_fp8(const float* x, int64_t count, float scale, DType fp8_dtype, uint8_t* out);

}  // namespace mixq::quant
