#pragma once
// Fast kernels of the AWQ W4A16 linear (docs/FORMATS.md §3.9): AVX-512 BF16
// (below), AVX2 + FMA (awq_w4a16.avx2.cpp: decodes to f32, see there) and the
// same f32 decode on AVX-512 (awq_avx512_fma).
//
//   y[m,n] = Σ_g ( scale[g,n]·Σ_{k∈g} (q−8)·bf16(x[m,k]) + zeros[g,n]·Σ_{k∈g} x[m,k] ) + b[n]
//
// (q − 8) is exact in bf16, so the only rounding beyond fp32 accumulation is
// x → bf16 (relative 2^-9 per element); the zero term uses the fp32 sums of x.
// Packed weights: panels of 16 output columns; per panel and k-pair one
// 16-byte row whose byte i is the stored byte of column 16p+i (low nibble k,
// high nibble k+1). It is decoded in registers: vpmovzxbd spreads the bytes to
// dword lanes, one vpmaddwd puts the two nibbles into the two word indices,
// and vpermw maps them to bf16(q − 8) pairs, the exact
// operand layout `vdpbf16ps` needs against a broadcast activation pair. The
// weights stay 4-bit in memory (M = 1 is memory-bound).
// The per-group scale and zero stay at the width the file stores them (F16,
// BF16 or F32: kernels/stored_floats.hpp) and are widened, exactly, as the
// kernels load them, so a loaded layer holds K/G·N·2·2 bytes of them for a
// 16-bit file, not K/G·N·2·4.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/stored_floats.hpp"

namespace mixq::kernels::x86 {

struct AwqPacked {
  int64_t n = 0, k = 0, group = 0, panels = 0;
  std::vector<uint8_t> codes;   // [panels][K/2][16]
  StoredFloats scale;           // [K/G][panels·16], 0 in padding columns
  StoredFloats zeros;           // [K/G][panels·16], 0 in padding columns; the width of scale
  std::vector<float> bias;      // [N] or empty
  int64_t bytes() const {
    return static_cast<int64_t>(codes.size() + scale.bytes() + zeros.bytes() + bias.size() * sizeof(float));
  }
};

// Baseline code. codes: the stored [N, K/2] bytes; scale / zeros [K/G, N]
// at their stored widths (kept; both widened to f32 if the two differ).
AwqPacked awq_pack(const uint8_t* codes, FloatSource scale, FloatSource zeros, int64_t n, int64_t k,
                   int64_t group, std::vector<float> bias);
// Requires AVX-512 BF16.
void awq_avx512(const AwqPacked& w, const float* x, int64_t m, float* y);
// Requires AVX-512 F. The AVX2 kernel's math (fp32 activations, w = q·s +
// (z − 8·s) decoded in f32, k-order FMA chains) in zmm: for cores where
// `vfmadd231ps` out-runs `vdpbf16ps` (kernels::float_dot).
void awq_avx512_fma(const AwqPacked& w, const float* x, int64_t m, float* y);
// Requires AVX2 + FMA. fp32 activations; w = q·s + (z − 8·s) decoded in f32.
void awq_avx2(const AwqPacked& w, const float* x, int64_t m, float* y);

}  // namespace mixq::kernels::x86
