#pragma once
// Dense GEMM cores for the float family on x86: y = alpha·(A·Bᵀ) + bias with
// fp32 accumulation, for
//  - bf16 operands (`vdpbf16ps`): FP8, MXFP8 and full-precision NVFP4 weights
//    decode exactly to bf16 (E4M3, E5M2, E2M1×E4M3, E4M3×2^e all fit), and
//    quantized FP8/MXFP8 activations do too;
//  - f32 operands (`vfmadd231ps`): unquantized layers (f32 math).
//
// Weights are repacked once at Linear creation into panels of 16 output
// columns: per panel, one 64-byte row per "step" (a k-pair of bf16 as [16][2],
// or one k of f32 as [16]). Why: the kernel keeps 16 columns in the lanes of a
// zmm and broadcasts 4 bytes of the activation (vpbroadcastd-able), so a panel
// row is exactly one aligned load. Decoding FP8 codes once into bf16 costs 2
// bytes per weight instead of 1; the formats that must stream at the memory
// limit (NVFP4) use their own nibble kernel instead.
//
// The AVX2 core (float_gemm.avx2.cpp) reads the same panels as two ymm per
// row and widens bf16 to f32 in registers (no bf16 dot on AVX2); its
// activations are f32. The AVX-512 FMA core (float_gemm_avx512_fma) does the
// same with zmm: on cores where `vfmadd231ps` out-runs `vdpbf16ps` (measured,
// kernels::float_dot() in kernels/calibrate.hpp) the bf16 panels run there.
#include <cstdint>
#include <vector>

namespace mixq::kernels::x86 {

enum class GemmType { bf16, f32 };

struct FloatPanels {
  GemmType type = GemmType::bf16;
  int64_t n = 0;       // logical output columns
  int64_t k = 0;       // logical input features
  int64_t steps = 0;   // bf16: ceil(k/2) k-pairs; f32: k
  int64_t panels = 0;  // ceil(n / 16)
  std::vector<uint32_t> data;  // panels · steps · 16 words (64 B rows)
};

// w: [n, k] f32 row-major. bf16 packing rounds to nearest even (exact for the
// decoded quantized formats).
FloatPanels pack_panels(const float* w, int64_t n, int64_t k, GemmType type);

// a: [m, steps] 32-bit words (bf16: pairs [k, k+1] with zero padding; f32: x
// itself). y [m, n] = alpha·(a·wᵀ) + bias (bias may be null).
void float_gemm_avx512(const uint32_t* a, int64_t m, const FloatPanels& w, float alpha,
                       const float* bias, float* y);

// AVX-512 f32-FMA core over bf16 panels (bf16 widened in registers: even k =
// word << 16, odd k = word & 0xFFFF0000). a is f32 [m, lda], lda >= 2·steps
// (pad odd k with a zero column). Every output is the FMA chain in k order
// (a[k]·w[k] added one k at a time), so with products exact in f32 (bf16 or
// FP8 activations) it equals the reference's sum bit for bit.
// y [m, n] = alpha·(a·wᵀ) + bias (bias may be null; mul, then add).
void float_gemm_avx512_fma(const float* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha,
                           const float* bias, float* y);

// Activation preparation into bf16 pairs [m, steps] (steps = ceil(k_out/2),
// columns past k zero):
//  - round: RNE of x to bf16 (full-precision layers);
//  - e4m3 / e5m2: the FP8 value of clamp(x·inv_scale, ±max), RNE (§3.1);
//  - mxfp8: per 32-block dynamic MXFP8 (§3.3), value·2^(e-127).
//  - none: x unchanged (AVX2 only: its full-precision layers stay in f32).
enum class ActPrep { round, e4m3, e5m2, mxfp8, none };
void prepare_bf16_avx512(const float* x, int64_t m, int64_t k, int64_t steps, ActPrep prep,
                         float inv_scale, uint32_t* out);

// The same preparation into f32 [m, cols] (cols >= k, zeros past k; mxfp8
// needs cols % 32 == 0) for float_gemm_avx512_fma: `round` gives the bf16
// value of x (kept in f32), none x itself, e4m3/e5m2/mxfp8 the quantized values.
void prepare_f32_avx512(const float* x, int64_t m, int64_t k, int64_t cols, ActPrep prep, float inv_scale,
                        float* out);

// AVX2 + FMA core: a is f32 [m, lda]; bf16 panels read a[2s] and a[2s+1] for
// every step s (lda >= 2·steps, so pad odd k with a zero column), f32 panels
// a[s] (lda >= steps). y [m, n] = alpha·(a·wᵀ) + bias (bias may be null).
void float_gemm_avx2(const float* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha,
                     const float* bias, float* y);

// AVX2 activation preparation into f32 [m, cols] (cols >= k, zeros past k):
// none, e4m3, e5m2 or mxfp8 (cols a multiple of 32) with exactly the
// reference quantizer's values; `round` is refused (the AVX2 GEMM is f32).
void prepare_f32_avx2(const float* x, int64_t m, int64_t k, int64_t cols, ActPrep prep, float inv_scale,
                      float* out);

}  // namespace mixq::kernels::x86
