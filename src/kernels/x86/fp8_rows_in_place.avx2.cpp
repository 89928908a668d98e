// A few activation rows against FP8 weights (E4M3, E5M2, MXFP8) read in
// place (the checkpoint's row-major codes, FloatPanels::in_place) on AVX2,
// with no pack buffer: each group of 8 weight rows (half a panel) is
// transposed and decoded in registers, and every output is the FMA core's
// chain in k order over the scaled activations (float_scaled_x.hpp), bit for
// bit.
//
// Why: at one token the FMA core otherwise packs every code of a call into
// panel rows (a 16x32 byte transpose through the stack into a per-thread
// buffer), then reloads and widens them: 27-45 % of the read bandwidth on
// Zen 3 where the packed copy reaches 65-104 %; this is 1.1-1.5x faster at
// one and two tokens (BENCHMARKS.md, "Issue 14 on Zen 3, nineteenth
// session").
//
// Per group of 8 rows and 16 k: 4 loads of two rows each (rows i and i + 4
// in the two 128-bit lanes), a 4x4 transpose of dwords (a dword: 4
// consecutive k of one row) into 4 registers of 8 rows × 4 k, then per k
// shifts that put each row's code at the top of its dword (decoded()) and
// a mask: the code's value·2^-120 (E4M3) or
// value·2^-112 (E5M2), the bits FloatIo<Avx2>::fp8_by_exponent gives from
// packed panels. Non-finite codes are found on the transposed registers by a
// byte-wise max of (code & 0x7F), as the packers find them: E4M3 NaN columns
// go to the caller's list, E5M2 panels with an inf or NaN to the panels the
// GEMM runs again on the f16 widening. MXFP8 keeps each sum divided by its
// block's scale, as the FMA core's micro() does with scaled activations.
#include "kernels/x86/no_fp_contract.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "kernels/x86/float_gemm.hpp"
#include "kernels/x86/simd_traits.hpp"
#include "mixq/error.hpp"

namespace mixq::kernels::x86 {
namespace {

// How a type's code becomes its scaled f32 (decoded()): at the top of a
// dword, shifted right arithmetically by kShift and masked by kKeep, which
// leaves the sign in bit 31 and the code's low 7 bits at 20-26 (E4M3) or
// 21-27 (E5M2), as fp8_by_exponent's shift left of the sign-extended code.
struct E4m3Codes {
  static constexpr int kShift = 4;
  static constexpr uint32_t kKeep = 0x87F00000u;
  static constexpr bool kBlockScaled = false, kNanColumns = true;
};
struct Mxfp8Codes : E4m3Codes {
  static constexpr bool kBlockScaled = true;
};
struct E5m2Codes {
  static constexpr int kShift = 3;
  static constexpr uint32_t kKeep = 0x8FE00000u;
  static constexpr bool kBlockScaled = false, kNanColumns = false;
};

struct Call {
  const float* a;  // activations times 2^112 (scaled_x)
  int64_t lda;
  const FloatPanels* w;
  int64_t prefetch;
  PrefetchHint prefetch_hint;
  float alpha;
  const float* bias;
  float* y;
  // Where the non-finite codes go (null: another row group reports them).
  std::vector<int64_t>* nan_columns;
  std::vector<int64_t>* nonfinite_panels;
  Call rows_from(int64_t m0) const {
    Call c = *this;
    c.a += m0 * lda;
    c.y += m0 * w->n;
    if (m0 > 0) c.nan_columns = c.nonfinite_panels = nullptr;
    return c;
  }
};

// 16 codes at lo in the low 128-bit lane, 16 at hi in the high one. A
// broadcast load and a blend: vinserti128 from memory takes a slot of the
// two pipes that shift and shuffle on Zen 3, which this kernel's decode
// fills; vbroadcasti128 mostly does not, and vpblendd runs on any of the
// four vector pipes (the shift-pipe probe of bench_float_tunings,
// support/shift_pipes.hpp: BENCHMARKS.md, "Issue 14 on Zen 3, nineteenth
// session").
inline __m256i two_rows(const uint8_t* lo, const uint8_t* hi) {
  const __m256i low = _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo)));
  const __m256i high = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(hi)));
  return _mm256_blend_epi32(low, high, 0xF0);
}

// The 4 steps of a transposed register q decoded (out[t]: byte t of every
// dword, row d's code at k 4u + t). A 16-bit arithmetic shift right by
// kShift decodes the code in the high byte of each word in place (its sign
// copied above it), so one shift serves steps 1 and 3 and, after the codes
// of steps 0 and 2 are moved up a byte, one more serves those; the low
// word's result goes to the top of the dword by a shift left of 16, and the
// mask keeps the sign and the code's bits (the other code's bits of the
// word fall below it).
template <class Codes>
inline void decoded(__m256i q, __m256 out[4]) {
  const __m256i keep = _mm256_set1_epi32(static_cast<int>(Codes::kKeep));
  const __m256i odd = _mm256_srai_epi16(q, Codes::kShift);                           // steps 1, 3
  const __m256i even = _mm256_srai_epi16(_mm256_slli_epi16(q, 8), Codes::kShift);    // steps 0, 2
  out[0] = _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(even, 16), keep));
  out[1] = _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(odd, 16), keep));
  out[2] = _mm256_castsi256_ps(_mm256_and_si256(even, keep));
  out[3] = _mm256_castsi256_ps(_mm256_and_si256(odd, keep));
}

// 2^(from - to) for 8 columns' E8M0 bytes, as f32 (FloatIo<Avx2>::e8m0_ratio).
inline __m256 e8m0_ratio(const uint8_t* from, const uint8_t* to) {
  const __m256i f = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(from)));
  const __m256i t = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(to)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(f, t), _mm256_set1_epi32(127)), 23));
}

// An E8M0 byte of scale 1 for each of 8 columns: where the first block's
// ratio starts (micro() in float_gemm_impl.hpp).
constexpr uint8_t kScaleOne[8] = {127, 127, 127, 127, 127, 127, 127, 127};

// Rows [0, R) against the G groups of 8 weight rows (half panels) from row
// 8·h, all of K, 16 k at a time: the groups' steps alternate (G independent
// FMA chains per activation row in flight), group g Lag·g steps of 16 k
// behind group 0 (each still walks its K in order; groups_lag).
template <int R, int G, int Lag, class Codes>
void groups_in_registers(const Call& c, int64_t h) {
  const FloatPanels& w = *c.w;
  const int64_t k = w.k, stride = w.rows_stride, n = w.n;
  const float* const a = c.a;
  const int64_t lda = c.lda, prefetch = c.prefetch;
  const bool to_l2 = c.prefetch_hint == _MM_HINT_T1;
  const uint8_t* const rows0 = w.rows + h * 8 * stride;
  __m256 acc[G][R];
  __m256i seen[G];  // byte-wise max of (code & 0x7F): byte b of lane L is row 4L + b / 4
  for (int g = 0; g < G; ++g) {
    seen[g] = _mm256_setzero_si256();
    for (int i = 0; i < R; ++i) acc[g][i] = _mm256_setzero_ps();
  }
  // Scales of group g's columns for block `blk` (FloatPanels::scales: 16 a panel and block).
  auto scales_of = [&](int g, int64_t blk) {
    return w.scales.data() + ((h + g) / 2 * w.blocks + blk) * 16 + 8 * ((h + g) % 2);
  };
  // The step of 16 k at `base` for group 0, base - 16·Lag·g for group g:
  // k [k0(g), k0(g) + count(g)), count(g) <= 16 (0: the group waits, before
  // its lag or after its K). kFull: every count is 16.
  auto blocks = [&](auto full, int64_t base) {
    constexpr bool kFull = decltype(full)::value;
    auto k0 = [&](int g) { return base - 16 * Lag * g; };
    auto count_of = [&](int g) -> int64_t {
      return kFull ? 16 : k0(g) < 0 ? 0 : std::clamp<int64_t>(k - k0(g), 0, 16);
    };
    // Sums and markers in locals for the step (as in the AVX-512 kernel:
    // updated through the lambda's captures, GCC keeps them on the stack).
    __m256 sums[G][R];
    __m256i marks[G];
    for (int g = 0; g < G; ++g) {
      marks[g] = seen[g];
      for (int i = 0; i < R; ++i) sums[g][i] = acc[g][i];
    }
    __m256i q[G][4];
    const __m256i low7 = _mm256_set1_epi8(0x7F);
    MIXQ_UNROLL
    for (int g = 0; g < G; ++g) {
      const int64_t count = count_of(g);
      if (count == 0) {
        for (__m256i& r : q[g]) r = _mm256_setzero_si256();  // not summed (count 0), no marker
        continue;
      }
      const uint8_t* rows = rows0 + 8 * g * stride + k0(g);
      alignas(16) uint8_t tail[8][16];
      int64_t apart = stride;
      if (!kFull && count < 16) {  // the last codes of each row, zero past K (never read past a row)
        for (int r = 0; r < 8; ++r) {
          std::memset(tail[r], 0, 16);
          std::memcpy(tail[r], rows + r * stride, static_cast<size_t>(count));
        }
        rows = tail[0];
        apart = 16;
      } else if (prefetch > 0 && k0(g) % 64 == 0) {
        for (int r = 0; r < 8; ++r) {
          const char* ahead = reinterpret_cast<const char*>(rows + r * stride + prefetch);
          if (to_l2) _mm_prefetch(ahead, _MM_HINT_T1);
          else _mm_prefetch(ahead, _MM_HINT_T0);
        }
      }
      MIXQ_UNROLL
      for (int i = 0; i < 4; ++i) q[g][i] = two_rows(rows + i * apart, rows + (i + 4) * apart);
      // q[g][i]: row i (low lane), row i + 4 (high lane); then q[g][u] holds
      // dword u (k 4u .. 4u+3) of every row: dword d is row d.
      transpose_dwords_4x4_lanes(q[g]);
      MIXQ_UNROLL
      for (int u = 0; u < 4; ++u) marks[g] = _mm256_max_epu8(marks[g], _mm256_and_si256(q[g][u], low7));
      if constexpr (Codes::kBlockScaled) {
        // A block of 32 k starts: the sums, divided by the last block's
        // scales, are divided by this one's instead (the first block's
        // from 1), as micro() does with scaled activations.
        if (k0(g) % 32 == 0) {
          const int64_t blk = k0(g) / 32;
          const __m256 r = e8m0_ratio(blk == 0 ? kScaleOne : scales_of(g, blk - 1), scales_of(g, blk));
          MIXQ_UNROLL
          for (int i = 0; i < R; ++i) sums[g][i] = _mm256_mul_ps(sums[g][i], r);
        }
      }
    }
    MIXQ_UNROLL
    for (int u = 0; u < 4; ++u) {
      __m256 wv[G][4];
      MIXQ_UNROLL
      for (int g = 0; g < G; ++g) decoded<Codes>(q[g][u], wv[g]);
      MIXQ_UNROLL
      for (int t = 0; t < 4; ++t)
        MIXQ_UNROLL
        for (int g = 0; g < G; ++g) {
          if (4 * u + t >= count_of(g)) continue;
          const int64_t s = k0(g) + 4 * u + t;  // every output's chain in k order
          MIXQ_UNROLL
          for (int i = 0; i < R; ++i)
            sums[g][i] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + i * lda + s), wv[g][t], sums[g][i]);
        }
    }
    for (int g = 0; g < G; ++g) {
      seen[g] = marks[g];
      for (int i = 0; i < R; ++i) acc[g][i] = sums[g][i];
    }
  };
  // Steps where every group reads 16 k, between the edges where some wait.
  const int64_t lead = 16 * Lag * (G - 1), whole = k / 16 * 16, end = (k + 15) / 16 * 16 + lead;
  int64_t base = 0;
  for (; base < std::min(lead, end); base += 16) blocks(std::false_type{}, base);
  for (; base < whole; base += 16) blocks(std::true_type{}, base);
  for (; base < end; base += 16) blocks(std::false_type{}, base);
  // As the FMA core's micro-kernel: MXFP8's sums times their last block's
  // scales, alpha (rounded), then the bias.
  const __m256 alpha = _mm256_set1_ps(c.alpha);
  const __m256i bits = _mm256_set1_epi8(static_cast<char>(nonfinite_bits(w.type)));
  for (int g = 0; g < G; ++g) {
    const int64_t c0 = (h + g) * 8, panel = (h + g) / 2;
    if constexpr (Codes::kBlockScaled) {
      if (k > 0) {
        const __m256 last = e8m0_ratio(scales_of(g, (k - 1) / 32), kScaleOne);
        for (int i = 0; i < R; ++i) acc[g][i] = _mm256_mul_ps(acc[g][i], last);
      }
    }
    const __m256 b = c.bias ? _mm256_loadu_ps(c.bias + c0) : _mm256_setzero_ps();
    for (int i = 0; i < R; ++i) {
      __m256 out = rounded(_mm256_mul_ps(acc[g][i], alpha));
      if (c.bias) out = _mm256_add_ps(out, b);
      _mm256_storeu_ps(c.y + i * n + c0, out);
    }
    // Bytes whose max of (code & 0x7F) reaches the type's bits: a
    // non-finite code in that row (fp8_nonfinite.hpp).
    const uint32_t found = static_cast<uint32_t>(
        _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_max_epu8(seen[g], bits), seen[g])));
    if (found == 0) continue;
    if constexpr (Codes::kNanColumns) {
      if (c.nan_columns)
        for (int r = 0; r < 8; ++r)
          if ((found >> (4 * r)) & 0xFu) c.nan_columns->push_back(c0 + r);
    } else if (c.nonfinite_panels && (c.nonfinite_panels->empty() || c.nonfinite_panels->back() != panel)) {
      c.nonfinite_panels->push_back(panel);
    }
  }
}

// The lag (in steps of 16 k) between groups side by side: rows `stride`
// bytes apart (a multiple of 64) fall on 64 / gcd(stride / 64, 64) of L1's
// 64 sets (32 KiB, 8 ways on Zen 2 and 3). Where G groups in step would put
// more than 8 rows in one set (K = 4096 or 12288: all rows in one set),
// each group runs one 64-byte line behind the one before it, so that its 8
// rows have a set of their own.
constexpr int kLagSteps = 4;
bool groups_lag(int64_t stride, int groups) {
  if (stride % 64 != 0) return false;
  return groups > 64 / std::gcd<int64_t>(stride / 64, 64);  // 8·groups rows over that many sets
}

// Half panels [h, h1) G at a time while G fit.
template <int R, int G, class Codes>
void half_panel_groups(const Call& c, int64_t& h, int64_t h1) {
  if (groups_lag(c.w->rows_stride, G))
    for (; h + G <= h1; h += G) groups_in_registers<R, G, kLagSteps, Codes>(c, h);
  else
    for (; h + G <= h1; h += G) groups_in_registers<R, G, 0, Codes>(c, h);
}

// Half panels [h, h1): `groups` (up to MaxG) at a time, then those left.
template <int R, int MaxG, class Codes>
void rows_in_registers(const Call& c, int64_t h, int64_t h1, int groups) {
  if constexpr (MaxG > 1) {
    if (groups >= MaxG) half_panel_groups<R, MaxG, Codes>(c, h, h1);
    rows_in_registers<R, MaxG - 1, Codes>(c, h, h1, std::min(groups, MaxG - 1));
  } else {
    half_panel_groups<R, 1, Codes>(c, h, h1);
  }
}

// The rows two at a time (each pair decoding the codes again: the library
// calls this for at most 2 rows, FloatTile<8>::kInPlaceRegisterRows).
template <class Codes>
void row_groups(const Call& first, int64_t m, int64_t p0, int64_t p1, int groups) {
  const int64_t h0 = 2 * p0, h1 = 2 * p1;
  for (int64_t m0 = 0; m0 < m; m0 += 2) {
    const Call c = first.rows_from(m0);
    if (m - m0 == 1) rows_in_registers<1, 4, Codes>(c, h0, h1, groups);
    else rows_in_registers<2, 2, Codes>(c, h0, h1, groups);
  }
}

}  // namespace

void fp8_rows_in_place_avx2(const float* a_scaled, int64_t lda, int64_t m, const FloatPanels& w, int64_t p0,
                            int64_t p1, const Fp8RowsInPlace& how, float alpha, const float* bias, float* y,
                            std::vector<int64_t>& nan_columns, std::vector<int64_t>& nonfinite_panels) {
  if (!w.in_place() || p1 * 16 > w.n) fail("fp8 rows in place: whole panels of a weight read in place only");
  const Call c{a_scaled, lda, &w, how.prefetch_bytes, how.prefetch_hint, alpha, bias, y, &nan_columns,
               &nonfinite_panels};
  switch (w.type) {
    case PanelType::e4m3: row_groups<E4m3Codes>(c, m, p0, p1, how.side_by_side); break;
    case PanelType::mxfp8: row_groups<Mxfp8Codes>(c, m, p0, p1, how.side_by_side); break;
    case PanelType::e5m2: row_groups<E5m2Codes>(c, m, p0, p1, how.side_by_side); break;
    default: fail("fp8 rows in place: E4M3, E5M2 or MXFP8 codes only");
  }
}

}  // namespace mixq::kernels::x86
