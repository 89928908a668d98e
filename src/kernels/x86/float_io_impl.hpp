#pragma once
// The float GEMM's per-target panel-row loads and decodes (FloatIo: 16
// elements of a panel row -> 16 / kLanes f32 vectors, and the AVX-512 dot
// core's bf16 pairs), with the FP8 and E2M1 -> f16 bit tricks they share.
// Include only from float_gemm_impl.hpp (the per-target translation units'
// anonymous namespace).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/x86/simd_traits.hpp"

namespace mixq::kernels::x86 {
namespace {

// 8 bytes of NVFP4 panel row (column 2i in the low nibble of byte i, 2i+1 in
// the high one) as 16 bytes in column order, each the high byte of the E2M1
// value's f16 (the low byte is zero for all of them: 0, 0.5, 1, 1.5, 2, 3, 4,
// 6 and their negatives), so it decodes as an E5M2 code does.
inline __m128i e2m1_f16_high(const uint8_t* p) {
  const __m128i table = _mm_setr_epi8(0x00, 0x38, 0x3C, 0x3E, 0x40, 0x42, 0x44, 0x46, static_cast<char>(0x80),
                                      static_cast<char>(0xB8), static_cast<char>(0xBC), static_cast<char>(0xBE),
                                      static_cast<char>(0xC0), static_cast<char>(0xC2), static_cast<char>(0xC4),
                                      static_cast<char>(0xC6));
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0F);
  const __m128i idx = _mm_unpacklo_epi8(_mm_and_si128(b, m), _mm_and_si128(_mm_srli_epi16(b, 4), m));
  return _mm_shuffle_epi8(table, idx);
}

// FP8 codes as f16 bits: sign-extended to 16 bits, then E5M2 << 8 is its
// f16; E4M3 << 7 with bit 14 (a copy of the sign) cleared is its value·2^-8
// as f16. 16 codes in a ymm, or 32 in a zmm.
#if defined(__AVX2__)
template <bool E4m3>
inline __m256i f16_of_codes(__m128i codes) {
  const __m256i h = _mm256_cvtepi8_epi16(codes);
  if constexpr (!E4m3) return _mm256_slli_epi16(h, 8);
  return _mm256_and_si256(_mm256_slli_epi16(h, 7), _mm256_set1_epi16(static_cast<short>(0xBFFF)));
}
#endif
#if defined(__AVX512F__)
template <bool E4m3>
inline __m512i f16_of_codes(__m256i codes) {
  const __m512i h = _mm512_cvtepi8_epi16(codes);
  if constexpr (!E4m3) return _mm512_slli_epi16(h, 8);
  return _mm512_and_si512(_mm512_slli_epi16(h, 7), _mm512_set1_epi16(static_cast<short>(0xBFFF)));
}
#endif

// Per-target panel-row loads and decodes (16 elements -> kVP f32 vectors),
// and what only one target has.
template <class V>
struct FloatIo;

#if defined(__AVX2__)
template <>
struct FloatIo<Avx2> {
  using F = __m256;
  static __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
  static void f32(const uint8_t* p, F* out) {
    out[0] = _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    out[1] = _mm256_loadu_ps(reinterpret_cast<const float*>(p) + 8);
  }
  static void bf16(const uint8_t* p, F* out) {  // bf16 = the high half of an f32
    out[0] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load16(p)), 16));
    out[1] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load16(p + 16)), 16));
  }
  static void f16(const uint8_t* p, F* out) {
    out[0] = _mm256_cvtph_ps(load16(p));
    out[1] = _mm256_cvtph_ps(load16(p + 16));
  }
  // 16 FP8 codes (f16_of_codes).
  template <bool E4m3>
  static void fp8(const uint8_t* p, F* out) { fp8_bytes<E4m3>(load16(p), out); }
  template <bool E4m3>
  static void fp8_bytes(__m128i codes, F* out) {
    const __m256i h = f16_of_codes<E4m3>(codes);
    out[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    out[1] = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
  }
  // 16 FP8 codes as their value·2^-120 (E4M3) or value·2^-112 (E5M2), by
  // integer operations only: the code sign-extended to 32 bits and shifted
  // left by 20 (E4M3) or 21 (E5M2) puts the mantissa in bits 20-22 / 21-22,
  // the exponent field in 23-26 / 23-27 (an f32 exponent field of e, bias
  // 127 against the code's 7 / 15) and copies of the sign above it, of
  // which the mask keeps bit 31. Subnormal codes (e = 0) land on f32
  // subnormals scaled the same way, so every finite code is exact (E5M2's
  // inf and NaN codes, exponent 31, come out finite: float_scaled_x.hpp);
  // the caller's activations carry the 2^112 that makes this the fp8()
  // value·2^-8 (E4M3) or the value itself (E5M2: WithScaledX). Three
  // operations per 8 codes where fp8() spends vcvtph2ps, which Zen 3 issues
  // once a cycle (BENCHMARKS.md, "Issue 14 on Zen 3, fifteenth session").
  template <bool E4m3>
  static void fp8_by_exponent(const uint8_t* p, F* out) {
    constexpr int kShift = E4m3 ? 20 : 21;
    const __m256i keep = _mm256_set1_epi32(static_cast<int>(E4m3 ? 0x87F00000u : 0x8FE00000u));
    for (int h = 0; h < 2; ++h) {
      const __m256i c = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * h)));
      out[h] = _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(c, kShift), keep));
    }
  }
  // 16 E8M0 bytes as f32: the byte is the exponent field (0 -> 0.0, 255 ->
  // inf, as e8m0_to_f32).
  static void e8m0(const uint8_t* p, F* out) {
    for (int h = 0; h < 2; ++h)
      out[h] = _mm256_castsi256_ps(_mm256_slli_epi32(
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * h))), 23));
  }
  // 2^(from - to) of 16 pairs of E8M0 bytes, as f32: the difference plus
  // the bias is the exponent field (the caller keeps from - to in [-126, 127]).
  static void e8m0_ratio(const uint8_t* from, const uint8_t* to, F* out) {
    const __m256i bias = _mm256_set1_epi32(127);
    for (int h = 0; h < 2; ++h) {
      const __m256i f = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(from + 8 * h)));
      const __m256i t = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(to + 8 * h)));
      out[h] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(f, t), bias), 23));
    }
  }
};
#endif  // __AVX2__

#if defined(__AVX512F__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
template <>
struct FloatIo<Avx512> {
  using F = __m512;
  static void f32(const uint8_t* p, F* out) { out[0] = _mm512_loadu_ps(p); }
  static void bf16(const uint8_t* p, F* out) {
    out[0] = _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
  }
  static void f16(const uint8_t* p, F* out) {
    out[0] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  template <bool E4m3>
  static void fp8(const uint8_t* p, F* out) { fp8_bytes<E4m3>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), out); }
  template <bool E4m3>
  static void fp8_bytes(__m128i codes, F* out) { out[0] = _mm512_cvtph_ps(f16_of_codes<E4m3>(codes)); }
  static void e8m0(const uint8_t* p, F* out) {
    out[0] = _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 23));
  }
  // Two consecutive panel rows (32 codes) in one widening: 3 zmm operations
  // and an extract for both rows where fp8 takes 3 ymm ones per row.
  template <bool E4m3>
  static void fp8_two(const uint8_t* p, F* out) {
    const __m512i h = f16_of_codes<E4m3>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    out[0] = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    out[1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
  }
  // Panel rows k and k + 1 (32 codes, each row's 16 columns in order) as the
  // columns' [k, k+1] bf16 pairs: widened to f16 as above, interleaved by one
  // vpermw (lane 2c: row k's column c, 2c + 1: row k + 1's), then as
  // fp8_pair_codes.
  template <bool E4m3>
  static __m512i fp8_pairs(const uint8_t* p, const float* scale) {
    const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                                22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i h = f16_of_codes<E4m3>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return f16_pairs(_mm512_permutexvar_epi16(interleave, h), scale);
  }
  // A k-pair row (32 codes, column-major pairs) as 32 bf16: decoded as above
  // into two f32 vectors (columns 0-7 and 8-15, each [k, k+1] per column),
  // optionally times 32 scales, then vcvtne2ps2bf16 (exact: the values have
  // at most 4 significant bits and are far from the bf16 subnormals).
  template <bool E4m3>
  static __m512i fp8_pair_codes(__m256i codes, const float* scale) {
    return f16_pairs(f16_of_codes<E4m3>(codes), scale);
  }
  static __m512i f16_pairs(__m512i h, const float* scale) {
    __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    __m512 hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
    if (scale) {
      lo = _mm512_mul_ps(lo, _mm512_loadu_ps(scale));
      hi = _mm512_mul_ps(hi, _mm512_loadu_ps(scale + 16));
    }
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
  }
  static __m512 dot(__m512 acc, const uint32_t* a, __m512i w) {
    uint32_t word;  // one bf16 pair of the activation, broadcast
    std::memcpy(&word, a, 4);
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi32(static_cast<int>(word)), (__m512bh)w);
  }
  // RNE of x to bf16, the value kept in f32 (as vcvtne2ps2bf16 rounds).
  static __m512 bf16_value(__m512 v) {
    const __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  // Stores 32 f32 (lo: k0..k0+15, hi: k0+16..k0+31) as bf16 pairs: the
  // first min(pairs, 16), nothing past them (in the AMX tile layout the next
  // 64 bytes are another token's).
  static void store_pairs(uint32_t* dst, int64_t pairs, __m512 lo, __m512 hi) {
    const __m512i packed = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    _mm512_mask_storeu_epi32(dst, Avx512::mask(std::min<int64_t>(pairs, 16)), packed);
  }
};
#pragma GCC diagnostic pop
#endif  // __AVX512F__

}  // namespace
}  // namespace mixq::kernels::x86
