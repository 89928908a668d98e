#pragma once
// pack_panel_steps (float_gemm.hpp) for FP8 panels read in place, 64 k at a
// time in zmm registers (AVX-512) or 32 k in ymm registers (AVX2): the same
// bytes and non-finite rows (fp8_nonfinite.hpp) as the SSE2 version, which
// stays the fallback (a partial last panel, the k tail under 64 / 32).
//
// Why: at M = 1 every call packs every weight byte once, and the SSE2 16x16
// byte transpose plus a per-row NaN test cost about as much as the FMAs on
// the packed codes (perf, mixq bench float8_e4m3fn 1x3072x12288): in place
// took 2.70x / 1.82x the packed copy's time at K=3072 N=12288 / K=12288
// N=3072, 1.85x / 1.76x with this (bench_in_place, BENCHMARKS.md). Here one
// unpack round over 16 zmm rows does four 16x16 blocks at once (128-bit lanes
// are independent), a 4x4 shuffle of lanes puts four consecutive steps in one
// 64-byte store, and non-finite codes are found on the packed bytes: the
// byte-wise max of (code & 0x7F) over a panel's steps is 0x7F exactly in the
// columns holding an E4M3 NaN (0x7F or 0xFF), at least 0x7C in those holding
// an E5M2 inf or NaN.
#include <immintrin.h>

#include <algorithm>

#include "kernels/x86/float_gemm.hpp"

namespace mixq::kernels::x86 {
namespace {

// pack_panel_steps over whole blocks of Block steps, each transposed by
// `transpose(src, stride, dst, seen)`, which keeps in `seen` the byte-wise
// max of the codes' low 7 bits per column; `columns(seen)` folds that to 16
// bytes, one per column. The k tail
// and a partial last panel go to the SSE2 version. `ahead`: how many K
// chunks of the same size past s1 to ask for (0: none).
template <int64_t Block, class Seen, class Transpose, class Columns>
inline uint32_t pack_panel_blocks(const FloatPanels& w, int64_t panel, int64_t s0, int64_t s1, uint8_t* dst,
                                  int64_t ahead, Seen seen, Transpose transpose, Columns columns) {
  const int64_t stride = w.rows_stride;
  s1 = std::min(s1, w.k);  // the pad row of an odd K is the caller's
  if (panel * 16 + 16 > w.n || s1 - s0 < Block) return pack_panel_steps(w, panel, s0, s1, dst);
  const uint8_t* src = w.rows + panel * 16 * stride;
  // The GEMM asks for a panel's K chunks in order: fetch the next one(s) of
  // each row (16 scattered row pieces the hardware prefetchers miss).
  for (int64_t j = 0; j < 16; ++j)
    for (int64_t c = s1; c < s1 + ahead * (s1 - s0) && c < w.k; c += 64)
      _mm_prefetch(reinterpret_cast<const char*>(src + j * stride + c), _MM_HINT_T0);
  int64_t s = s0;
  for (; s + Block <= s1; s += Block) seen = transpose(src + s, stride, dst + (s - s0) * 16, seen);
  uint32_t nonfinite_rows = s < s1 ? pack_panel_steps(w, panel, s, s1, dst + (s - s0) * 16) : 0;
  // A column holds a non-finite code where its max of (code & 0x7F) is at
  // least the type's bits (fp8_nonfinite.hpp): max(seen, bits) == seen.
  const __m128i bits = _mm_set1_epi8(static_cast<char>(nonfinite_bits(w.type)));
  const __m128i max = columns(seen);
  nonfinite_rows |= static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(max, bits), max)));
  return nonfinite_rows;
}

// Four rounds of "2i, 2i+1 = low / high byte interleave of i, i+8" over 16
// vectors: within each 128-bit lane L a 16x16 byte transpose, so lane L of
// x[s] is step 16·L + s (the SSE2 transpose_bytes_16x16, one block per lane).
// `lo` / `hi`: the target's unpacklo / unpackhi of bytes.
template <class I, class Lo, class Hi>
inline void transpose_lanes_16x16(I (&x)[16], Lo lo, Hi hi) {
  for (int round = 0; round < 4; ++round) {
    I y[16];
    for (int i = 0; i < 8; ++i) {
      y[2 * i] = lo(x[i], x[i + 8]);
      y[2 * i + 1] = hi(x[i], x[i + 8]);
    }
    for (int i = 0; i < 16; ++i) x[i] = y[i];
  }
}

#if defined(__AVX512BW__)
#pragma GCC diagnostic push  // g++ 12 warns inside its own zmm cast / extract intrinsics
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// 16 rows of 64 codes (row r at src + r·stride) as 64 panel rows of 16 bytes
// at dst (step c = k c of every row); `seen` keeps the byte-wise max of the
// codes' low 7 bits per column (byte j of each 128-bit lane: column j).
inline __m512i transpose_16x64(const uint8_t* src, int64_t stride, uint8_t* dst, __m512i seen) {
  __m512i x[16];
  for (int r = 0; r < 16; ++r) x[r] = _mm512_loadu_si512(src + r * stride);
  transpose_lanes_16x16(  // four 16x16 blocks at once
      x, [](__m512i a, __m512i b) { return _mm512_unpacklo_epi8(a, b); },
      [](__m512i a, __m512i b) { return _mm512_unpackhi_epi8(a, b); });
  const __m512i low7 = _mm512_set1_epi8(0x7F);
  for (int q = 0; q < 4; ++q) {
    // Lanes L of x[4q .. 4q+3] are steps 16·L + 4q .. +3: one 64-byte row
    // group each after a 4x4 transpose of lanes.
    const __m512i t0 = _mm512_shuffle_i64x2(x[4 * q], x[4 * q + 1], 0x44);      // a0 a1 b0 b1
    const __m512i t1 = _mm512_shuffle_i64x2(x[4 * q], x[4 * q + 1], 0xEE);      // a2 a3 b2 b3
    const __m512i t2 = _mm512_shuffle_i64x2(x[4 * q + 2], x[4 * q + 3], 0x44);  // c0 c1 d0 d1
    const __m512i t3 = _mm512_shuffle_i64x2(x[4 * q + 2], x[4 * q + 3], 0xEE);  // c2 c3 d2 d3
    const __m512i steps[4] = {_mm512_shuffle_i64x2(t0, t2, 0x88), _mm512_shuffle_i64x2(t0, t2, 0xDD),
                              _mm512_shuffle_i64x2(t1, t3, 0x88), _mm512_shuffle_i64x2(t1, t3, 0xDD)};
    for (int lane = 0; lane < 4; ++lane) {
      _mm512_storeu_si512(dst + (16 * lane + 4 * q) * 16, steps[lane]);
      seen = _mm512_max_epu8(seen, _mm512_and_si512(steps[lane], low7));
    }
  }
  return seen;
}

inline uint32_t pack_panel_steps_zmm(const FloatPanels& w, int64_t panel, int64_t s0, int64_t s1, uint8_t* dst,
                                     int64_t ahead = 1) {
  return pack_panel_blocks<64>(w, panel, s0, s1, dst, ahead, _mm512_setzero_si512(), transpose_16x64, [](__m512i seen) {
    const __m256i half = _mm256_max_epu8(_mm512_castsi512_si256(seen), _mm512_extracti64x4_epi64(seen, 1));
    return _mm_max_epu8(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
  });
}
#pragma GCC diagnostic pop
#endif  // __AVX512BW__

#if defined(__AVX2__)
// The ymm version of transpose_16x64: 16 rows of 32 codes as 32 panel rows
// (two 16x16 blocks, one per 128-bit lane). With 16 ymm registers the
// rounds spill to the stack, which still beats the SSE2 transpose with its
// per-row NaN test (BENCHMARKS.md, "Issue 14 on AVX2").
inline __m256i transpose_16x32(const uint8_t* src, int64_t stride, uint8_t* dst, __m256i seen) {
  __m256i x[16];
  for (int r = 0; r < 16; ++r) x[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + r * stride));
  transpose_lanes_16x16(  // two 16x16 blocks at once
      x, [](__m256i a, __m256i b) { return _mm256_unpacklo_epi8(a, b); },
      [](__m256i a, __m256i b) { return _mm256_unpackhi_epi8(a, b); });
  const __m256i low7 = _mm256_set1_epi8(0x7F);
  for (int s = 0; s < 16; s += 2) {
    const __m256i first = _mm256_permute2x128_si256(x[s], x[s + 1], 0x20);   // steps s, s + 1
    const __m256i second = _mm256_permute2x128_si256(x[s], x[s + 1], 0x31);  // steps 16 + s, 17 + s
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + s * 16), first);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (16 + s) * 16), second);
    seen = _mm256_max_epu8(seen, _mm256_max_epu8(_mm256_and_si256(first, low7), _mm256_and_si256(second, low7)));
  }
  return seen;
}

inline uint32_t pack_panel_steps_ymm(const FloatPanels& w, int64_t panel, int64_t s0, int64_t s1, uint8_t* dst,
                                     int64_t ahead = 1) {
  return pack_panel_blocks<32>(w, panel, s0, s1, dst, ahead, _mm256_setzero_si256(), transpose_16x32, [](__m256i seen) {
    return _mm_max_epu8(_mm256_castsi256_si128(seen), _mm256_extracti128_si256(seen, 1));
  });
}
#endif  // __AVX2__

// pack_panel_steps on the target's widest packer.
template <class V>
inline uint32_t pack_steps(const FloatPanels& w, int64_t panel, int64_t s0, int64_t s1, uint8_t* dst,
                           int64_t ahead) {
#if defined(__AVX512BW__)
  if constexpr (V::kLanes == 16) return pack_panel_steps_zmm(w, panel, s0, s1, dst, ahead);
#endif
#if defined(__AVX2__)
  if constexpr (V::kLanes == 8) return pack_panel_steps_ymm(w, panel, s0, s1, dst, ahead);
#endif
  return pack_panel_steps(w, panel, s0, s1, dst);
}

}  // namespace
}  // namespace mixq::kernels::x86
