#pragma once
// The scan for FP8 codes without a finite value that the packers and
// nvfp4_in_place share. A code c is one when (c & bits) == bits:
//  - E4M3 (bits 0x7F): NaN, every exponent and mantissa bit set (0x7F / 0xFF);
//  - E5M2 (bits 0x7C): inf or NaN, every exponent bit set (0x7C-0x7F,
//    0xFC-0xFF).
// Equivalently (c & 0x7F) >= bits: what the SIMD packers test on the
// byte-wise max of a column's codes (float_pack_simd.hpp).
#include <emmintrin.h>

#include <cstdint>

namespace mixq::kernels::x86 {

constexpr uint8_t kE4m3NonFinite = 0x7F, kE5m2NonFinite = 0x7C;

inline bool nonfinite(uint8_t code, uint8_t bits) { return (code & bits) == bits; }
inline bool e4m3_nan(uint8_t code) { return nonfinite(code, kE4m3NonFinite); }

// True when one of the `count` codes at `in` is non-finite (bits as above);
// 16 at a time (SSE2).
inline bool has_nonfinite(const uint8_t* in, int64_t count, uint8_t bits) {
  int64_t c = 0;
  const __m128i mask = _mm_set1_epi8(static_cast<char>(bits));
  for (; c + 16 <= count; c += 16) {
    const __m128i v = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + c)), mask);
    if (_mm_movemask_epi8(_mm_cmpeq_epi8(v, mask)) != 0) return true;
  }
  for (; c < count; ++c)
    if (nonfinite(in[c], bits)) return true;
  return false;
}
inline bool has_e4m3_nan(const uint8_t* in, int64_t count) { return has_nonfinite(in, count, kE4m3NonFinite); }

}  // namespace mixq::kernels::x86
