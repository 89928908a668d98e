#pragma once
// The E4M3 NaN scan the packers and nvfp4_in_place share: a NaN code has all
// exponent and mantissa bits set (0x7F / 0xFF, either sign).
#include <emmintrin.h>

#include <cstdint>

namespace mixq::kernels::x86 {

inline bool e4m3_nan(uint8_t code) { return (code & 0x7F) == 0x7F; }

// True when one of the `count` E4M3 codes at `in` is a NaN; 16 at a time (SSE2).
inline bool has_e4m3_nan(const uint8_t* in, int64_t count) {
  int64_t c = 0;
  const __m128i mask = _mm_set1_epi8(0x7F);
  for (; c + 16 <= count; c += 16) {
    const __m128i v = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + c)), mask);
    if (_mm_movemask_epi8(_mm_cmpeq_epi8(v, mask)) != 0) return true;
  }
  for (; c < count; ++c)
    if (e4m3_nan(in[c])) return true;
  return false;
}

}  // namespace mixq::kernels::x86
