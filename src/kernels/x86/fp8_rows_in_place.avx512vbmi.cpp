// A few activation rows against FP8 weights (E4M3, E5M2, MXFP8) read in
// place (the checkpoint's row-major codes, FloatPanels::in_place) with no
// pack buffer: each 16-row panel is transposed and decoded in registers
// (AVX-512 VBMI), and every output is the FMA core's chain in k order, bit
// for bit.
//
// Why: at M = 1 the FMA core otherwise packs every code of a call into panel
// rows (a 16x16 byte transpose stored to a per-thread buffer), reloads them
// and widens them through f16: about twice the packed copy's time
// (BENCHMARKS.md, "Sixth AMX session"); this is 1.1-1.3x faster
// ("Seventh AMX session", "Eighth AMX session", bench_float_tunings).
//
// Per panel and 32 k: 16 row loads (rows i and i + 8 in one zmm), a
// transpose of dwords (a dword: 4 consecutive k of one row) into 8 registers
// of 16 rows × 4 k, then per register the codes' bf16 bytes by table lookups
// and per k one `vpermt2b` into the f32 the FMA core decodes
// (fp8_few_rows_vbmi.hpp); E4M3 NaN codes leave a marker in the low bytes,
// collected by OR and turned into NaN columns after the sums, as the packing
// path does. MXFP8: the 32 k of a step are one block, and each decoded
// weight is multiplied by its row's E8M0 scale as an f32 (2^(e-127) from the
// bits e << 23, as FloatIo::e8m0), the product the FMA core forms before its
// FMA.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "kernels/cpu.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "kernels/x86/fp8_few_rows_vbmi.hpp"
#include "kernels/x86/simd_traits.hpp"
#include "mixq/error.hpp"

namespace mixq::kernels::x86 {
namespace {

#pragma GCC diagnostic push  // g++ 12 warns inside its own zmm intrinsics
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// 16 rows × 32 codes as 8 registers of 16 rows × 4 k: x[i] holds rows i and
// i + 8 (32 bytes each, the low and the high half). Returns in x[t] (t = 0
// .. 7) dword t of every row, the rows in the order kRowOfDword: within each
// 128-bit lane a 4x4 dword transpose of rows 4g..4g+3 (unpacks), then
// lanes L and L + 2 of two groups side by side (shuffle_i32x4).
inline void transpose_rows_16x32(__m512i x[8]) {
  __m512i q[8];
  for (int g = 0; g < 2; ++g) {
    const __m512i* a = x + 4 * g;
    const __m512i s0 = _mm512_unpacklo_epi32(a[0], a[1]), s1 = _mm512_unpackhi_epi32(a[0], a[1]);
    const __m512i s2 = _mm512_unpacklo_epi32(a[2], a[3]), s3 = _mm512_unpackhi_epi32(a[2], a[3]);
    // q[4g+u] lane L: dword 4(L % 2) + u of rows 4g .. 4g+3 (+8 for L >= 2).
    q[4 * g + 0] = _mm512_unpacklo_epi64(s0, s2);
    q[4 * g + 1] = _mm512_unpackhi_epi64(s0, s2);
    q[4 * g + 2] = _mm512_unpacklo_epi64(s1, s3);
    q[4 * g + 3] = _mm512_unpackhi_epi64(s1, s3);
  }
  for (int u = 0; u < 4; ++u) {
    // Dword u (lanes 0, 2) and 4 + u (lanes 1, 3): rows 0-3, 8-11 from
    // group 0, then 4-7, 12-15 from group 1.
    x[u] = _mm512_shuffle_i32x4(q[u], q[4 + u], 0x88);
    x[4 + u] = _mm512_shuffle_i32x4(q[u], q[4 + u], 0xDD);
  }
}
// Dword d of a transposed register holds row kRowOfDword[d]; the sums are
// permuted back by kDwordOfRow before they are stored.
constexpr int kRowOfDword[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};

// MXFP8: the 16 rows' scales of one block (16 bytes in column order,
// FloatPanels::scales) as f32 in the transposed registers' dword order.
inline __m512 block_scales_in_dword_order(const uint8_t* e) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(e));
  const __m512i bits = _mm512_slli_epi32(_mm512_cvtepu8_epi32(bytes), 23);
  const __m512i order = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15);  // kRowOfDword
  return _mm512_castsi512_ps(_mm512_permutexvar_epi32(order, bits));
}

// Step u of a transposed register: dword d's code at byte 4d + u.
constexpr PlaceIndices kPlace = make_place_indices([](int u, int d) { return 4 * d + u; });

// Staged panels (stage_rows): k bytes of each row copied at a time, the
// steps of 32 k that read them, and how far past the copied bytes each row
// is prefetched into L2 (384 B to 1 KiB measured at K = 12288, 512 the
// fastest; 256, one chunk, 2x slower from DRAM).
constexpr int64_t kStageBytes = 256, kStageSteps = kStageBytes / 32, kStagePrefetchBytes = 512;

struct Call {
  const float* a;
  int64_t lda;
  const FloatPanels* w;
  int64_t prefetch;
  PrefetchHint prefetch_hint;  // _MM_HINT_T0 or _MM_HINT_T1
  bool stage_aliased_rows;
  float alpha;
  const float* bias;
  float* y;
  std::vector<int64_t>* nan_columns;  // null: another row group reports them
  Call rows_from(int64_t m0) const {
    Call c = *this;
    c.a += m0 * lda;
    c.y += m0 * w->n;
    if (m0 > 0) c.nan_columns = nullptr;
    return c;
  }
};

// Rows [0, R) against panels p .. p+J-1, all of K, 32 k at a time: the J
// panels' steps alternate (J independent FMA chains per row in flight),
// panel j Lag·j steps of 32 k behind panel 0 (each still walks its K in
// order; panels_lag). Codes: E4m3Codes, Mxfp8Codes (every block a full 32
// k) or E5m2Codes.
// `staged` (Lag 0 only; stage_rows) is a run-time flag: as a template one
// it doubled the instantiations, and clang's sanitizer build of this file
// took many minutes more.
template <int R, int J, int Lag, class Codes>
void panels_in_registers(const Call& c, int64_t p, bool staged) {
  const FloatPanels& w = *c.w;
  const int64_t k = w.k, stride = w.rows_stride, n = w.n;
  // The call's fields in locals: read through `c` inside the steps, GCC
  // reloaded them from memory at every row.
  const float* const a = c.a;
  const int64_t lda = c.lda, prefetch = c.prefetch;
  const bool to_l2 = c.prefetch_hint == _MM_HINT_T1;
  // Staged: the panels' rows are copied kStageBytes of k at a time into two
  // halves of a buffer (rows kStageBytes apart: in 16 sets), chunk q + 1
  // while chunk q is read, two rows a step (staged_copy).
  alignas(64) uint8_t stage[J][2][16 * kStageBytes];
  auto staged_copy = [&](int j, int64_t q, int row0, int rows) {
    if (q * kStageBytes >= k) return;
    for (int r = row0; r < row0 + rows; ++r) {
      const uint8_t* from = w.rows + ((p + j) * 16 + r) * stride + q * kStageBytes;
      uint8_t* to = stage[j][q & 1] + r * kStageBytes;
      MIXQ_UNROLL
      for (int64_t b = 0; b < kStageBytes; b += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(from + b + kStagePrefetchBytes), _MM_HINT_T1);
        _mm512_store_si512(to + b, _mm512_loadu_si512(from + b));
      }
    }
  };
  if (staged)
    for (int j = 0; j < J; ++j) staged_copy(j, 0, 0, 16);
  __m512 acc[J][R];
  __m512i seen[J];  // OR of the low bytes: a NaN code leaves 0x0F (dword d: row kRowOfDword[d])
  for (int j = 0; j < J; ++j) {
    seen[j] = _mm512_setzero_si512();
    for (int i = 0; i < R; ++i) acc[j][i] = _mm512_setzero_ps();
  }
  // The step of 32 k at `base` for panel 0, base - 32·Lag·j for panel j:
  // steps [k0(j), k0(j) + count(j)), count(j) <= 32 (the codes past it load
  // as zero and are not summed; 0: the panel waits, before its lag or after
  // its K). kFull: every count is 32. The panels' FMAs alternate step by
  // step: each output is one chain in k order (4-cycle FMA latency per
  // step), so at one row a panel alone waits on its chain; J chains side by
  // side in program order keep J in flight.
  auto blocks = [&](auto full, int64_t base) {
    constexpr bool kFull = decltype(full)::value;
    auto k0 = [&](int j) { return base - 32 * Lag * j; };
    auto count_of = [&](int j) -> int64_t {
      return kFull ? 32 : k0(j) < 0 ? 0 : std::clamp<int64_t>(k - k0(j), 0, 32);
    };
    int64_t most = 0;
    for (int j = 0; j < J; ++j) most = std::max(most, count_of(j));
    // The sums and markers in locals for the step: updated through the
    // lambda's captures, GCC stored every FMA's result to the stack (1.1-1.2x
    // slower at one token, 1.6-1.8x at four, cache-resident; BENCHMARKS.md
    // "Issue 14 on Zen 5, ninth session").
    __m512 sums[J][R];
    __m512i nan[J];
    for (int j = 0; j < J; ++j) {
      nan[j] = seen[j];
      for (int i = 0; i < R; ++i) sums[j][i] = acc[j][i];
    }
    __m512i x[J][8];
    MIXQ_UNROLL
    for (int j = 0; j < J; ++j) {
      if (count_of(j) == 0) {
        for (__m512i& r : x[j]) r = _mm512_setzero_si512();  // decodes to +0, no NaN marker
        continue;
      }
      const __mmask32 live = count_of(j) >= 32 ? ~__mmask32{0} : (__mmask32{1} << count_of(j)) - 1;
      const uint8_t* rows = w.rows + (p + j) * 16 * stride + k0(j);
      int64_t rows_apart = stride;
      if (staged) {
        const int64_t step = k0(j) / 32, q = step / kStageSteps;
        staged_copy(j, q + 1, static_cast<int>(step % kStageSteps) * 16 / kStageSteps, 16 / kStageSteps);
        rows = stage[j][q & 1] + k0(j) % kStageBytes;
        rows_apart = kStageBytes;
      }
      MIXQ_UNROLL
      for (int i = 0; i < 8; ++i) {
        const uint8_t* lo = rows + i * rows_apart;
        const uint8_t* hi = lo + 8 * rows_apart;
        if (!staged && prefetch > 0) {  // staged rows are prefetched by staged_copy
          if (to_l2) {
            _mm_prefetch(reinterpret_cast<const char*>(lo + prefetch), _MM_HINT_T1);
            _mm_prefetch(reinterpret_cast<const char*>(hi + prefetch), _MM_HINT_T1);
          } else {
            _mm_prefetch(reinterpret_cast<const char*>(lo + prefetch), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(hi + prefetch), _MM_HINT_T0);
          }
        }
        x[j][i] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi8(live, lo)),
                                     _mm256_maskz_loadu_epi8(live, hi), 1);
      }
      transpose_rows_16x32(x[j]);
    }
    [[maybe_unused]] __m512 scale[J];  // MXFP8: block k0(j) / 32 of each panel's rows
    if constexpr (Codes::kBlockScaled)
      MIXQ_UNROLL
      for (int j = 0; j < J; ++j)
        scale[j] = count_of(j) == 0
                       ? _mm512_setzero_ps()
                       : block_scales_in_dword_order(w.scales.data() + ((p + j) * w.blocks + k0(j) / 32) * 16);
    MIXQ_UNROLL
    for (int t = 0; t < 8; ++t) {
      if (4 * t >= most) break;
      __m512i hi[J], lo[J];
      MIXQ_UNROLL
      for (int j = 0; j < J; ++j) {
        bf16_bytes<Codes>(x[j][t], hi[j], lo[j]);
        if constexpr (Codes::kNanMarker) nan[j] = _mm512_or_si512(nan[j], lo[j]);
      }
      MIXQ_UNROLL
      for (int u = 0; u < 4; ++u) {
        if (4 * t + u >= most) break;
        MIXQ_UNROLL
        for (int j = 0; j < J; ++j) {
          if (4 * t + u >= count_of(j)) continue;
          const int64_t s = k0(j) + 4 * t + u;  // every output's chain in k order
          __m512 wv = placed(hi[j], lo[j], kPlace.idx[u]);
          if constexpr (Codes::kBlockScaled) wv = _mm512_mul_ps(wv, scale[j]);
          MIXQ_UNROLL
          for (int i = 0; i < R; ++i)
            sums[j][i] = _mm512_fmadd_ps(_mm512_set1_ps(a[i * lda + s]), wv, sums[j][i]);
        }
      }
    }
    for (int j = 0; j < J; ++j) {
      seen[j] = nan[j];
      for (int i = 0; i < R; ++i) acc[j][i] = sums[j][i];
    }
  };
  // Steps where every panel reads 32 k, between the edges where some wait.
  const int64_t lead = 32 * Lag * (J - 1), whole = k / 32 * 32, end = (k + 31) / 32 * 32 + lead;
  int64_t base = 0;
  for (; base < std::min(lead, end); base += 32) blocks(std::false_type{}, base);
  for (; base < whole; base += 32) blocks(std::true_type{}, base);
  for (; base < end; base += 32) blocks(std::false_type{}, base);
  // As the FMA core's micro-kernel: alpha (rounded), then the bias; the
  // dwords back in row order (rows 4-7 and 8-11 swap lanes).
  const __m512 alpha = _mm512_set1_ps(c.alpha);
  for (int j = 0; j < J; ++j) {
    const int64_t c0 = (p + j) * 16;
    const __m512 b = c.bias ? _mm512_loadu_ps(c.bias + c0) : _mm512_setzero_ps();
    for (int i = 0; i < R; ++i) {
      __m512 out = rounded(_mm512_mul_ps(_mm512_shuffle_f32x4(acc[j][i], acc[j][i], 0xD8), alpha));
      if (c.bias) out = _mm512_add_ps(out, b);
      _mm512_storeu_ps(c.y + i * n + c0, out);
    }
    if (!Codes::kNanMarker || !c.nan_columns) continue;
    const __mmask64 nan_bytes = _mm512_test_epi8_mask(seen[j], _mm512_set1_epi8(0x0F));
    for (int d = 0; d < 16; ++d)
      if ((nan_bytes >> (4 * d)) & 0xF) c.nan_columns->push_back(c0 + kRowOfDword[d]);
  }
}

// The lag (in steps of 32 k) between J panels side by side. Rows `stride`
// bytes apart (a multiple of 64) fall on 64 / gcd(stride / 64, 64) of L1's
// 64 sets of 64 B (32 KiB, 8 ways on Zen 4; 48 KiB, 12 ways on Zen 5 and
// Sapphire / Emerald Rapids); where the rows are staged (stage_rows, K a
// multiple of 256) the panels stay in step. Up to 16 rows a set, J panels
// in step ran 1.6-1.9x one (K = 2048, 6144, 10240: 2 sets); at 32 (K = 4096, 12288: 1 set) no faster (15.9
// against 30.6 GB/s at K = 4160; one thread, in cache): a line is evicted
// before the next step reads its second half. There a lag of one 64-byte
// line a panel puts each panel's rows in a set of their own (E4M3: 1.5x one
// panel at K = 12288, in cache; MXFP8 not helped, BENCHMARKS.md "fifth
// session"); elsewhere the panels stay in step, where one activation
// broadcast serves them all (a build with the lag at every stride was
// 1.07-1.15x slower at K = 3072 and 4160).
constexpr int kLagSteps = 2;
// The L1 sets that rows `stride` bytes apart (a multiple of 64) fall on.
int64_t l1_sets_of_rows(int64_t stride) { return 64 / std::gcd<int64_t>(stride / 64, 64); }
int panels_lag(int64_t stride, int j) {
  if (stride % 64 != 0) return 0;
  return j <= l1_sets_of_rows(stride) ? 0 : kLagSteps;  // 16 rows a set at most
}

// Whether J panels' rows are staged (Call::stage_aliased_rows): where more
// than 8 of them fall in one L1 set (8 ways on Zen 4, 12 on Zen 5 and
// Sapphire / Emerald Rapids). Reading 16 or 32 such rows 32 or 64 B at a
// time ran at 35-58 GB/s where rows in distinct sets ran at 110 (one
// thread, L2-resident; lines loaded whole or in halves alike), and the
// panels 1.7-1.8x slower in cache than packed; staged, 1.1-1.2x
// (BENCHMARKS.md, "Issue 14 on Zen 4, fourth session"). Elsewhere the copy
// does not pay (1.3-1.4x slower from DRAM at K = 2048 and 3072).
bool stage_rows(const Call& c, int j) {
  const FloatPanels& w = *c.w;
  if (!c.stage_aliased_rows || w.rows_stride % 64 != 0 || w.k % kStageBytes != 0) return false;
  return 16 * j > 8 * l1_sets_of_rows(w.rows_stride);
}

template <int R, int J, class Codes>
void panel_groups(const Call& c, int64_t& p, int64_t p1) {
  const bool staged = stage_rows(c, J);
  if (staged || panels_lag(c.w->rows_stride, J) == 0)
    for (; p + J <= p1; p += J) panels_in_registers<R, J, 0, Codes>(c, p, staged);
  else
    for (; p + J <= p1; p += J) panels_in_registers<R, J, kLagSteps, Codes>(c, p, false);
}

template <int R, class Codes>
void rows_in_registers(const Call& c, int64_t p0, int64_t p1, int side_by_side) {
  int64_t p = p0;
  if (side_by_side >= 3) panel_groups<R, 3, Codes>(c, p, p1);
  if (side_by_side >= 2) panel_groups<R, 2, Codes>(c, p, p1);
  const bool staged = stage_rows(c, 1);
  for (; p < p1; ++p) panels_in_registers<R, 1, 0, Codes>(c, p, staged);
}

#pragma GCC diagnostic pop

}  // namespace

bool fp8_table_decode_supported() { return cpu_has_avx512_vbmi(); }

void fp8_rows_in_place_avx512vbmi(const float* a, int64_t lda, int64_t m, const FloatPanels& w, int64_t p0,
                                  int64_t p1, const Fp8RowsInPlace& how, float alpha, const float* bias,
                                  float* y, std::vector<int64_t>& nan_columns) {
  const Call c{a, lda, &w, how.prefetch_bytes, how.prefetch_hint, how.stage_aliased_rows, alpha, bias, y,
               &nan_columns};
  run_row_groups(c, w.type, m, [&]<int R, class Codes>(const Call& rows) {
    rows_in_registers<R, Codes>(rows, p0, p1, how.side_by_side);
  });
}

}  // namespace mixq::kernels::x86
