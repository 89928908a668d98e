#pragma once
// NVFP4 weights read in place against 2 .. kNvfp4InPlaceGemv16M rows, with
// AVX-512 VBMI: nvfp4_in_place_impl.hpp's k-lane GEMV over 16 weight rows at
// a time instead of 8, in zmm. Include only from nvfp4_w4a4_impl.hpp in the
// avx512vbmi translation unit.
//
// Per group of 4 blocks (32 code bytes of a row) and 16 weight rows: rows t
// and t + 8 in one zmm (low and high 256 bits), decoded by two `vpermb` (the
// 16-entry table repeated over 64 bytes, so no nibble mask: vpermb reads 6
// index bits), two `vpdpbusd` per row pair against the activation's odd /
// even codes (gemv_activation, both halves the same), and sum_blocks' unpacks
// (per 128-bit lane, so one pass sums rows 0-3 and 8-11). A block's 16 sums
// then sit in the lane order kRowOfLane, as do its scales (one vpermt2d picks
// the rows' u32 of the swizzled span), and each block adds fma(float(dot +
// comp), S_w·S_x, acc) in block order, as the packed kernels do: the same
// bits. About half the instructions per weight of the ymm loop.
//
// Where (BENCHMARKS.md, "Issue 14 on Zen 5, tenth session"; Zen 5, 2
// threads): with the weights in cache 1.5x the ymm loop at one row and 1.8x
// at four; from DRAM 1.07-1.4x at 2 rows, 1.2-1.6x at 4, 1.5-1.7x at 8,
// but at one row no faster in the fast read phase and slower in the slow one
// (both loops then wait on memory the same way, and how this one's 16 row
// streams fare there is not understood), so one row keeps the ymm loop.
// Past 8 rows it also beats the panel decode that the ymm loop hands over
// to (kNvfp4InPlaceGemv16M).

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/x86/nvfp4_in_place_impl.hpp"
#include "kernels/x86/nvfp4_w4a4.hpp"
#include "kernels/x86/nvfp4_w4a4_parts.hpp"
#include "kernels/x86/simd_traits.hpp"
#include "numeric/swizzle.hpp"
#include "util/parallel.hpp"

namespace mixq::kernels::x86 {
namespace {

// The fewest activation rows that run this GEMV (see the top).
constexpr int64_t kGemv16MinRows = 2;

#pragma GCC diagnostic push  // g++ 12 warns inside its own zmm intrinsics
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// The weight row of f32 lane d of a block's sums and scales: 128-bit lanes
// of rows 0-3, 8-11, 4-7, 12-15 (shuffle_f32x4(v, v, 0xD8) puts them in order).
constexpr int kRowOfLane[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};

// The swizzled scales of rows r0 .. r0 + 15 (r0 % 16 == 0; docs/FORMATS.md
// §3.2): row t's 16 bytes at span + 16·t hold the 4 blocks' scales of 4 rows
// 32 apart, this band's at bytes 4·band .. +3; the next 4 blocks' span is 512
// bytes further. `pick`: dword d = 4·(row % 8) + band, the row kRowOfLane[d]'s
// u32 within the two 128-byte halves.
struct Scales16 {
  const uint8_t* span;
  __m512i pick;
};
inline Scales16 scales16(const Nvfp4Weights& w, int64_t r0) {
  const int band = static_cast<int>(r0 % 128 / 32);
  alignas(64) int32_t pick[16];
  for (int d = 0; d < 16; ++d) pick[d] = 4 * (kRowOfLane[d] % 8) + band;
  return {w.scales + swizzled_offset(r0, 0, w.blocks) - 4 * band, _mm512_load_si512(pick)};
}

// Byte picks for block_scales16: u16 slot s of picks[j0 / 2] takes, in its
// high byte, the code of block j0 + s / 16 from lane s % 16's u32.
struct ScaleBytePicks {
  alignas(64) int8_t idx[2][64];
};
constexpr ScaleBytePicks make_scale_byte_picks() {
  ScaleBytePicks p{};
  for (int j0 = 0; j0 < 4; j0 += 2)
    for (int b = 0; b < 64; ++b) p.idx[j0 / 2][b] = static_cast<int8_t>(4 * (b / 2 % 16) + j0 + b / 32);
  return p;
}
inline constexpr ScaleBytePicks kScaleBytePicks = make_scale_byte_picks();

// sw[j]: S_w / 256 of block 4g + j for the 16 rows, in kRowOfLane order
// (gemv_scales' FP16 reading of E4M3: the code in a u16's high byte, shifted
// right by 1 with bit 14 cleared, is the FP16 of value / 256).
inline void block_scales16(const Scales16& s, int64_t g, __m512* sw) {
  const uint8_t* span = s.span + g * 512;
  auto load = [&](int q) { return _mm512_loadu_si512(span + 64 * q); };
  const __m512i rows0_7 = _mm512_permutex2var_epi32(load(0), s.pick, load(1));
  const __m512i rows8_15 = _mm512_permutex2var_epi32(load(2), s.pick, load(3));
  const __m512i quad = _mm512_mask_blend_epi32(0xF0F0, rows0_7, rows8_15);  // lane d: row kRowOfLane[d]'s 4 codes
  const __m512i clear14 = _mm512_set1_epi16(static_cast<int16_t>(0xBFFF));
  for (int j0 = 0; j0 < 4; j0 += 2) {
    const __m512i picks = _mm512_load_si512(kScaleBytePicks.idx[j0 / 2]);
    const __m512i codes = _mm512_maskz_permutexvar_epi8(0xAAAAAAAAAAAAAAAAull, picks, quad);
    const __m512i h = _mm512_and_si512(_mm512_srai_epi16(codes, 1), clear14);
    sw[j0] = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    sw[j0 + 1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
  }
}

// Weight rows [r0, r0 + 16), row t at rows + t·stride, against the R
// activation rows from `i0`.
template <int R>
void gemv16_group(const Nvfp4Job& job, const Nvfp4Weights& w, const GemvActivation& xo, int64_t i0, int64_t r0,
                  const uint8_t* rows, int64_t stride, const Scales16& scales) {
  const int64_t blocks = w.blocks, groups = (blocks + 3) / 4;
  const __m512i table = Avx512::table16(kWeightTable);
  const int8_t* x = xo.codes.data() + i0 * groups * kGemvGroupBytes;
  __m512 acc[R];
  MIXQ_UNROLL
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  auto finish = [&](int r, int64_t b, __m512i d, __m512 sw) {
    acc[r] = gemv_block_fma<Avx512>(acc[r], d, sw, job, xo, static_cast<size_t>((i0 + r) * blocks + b));
  };
  // Blocks 4g .. 4g + count - 1; `load(p)` reads a row's 32 code bytes there.
  auto group = [&](int64_t g, int count, auto load) {
    __m512i wo[8], we[8];
    MIXQ_UNROLL
    for (int t = 0; t < 8; ++t) {
      const uint8_t* p = rows + t * stride + 32 * g;
      const __m512i c = _mm512_inserti64x4(_mm512_castsi256_si512(load(p)), load(p + 8 * stride), 1);
      wo[t] = Avx512::lookup16(table, c);
      we[t] = Avx512::lookup16(table, _mm512_srli_epi16(c, 4));
    }
    __m512 sw[4];
    block_scales16(scales, g, sw);
    const int64_t b = 4 * g;
    MIXQ_UNROLL
    for (int r = 0; r < R; ++r) {
      const int8_t* xr = x + (r * groups + g) * kGemvGroupBytes;
      const __m512i x_odd = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr)));
      const __m512i x_even = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr + 32)));
      __m512i d[8];
      MIXQ_UNROLL
      for (int t = 0; t < 8; ++t)
        d[t] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wo[t], x_odd), we[t], x_even);
      // sum_blocks' steps per 128-bit lane: rows 0-3 | 8-11 (d[0..3]) and
      // 4-7 | 12-15 (d[4..7]); even: blocks b, b + 2, odd: b + 1, b + 3.
      __m512i even[2], odd[2];
      MIXQ_UNROLL
      for (int h = 0; h < 2; ++h) {
        const __m512i* p = d + 4 * h;
        const __m512i lo01 = _mm512_unpacklo_epi32(p[0], p[1]), hi01 = _mm512_unpackhi_epi32(p[0], p[1]);
        const __m512i lo23 = _mm512_unpacklo_epi32(p[2], p[3]), hi23 = _mm512_unpackhi_epi32(p[2], p[3]);
        even[h] = _mm512_add_epi32(_mm512_unpacklo_epi64(lo01, lo23), _mm512_unpackhi_epi64(lo01, lo23));
        odd[h] = _mm512_add_epi32(_mm512_unpacklo_epi64(hi01, hi23), _mm512_unpackhi_epi64(hi01, hi23));
      }
      // Lanes 0, 2 of each: the first block of the pair; 1, 3: the second.
      finish(r, b, _mm512_shuffle_i32x4(even[0], even[1], 0x88), sw[0]);
      if (count > 1) finish(r, b + 1, _mm512_shuffle_i32x4(odd[0], odd[1], 0x88), sw[1]);
      if (count > 2) finish(r, b + 2, _mm512_shuffle_i32x4(even[0], even[1], 0xDD), sw[2]);
      if (count > 3) finish(r, b + 3, _mm512_shuffle_i32x4(odd[0], odd[1], 0xDD), sw[3]);
    }
  };
  // As gemv_group: the 16 rows after next (contiguous, 16·stride bytes)
  // fetched into L2, 512 bytes per group of blocks, and the scales
  // kGemvScaleAhead groups ahead into L1 (a strided walk the hardware does
  // not prefetch).
  const char* next = reinterpret_cast<const char*>(rows + 32 * stride);
  const int64_t whole = blocks / 4;
  for (int64_t g = 0; g < whole; ++g, next += 512) {
    for (int l = 0; l < 8; ++l) _mm_prefetch(next + 64 * l, _MM_HINT_T1);
    const char* scales_ahead = reinterpret_cast<const char*>(scales.span + (g + kGemvScaleAhead) * 512);
    for (int l = 0; l < 4; ++l) _mm_prefetch(scales_ahead + 64 * l, _MM_HINT_T0);
    group(g, 4, [](const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); });
  }
  if (const int left = static_cast<int>(blocks - 4 * whole)) {  // 1-3 blocks: 8 bytes each, never read past
    const __mmask32 live = (__mmask32{1} << (8 * left)) - 1;
    group(whole, left, [&](const uint8_t* p) { return _mm256_maskz_loadu_epi8(live, p); });
  }
  MIXQ_UNROLL
  for (int r = 0; r < R; ++r) gemv_store_rows<Avx512>(job, i0 + r, r0, _mm512_shuffle_f32x4(acc[r], acc[r], 0xD8));
}

// gemv_in_place over groups of 16 weight rows.
inline void gemv16_in_place(const Nvfp4Job& job, const Nvfp4Weights& w) {
  const GemvActivation xo = gemv_activation(*job.act);
  gemv_row_groups<16>(job, w, 2, [&]<int R>(const uint8_t* rows, int64_t r0, int64_t i) {
    gemv16_group<R>(job, w, xo, i, r0, rows, w.row_bytes, scales16(w, r0));
  });
}

#pragma GCC diagnostic pop

}  // namespace
}  // namespace mixq::kernels::x86
