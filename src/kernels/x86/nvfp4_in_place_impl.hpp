#pragma once
// NVFP4 W4A4 on weights read in place (Nvfp4Weights::in_place,
// nvfp4_w4a4.hpp): the k-lane GEMV for M <= kNvfp4InPlaceGemvM and the panel
// decode from the rows for larger M, which feeds nvfp4_w4a4_impl.hpp's
// large-M micro-kernels. Both give the packed kernels' bits. AVX2
// instructions only (the AVX-512 file compiles the same code).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "kernels/x86/nvfp4_w4a4.hpp"
#include "kernels/x86/nvfp4_w4a4_parts.hpp"
#include "kernels/x86/simd_traits.hpp"
#include "numeric/swizzle.hpp"
#include "util/parallel.hpp"

namespace mixq::kernels::x86 {
namespace {

// The k-lane GEMV for M <= kNvfp4InPlaceGemvM. A weight row's 4 blocks (32
// code bytes, one ymm c) decode into two ymm: the low nibbles (odd k) and
// the high nibbles (even k), each as bytes 12 + 2·e2m1 with 128-bit lane l
// holding blocks b + 2l, b + 2l + 1 (8 bytes each). The activation is
// reordered once per call to match (gemv_activation). The two 4-product
// dots give a row 8 int32: 2 partial sums of each of the 4 blocks; for 8
// rows, sum_blocks moves them into one vector per block with a row per lane,
// and the epilogue is the packed kernels' own (the same FMA per block, in
// block order), so the result has the same bits.
// Σ over 4-byte lanes of odd·x_odd + even·x_even (u8 · s8), exact: on AVX2
// two vpmaddubsw (pair sums <= 2·24·12 = 576 each, so <= 1152 after the i16
// add) and one vpmaddwd; with AVX-VNNI or AVX-512 VNNI (its ymm form) two
// vpdpbusd, the same sums.
template <class V>
struct GemvDot {
  static __m256i dot(__m256i odd, __m256i x_odd, __m256i even, __m256i x_even) {
    const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(odd, x_odd), _mm256_maddubs_epi16(even, x_even));
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  }
};
template <>
struct GemvDot<Avx2Vnni> {
  static __m256i dot(__m256i odd, __m256i x_odd, __m256i even, __m256i x_even) {
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), odd, x_odd), even, x_even);
  }
};
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
template <>
struct GemvDot<Avx512> {
  static __m256i dot(__m256i odd, __m256i x_odd, __m256i even, __m256i x_even) {
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), odd, x_odd), even, x_even);
  }
};
#endif

constexpr int64_t kGemvGroupBytes = 64;  // activation bytes per 4 blocks
constexpr int64_t kGemvScaleAhead = 4;   // groups of 4 blocks the scale prefetch runs ahead

// The activation as the GEMV reads it, made once per call: `codes` holds each
// 4 blocks (zero-padded to whole groups of 4) as the codes at odd k of the 4
// blocks (8 each, 32 bytes), then those at even k; `scale256` is S_x · 256
// per (row, block), exact (S_x is an E4M3 value), the factor gemv_scales
// leaves out of S_w.
struct GemvActivation {
  std::vector<int8_t> codes;
  std::vector<float> scale256;
};

inline GemvActivation gemv_activation(const Nvfp4Activation& a) {
  const int64_t groups = (a.blocks + 3) / 4;
  GemvActivation out;
  out.codes.assign(static_cast<size_t>(a.m * groups * kGemvGroupBytes), 0);
  out.scale256.resize(a.scale.size());
  for (size_t i = 0; i < a.scale.size(); ++i) out.scale256[i] = a.scale[i] * 256.0f;
  const __m128i order = _mm_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14);
  for (int64_t r = 0; r < a.m; ++r)
    for (int64_t b = 0; b < a.blocks; ++b) {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.q.data() + (r * a.blocks + b) * 16));
      const __m128i v = _mm_shuffle_epi8(q, order);
      int8_t* dst = out.codes.data() + (r * groups + b / 4) * kGemvGroupBytes + (b % 4) * 8;
      _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), v);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + 32), _mm_unpackhi_epi64(v, v));
    }
  return out;
}

// Rows P0..P3 (int32 lanes: 2 partial sums of blocks b, b + 1 | b + 2, b + 3)
// -> even: [Σ b of rows 0-3 | Σ b + 2], odd: [Σ b + 1 | Σ b + 3].
inline void sum_blocks(__m256i p0, __m256i p1, __m256i p2, __m256i p3, __m256i& even, __m256i& odd) {
  const __m256i lo01 = _mm256_unpacklo_epi32(p0, p1), hi01 = _mm256_unpackhi_epi32(p0, p1);
  const __m256i lo23 = _mm256_unpacklo_epi32(p2, p3), hi23 = _mm256_unpackhi_epi32(p2, p3);
  even = _mm256_add_epi32(_mm256_unpacklo_epi64(lo01, lo23), _mm256_unpackhi_epi64(lo01, lo23));
  odd = _mm256_add_epi32(_mm256_unpacklo_epi64(hi01, hi23), _mm256_unpackhi_epi64(hi01, hi23));
}

// s[j] = the 8 rows' scales of block 4g + j (quad: gemv_scale_quad, lanes
// rows 0, 2, 4, 6 | 1, 3, 5, 7) as f32, each exactly 1/256 of the E4M3
// value: E4M3's sign, 4 exponent and 3 mantissa bits are an FP16's sign, low
// 4 exponent bits and top 3 mantissa bits (FP16's bias is 15, not 7), for
// subnormals too. So the code in a u16's high byte, shifted right by 1
// (arithmetic) with bit 14 cleared, is the FP16 of value / 256; vcvtph2ps
// widens it exactly.
inline void gemv_scales(__m256i quad, __m256* s) {
  // u16 slot i of a 128-bit lane: block j0 + i / 4 of the lane's row i % 4.
  const __m256i blocks01 = _mm256_setr_epi8(-128, 0, -128, 4, -128, 8, -128, 12, -128, 1, -128, 5, -128, 9, -128, 13,
                                            -128, 0, -128, 4, -128, 8, -128, 12, -128, 1, -128, 5, -128, 9, -128, 13);
  const __m256i blocks23 = _mm256_setr_epi8(-128, 2, -128, 6, -128, 10, -128, 14, -128, 3, -128, 7, -128, 11, -128, 15,
                                            -128, 2, -128, 6, -128, 10, -128, 14, -128, 3, -128, 7, -128, 11, -128, 15);
  const __m256i clear14 = _mm256_set1_epi16(static_cast<int16_t>(0xBFFF));
  auto halves = [&](__m256i ctl) {  // low 128 bits: block j0's 8 FP16s, high: j0 + 1's
    const __m256i h = _mm256_and_si256(_mm256_srai_epi16(_mm256_shuffle_epi8(quad, ctl), 1), clear14);
    return _mm256_permute4x64_epi64(h, 0xD8);
  };
  const __m256i h01 = halves(blocks01), h23 = halves(blocks23);
  s[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(h01));
  s[1] = _mm256_cvtph_ps(_mm256_extracti128_si256(h01, 1));
  s[2] = _mm256_cvtph_ps(_mm256_castsi256_si128(h23));
  s[3] = _mm256_cvtph_ps(_mm256_extracti128_si256(h23, 1));
}

// The scales of 8 rows for a group of 4 blocks. The swizzled layout
// (docs/FORMATS.md §3.2) keeps rows r0 .. r0 + 7 (r0 % 8 == 0) in one
// 128-byte span, row t's 16 bytes at 16·t holding the 4 scales of 4 rows
// 32 apart (one u32 each); `pick` moves this band's u32 of each 16 bytes
// into place. Lanes: rows 0, 2, 4, 6 | 1, 3, 5, 7 (each 32-byte load holds
// two rows, one per 128-bit lane). Reads only the 128 bytes.
inline __m256i gemv_scale_quad(const uint8_t* span, const __m256i* pick) {
  __m256i quad = _mm256_setzero_si256();
  MIXQ_UNROLL
  for (int j = 0; j < 4; ++j)
    quad = _mm256_or_si256(
        quad, _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(span + 32 * j)), pick[j]));
  return quad;
}

// pick[j] for gemv_scale_quad: in each 128-bit lane, bytes 4·band .. +3 to
// u32 j, every other byte zeroed.
struct GemvScalePicks {
  __m256i v[4];
};
inline const GemvScalePicks& gemv_scale_picks(int band) {
  static const auto picks = [] {
    std::array<GemvScalePicks, 4> all;
    for (int b = 0; b < 4; ++b)
      for (int j = 0; j < 4; ++j) {
        alignas(32) int8_t bytes[32];
        for (int i = 0; i < 32; ++i) bytes[i] = (i % 16) / 4 == j ? static_cast<int8_t>(4 * b + i % 4) : -128;
        all[static_cast<size_t>(b)].v[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(bytes));
      }
    return all;
  }();
  return picks[static_cast<size_t>(band)];
}

// Rows r0 .. r0 + 7's (r0 % 8 == 0) swizzled scales: the span gemv_scale_quad
// reads for blocks 0-3 (those of blocks 4g.. are 512·g further) and the
// picks of the rows' band of 32 in the tile.
struct ScaleRows {
  const uint8_t* span;
  const __m256i* pick;
};
inline ScaleRows scale_rows(const Nvfp4Weights& w, int64_t r0) {
  const int band = static_cast<int>(r0 % 128 / 32);
  return {w.scales + swizzled_offset(r0, 0, w.blocks) - 4 * band, gemv_scale_picks(band).v};
}

// gemv_scale_quad's lane order (rows 0, 2, 4, 6 | 1, 3, 5, 7) back to rows
// 0 .. 7, as a vpermd / vpermps index.
inline __m256i rows_in_order() { return _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7); }

// The GEMVs' arithmetic per output, at any width V (Avx2: 8 weight rows,
// Avx512: 16, a row per lane). One block of the chain: acc + float(dot +
// comp)·((S_w / 256)·(S_x·256)), the last product S_w·S_x rounded once, as
// the packed kernels' S_w·S_x.
template <class V>
inline typename V::F gemv_block_fma(typename V::F acc, typename V::I dot, typename V::F sw, const Nvfp4Job& job,
                                    const GemvActivation& xo, size_t at) {
  return V::fmadd(V::cvt(V::addi(dot, V::set1i(job.act->comp[at]))), V::mul(sw, V::set1(xo.scale256[at])), acc);
}
// The epilogue of activation row `row` for weight rows r0 .. (sum: in row
// order): (sum·0.25)·alpha rounded, then the bias; rows past n not stored.
template <class V>
inline void gemv_store_rows(const Nvfp4Job& job, int64_t row, int64_t r0, typename V::F sum) {
  const auto valid = V::mask(std::min<int64_t>(V::kLanes, job.n - r0));
  typename V::F out = rounded(V::mul(V::mul(sum, V::set1(0.25f)), V::set1(job.alpha)));
  if (job.bias) out = V::add(out, V::loadz(valid, job.bias + r0));
  V::store(job.y + row * job.n + r0, valid, out);
}

// Weight rows [r0, r0 + 8), row t at rows + t·stride, against the R
// activation rows from `i0`; `sr`: their scales (scale_rows). Each group of
// 4 blocks is decoded and its scales widened once for the R rows: per half
// (weight rows 0, 2, 4, 6, then 1, 3, 5, 7) 4 rows' codes, then every
// activation row's dots and block sums. Each output's operations are those
// of one row at a time, in the same order.
template <class D, int R>
void gemv_group(const Nvfp4Job& job, const Nvfp4Weights& w, const GemvActivation& xo, int64_t i0, int64_t r0,
                const uint8_t* rows, int64_t stride, ScaleRows sr) {
  const uint8_t* scales = sr.span;
  const int64_t blocks = w.blocks, groups = (blocks + 3) / 4;
  const __m256i table = Avx2::table16(kWeightTable), nibble = _mm256_set1_epi8(0x0F);
  const int8_t* x = xo.codes.data() + i0 * groups * kGemvGroupBytes;
  __m256 acc[R];
  MIXQ_UNROLL
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  auto finish = [&](int r, int64_t b, __m256i d, __m256 sw) {
    acc[r] = gemv_block_fma<Avx2>(acc[r], d, sw, job, xo, static_cast<size_t>((i0 + r) * blocks + b));
  };
  // Blocks 4g .. 4g + count - 1; `load(p)` reads a row's code bytes there.
  auto group = [&](int64_t g, int count, auto load) {
    __m256i even[2][R], odd[2][R];  // [half][row] lanes: rows 0, 2, 4, 6 | 1, 3, 5, 7 (as quad)
    MIXQ_UNROLL
    for (int half = 0; half < 2; ++half) {
      __m256i wo[4], we[4];
      MIXQ_UNROLL
      for (int t = 0; t < 4; ++t) {
        const __m256i c = load(rows + (2 * t + half) * stride + 32 * g);
        wo[t] = _mm256_shuffle_epi8(table, _mm256_and_si256(c, nibble));
        we[t] = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(c, 4), nibble));
      }
      MIXQ_UNROLL
      for (int r = 0; r < R; ++r) {
        const int8_t* xr = x + (r * groups + g) * kGemvGroupBytes;
        const __m256i x_odd = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr));
        const __m256i x_even = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr + 32));
        __m256i d[4];
        MIXQ_UNROLL
        for (int t = 0; t < 4; ++t) d[t] = D::dot(wo[t], x_odd, we[t], x_even);
        sum_blocks(d[0], d[1], d[2], d[3], even[half][r], odd[half][r]);
      }
    }
    const __m256i quad = gemv_scale_quad(scales + g * 512, sr.pick);
    __m256 sw[4];
    gemv_scales(quad, sw);
    const int64_t b = 4 * g;
    MIXQ_UNROLL
    for (int r = 0; r < R; ++r) {
      finish(r, b, _mm256_permute2x128_si256(even[0][r], even[1][r], 0x20), sw[0]);
      if (count > 1) finish(r, b + 1, _mm256_permute2x128_si256(odd[0][r], odd[1][r], 0x20), sw[1]);
      if (count > 2) finish(r, b + 2, _mm256_permute2x128_si256(even[0][r], even[1][r], 0x31), sw[2]);
      if (count > 3) finish(r, b + 3, _mm256_permute2x128_si256(odd[0][r], odd[1][r], 0x31), sw[3]);
    }
  };
  // The groups' rows follow each other in memory: fetch 256 bytes of the
  // group after next per step (8 rows x 32), into L2 (T1), where it waits a
  // whole group. On Zen 4 (bench_in_place --format nvfp4, BENCHMARKS.md "Zen
  // 4, third session") that took the in-place time from 1.46-1.61x the packed
  // time to 0.93-1.17x; the next group into L1 (T0), as before: 1.46-1.61x;
  // the next group into L2: 1.09-1.41x.
  const char* next = reinterpret_cast<const char*>(rows + 16 * stride);
  const int64_t whole = blocks / 4;
  for (int64_t g = 0; g < whole; ++g, next += 256) {
    for (int l = 0; l < 4; ++l) _mm_prefetch(next + 64 * l, _MM_HINT_T1);
    // The 8 rows' scales of a group of 4 blocks are 128 bytes, 512 apart
    // from one group to the next: a strided walk the hardware does not
    // prefetch, and that stalled the loop (half the speed without this).
    const char* scales_ahead = reinterpret_cast<const char*>(scales + (g + kGemvScaleAhead) * 512);
    _mm_prefetch(scales_ahead, _MM_HINT_T0);
    _mm_prefetch(scales_ahead + 64, _MM_HINT_T0);
    group(g, 4, [](const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); });
  }
  if (const int left = static_cast<int>(blocks - 4 * whole)) {  // 1-3 blocks: 8 bytes each, never read past
    const __m256i mask = Avx2::mask(2 * left);
    group(whole, left, [&](const uint8_t* p) { return _mm256_maskload_epi32(reinterpret_cast<const int*>(p), mask); });
  }
  MIXQ_UNROLL
  for (int r = 0; r < R; ++r) gemv_store_rows<Avx2>(job, i0 + r, r0, _mm256_permutevar8x32_ps(acc[r], rows_in_order()));
}

// Groups of G weight rows over the threads (`grain` groups at least a
// chunk), each read from DRAM once: group<R>(rows, r0, i) for activation
// rows i .. i + R - 1, up to 4 a pass (rows past the first 4 reuse the group
// from cache, decoding it again). A last group of fewer than G rows is
// copied (zero-padded) so that no read passes the tensor's end.
template <int64_t G, class Group>
void gemv_row_groups(const Nvfp4Job& job, const Nvfp4Weights& w, int64_t grain, Group group) {
  const int64_t m = job.act->m;
  util::parallel_for((w.n + G - 1) / G, grain, [&](int64_t g0, int64_t g1, int) {
    std::vector<uint8_t> tail;
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t r0 = g * G;
      const uint8_t* rows = w.codes + r0 * w.row_bytes;
      if (r0 + G > w.n) {
        tail.assign(static_cast<size_t>(G * w.row_bytes), 0);
        if (w.row_bytes > 0) std::memcpy(tail.data(), rows, static_cast<size_t>((w.n - r0) * w.row_bytes));
        rows = tail.data();
      }
      for (int64_t i = 0; i < m; i += 4) {
        switch (std::min<int64_t>(4, m - i)) {
          case 1: group.template operator()<1>(rows, r0, i); break;
          case 2: group.template operator()<2>(rows, r0, i); break;
          case 3: group.template operator()<3>(rows, r0, i); break;
          default: group.template operator()<4>(rows, r0, i); break;
        }
      }
    }
  });
}

template <class V>
void gemv_in_place(const Nvfp4Job& job, const Nvfp4Weights& w) {
  const GemvActivation xo = gemv_activation(*job.act);
  gemv_row_groups<8>(job, w, 4, [&]<int R>(const uint8_t* rows, int64_t r0, int64_t i) {
    gemv_group<GemvDot<V>, R>(job, w, xo, i, r0, rows, w.row_bytes, scale_rows(w, r0));
  });
}

// decode_panel's result (Decoded<V>) read from the checkpoint's rows.
// Codes: two blocks of a row decode into one ymm (block b in the low 128-bit
// lane, b + 1 in the high, 16 bytes 12 + 2·e2m1 in k order each); four
// rows' vectors are one 4×4 transpose of 4-byte parts away from the layout
// (part q of lane j = k 16b + 4q .. of row j). Scales: gemv_scale_quad per 8
// rows and 4 blocks, put back in row order. Rows past n repeat row n - 1
// (codes) or read the scale tile's padding; their outputs are never stored.
// L: the target's lanes (V::kLanes); only AVX2 instructions either way, so
// nvfp4_decode_panel_in_place can test the AVX-512 layout on any AVX2 CPU.
template <int L>
void decode_panel_in_place(const Nvfp4Weights& w, int64_t p, uint8_t* dst) {
  constexpr int64_t kVec = 20 * L, kBlock = 320;  // Decoded<V>'s sizes
  const __m256i table = Avx2::table16(kWeightTable), nibble = _mm256_set1_epi8(0x0F);
  auto decode = [&](__m256i c) {  // c: the row's code bytes of blocks b, b + 1 in both lanes
    const __m256i hi = _mm256_srli_epi16(c, 4);
    const __m256i k_order = _mm256_blend_epi32(_mm256_unpacklo_epi8(hi, c), _mm256_unpackhi_epi8(hi, c), 0xF0);
    return _mm256_shuffle_epi8(table, _mm256_and_si256(k_order, nibble));
  };
  // The panel after next (its 16 rows follow this panel's in memory): 64 of
  // its bytes into L2 per step, as the GEMV does (1024 bytes per 16 steps
  // read here).
  const char* ahead = reinterpret_cast<const char*>(w.codes + (p + 2) * 16 * w.row_bytes);
  for (int j0 = 0; j0 < 16; j0 += 4) {
    const uint8_t* row[4];
    for (int t = 0; t < 4; ++t) row[t] = w.codes + std::min<int64_t>(p * 16 + j0 + t, w.n - 1) * w.row_bytes;
    uint8_t* out = dst + (j0 / L) * kVec + 4 * (j0 % L);
    for (int64_t b = 0; b < w.blocks; b += 2, out += 2 * kBlock, ahead += 64) {
      _mm_prefetch(ahead, _MM_HINT_T1);
      const bool pair = b + 1 < w.blocks;  // else one block: 8 bytes, never read past the row
      __m256i v[4];
      for (int t = 0; t < 4; ++t) {
        const __m128i c = pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[t] + 8 * b))
                               : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row[t] + 8 * b));
        v[t] = decode(_mm256_broadcastsi128_si256(c));
      }
      const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
      const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
      const __m256i part[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                               _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
      for (int q = 0; q < 4; ++q) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + q * 4 * L), _mm256_castsi256_si128(part[q]));
        if (pair) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + kBlock + q * 4 * L), _mm256_extracti128_si256(part[q], 1));
      }
    }
  }
  for (int j0 = 0; j0 < 16; j0 += 8) {
    const ScaleRows sr = scale_rows(w, p * 16 + j0);
    uint8_t* out = dst + (j0 / L) * kVec + 16 * L + 4 * (j0 % L);
    for (int64_t b = 0; b < w.blocks; b += 4) {
      const __m256i quad = _mm256_permutevar8x32_epi32(gemv_scale_quad(sr.span + b / 4 * 512, sr.pick), rows_in_order());
      __m256 sw[4];  // S_w / 256
      gemv_scales(quad, sw);
      for (int64_t j = 0; j < std::min<int64_t>(4, w.blocks - b); ++j)
        _mm256_storeu_ps(reinterpret_cast<float*>(out + (b + j) * kBlock), _mm256_mul_ps(sw[j], _mm256_set1_ps(256.0f)));
    }
  }
}

}  // namespace
}  // namespace mixq::kernels::x86
