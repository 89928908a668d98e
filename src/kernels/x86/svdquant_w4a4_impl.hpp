#pragma once
// The SVDQuant W4A4 linear (svdquant_w4a4.hpp) over a vector type V
// (simd_traits.hpp), compiled once per target by svdquant_w4a4.avx2.cpp, .avxvnni.cpp and
// .avx512.cpp. Bit-identical to kernels::svdquant_ref: the same
// fp32 operations in the same order (the including file turns FMA contraction
// off), and the integer group dots are exact.
//
// Per call: activation rows are quantized (signed codes qa, per-group scales
// and offset terms) and the low-rank input lora = x·proj_down is formed;
// then a register block of R rows × CB panels walks K group by group. A
// 16-column panel is 16 / kLanes vectors ("halves" on AVX2), so the block
// holds R·CB·16/kLanes int32 group accumulators and as many fp32 outputs.
// Small M splits the panels over the threads (weights streamed once); larger
// M splits rows.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "util/parallel.hpp"
#include "util/phase_timer.hpp"
#include "kernels/ref/svdquant_common.hpp"
#include "kernels/stream_prefetch.hpp"
#include "kernels/x86/nibble_steps.hpp"
#include "kernels/x86/simd_traits.hpp"
#include "kernels/x86/svdquant_w4a4.hpp"

namespace mixq::kernels::x86 {
namespace {

// Register block per target: rows × panels. AVX-512: 4 × 3 (12 int32 group
// accumulators + 12 fp32 outputs in zmm, next to 3 to 6 unpacked weight
// vectors); AVX2: 4 × 1 (8 i16 group accumulators + 8 fp32 outputs + 2
// weight vectors and the broadcasts: more than the 16 ymm, so some live on
// the stack, and still the fastest block measured). Chosen by
// timing M = 16 / 1024 / 4096 (BENCHMARKS.md: AVX-512 4 × 3 against 4 × 2,
// 3 × 4 and 6 × 2; AVX2 4 × 1 against 2 × 1, 3 × 1 and 1 × 2);
// bench_svdquant_tunings runs such variations side by side, bench_phases
// and bench_linear_more time the layer (svdquant has no quantizer, so
// `mixq bench` cannot).
template <class V>
struct SvdquantTile {
  static constexpr int kRows = 4;
  static constexpr int kPanels = V::kLanes == 16 ? 3 : 1;
  // One row (M = 1, weights streamed from DRAM): 1 × 4 panels on the ymm
  // targets (8 group accumulators and 8 fp32 outputs), four panel streams
  // per thread instead of one. Zen 2 (AVX2; AVX-VNNI not measured),
  // bench_svdquant_tunings --tuning M=1: 1 × 1 1.22-1.32x slower at two
  // threads, 1.24-1.45x at one, and equal from cache: the streams, not the
  // arithmetic (BENCHMARKS.md, "Issue 14 on AVX2: Zen 2, tenth session").
  static constexpr int kOneRowPanels = V::kLanes == 16 ? kPanels : 4;
  static constexpr PrefetchHint kStreamPrefetchHint = _MM_HINT_T0;  // small M: the weights' prefetch (into L1)
  // Large M: each group of kPanels panels is unpacked once per chunk of at
  // least kUnpackMinRows rows where K <= kUnpackMaxK (UnpackedPanels), and
  // every block of the chunk reads that, instead of splitting every nibble
  // again per block of kRows rows (3 vector ops per 64 weight bytes next to 8
  // dot products). Zen 5, 2 threads (bench_svdquant_tunings --tuning "no
  // unpacking"): at K = 3072, chunks of 120-128 rows 1.02-1.08x faster (M =
  // 256 .. 4096, N = 3072 and 12288), of 96 rows even, of 64 rows 0.97x, of
  // 32 rows 0.90x (the unpacking then costs more than it saves). At M = 4096
  // and K = 12288 the library built with unpacking ran 0.96x (bench_phases;
  // the unpacked panels, 576 KiB, crowd the rows' codes out of the 1 MiB L2),
  // at K = 5376 even. AVX2 (Zen 3, one panel a block: 48 KiB unpacked at
  // K = 3072, 192 KiB at 12288, in a 512 KiB L2), 2 threads
  // (bench_svdquant_tunings --tuning "nibbles"): 1.17-1.36x faster at M = 256
  // to 4096, K = N = 3072, at K = 12288 N = 3072, K = 3072 N = 12288 and
  // K = 5376 N = 21504; the layer at M = 4096, K = N = 3072 1.2-1.3x
  // (bench_phases; BENCHMARKS.md, "Issue 14 on Zen 3, fourteenth
  // session"). AVX-VNNI not measured.
  static constexpr bool kUnpackLargeM = true;
  static constexpr int64_t kUnpackMinRows = 96, kUnpackMaxK = V::kLanes == 16 ? 3072 : 12288;
};
constexpr int64_t kSvdquantRowChunk = 128;  // codes of 128 rows (K bytes each) stay in L2
constexpr int64_t kSvdquantSmallM = 16;     // up to this many rows: memory-bound, panels split over the threads

// svdq::quantize_act_row vectorised, with the same fp32 operations, so the
// codes, scales and sums are those of the reference: (x + shift) / smooth;
// per 64-group absmax ignoring NaN (vmaxps returns its second operand for a
// NaN first); s = max(a, 1e-10) / qmax; code = clamp(rne(v / s)) + offset,
// where min/max take the operands in the order that keeps a NaN like
// std::min/max do and the truncating conversion turns it into byte 0 like the
// scalar cast. Stored is the signed qa = code − offset (what the reference
// multiplies: a NaN gives −offset there too) and offset_terms holds −8·Σ qa.
// kLanes groups at a time: their maxima reduce into one vector (max_each,
// NaN-free after the vmaxps above, so the order of the maxima does not
// matter), s runs per lane (max(a, 1e-10) is std::max for a NaN-free a), and
// the code sums likewise (sum_each: exact int32), where one group at a time
// chained two horizontal reductions and a scalar division per group.
template <class V>
void quantize_act_row(const float* x, const StoredView& smooth, int64_t k, bool act_unsigned, float* tmp,
                      int8_t* codes, float* scales, int32_t* offset_terms) {
  using F = typename V::F;
  using I = typename V::I;
  constexpr int L = V::kLanes, Q = svdq::kGroup / L;  // vectors per group
  const F shift = V::set1(act_unsigned ? svdq::kShift : 0.0f);
  for (int64_t i = 0; i < k; i += L) V::store(tmp + i, V::div(V::add(V::load(x + i), shift), smooth.load<V>(i)));
  const float qmax = act_unsigned ? 15.0f : 7.0f;
  const F vmax = V::set1(qmax), vlo = V::set1(act_unsigned ? 0.0f : -7.0f);
  const F offset = V::set1(act_unsigned ? 0.0f : 8.0f);
  const I byte = V::set1i(0xFF), ioffset = V::set1i(act_unsigned ? 0 : 8);
  const int64_t groups = k / svdq::kGroup;
  for (int64_t g0 = 0; g0 < groups; g0 += L) {
    const int n = static_cast<int>(std::min<int64_t>(L, groups - g0));
    F amax[L];
    for (int j = 0; j < L; ++j) {
      amax[j] = V::zero();
      if (j < n)
        for (int q = 0; q < Q; ++q) amax[j] = V::max(V::abs(V::load(tmp + (g0 + j) * svdq::kGroup + L * q)), amax[j]);
    }
    alignas(64) float s[L];
    V::store(s, V::div(V::max(max_each<V>(amax), V::set1(1e-10f)), vmax));
    I sum[L];
    for (int j = 0; j < L; ++j) {
      sum[j] = V::zeroi();
      if (j >= n) continue;
      const int64_t g = g0 + j;
      const F vs = V::set1(s[j]);
      for (int q = 0; q < Q; ++q) {
        F c = V::round(V::div(V::load(tmp + g * svdq::kGroup + L * q), vs));
        c = V::add(V::max(vlo, V::min(vmax, c)), offset);
        const I qa = V::subi(V::andi(V::cvtt(c), byte), ioffset);  // -8..15
        sum[j] = V::addi(sum[j], qa);
        V::store_i8(codes + g * svdq::kGroup + L * q, qa);
      }
    }
    alignas(64) int32_t terms[L];
    V::storei_a(terms, V::mullo(sum_each<V>(sum), V::set1i(-8)));
    for (int j = 0; j < n; ++j) {
      scales[g0 + j] = s[j];
      offset_terms[g0 + j] = terms[j];
    }
  }
}

// svdq::lora_down_row for R rows at once (each proj_down row is read once for
// all of them), two vectors of ranks per pass: lora[r][j] = lora[r][j] +
// x[r][i]·p[i][j] in i order, product rounded first, as the reference.
// proj_down rows hold rank_pad (a multiple of 2·kLanes) ranks, zeros past
// `rank`: whole-vector loads; only the first `rank` lanes are stored.
template <class V, int R>
void lora_down_rows(const float* x, int64_t k, const StoredView& proj_down, int64_t rank, int64_t rank_pad,
                    float* lora) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  static_assert(kSvdquantRankPad % (2 * L) == 0);
  for (int64_t j0 = 0; j0 < rank; j0 += 2 * L) {
    const typename V::M m0 = V::mask(rank - j0), m1 = V::mask(rank - j0 - L);
    F acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = V::zero();
    for (int64_t i = 0; i < k; ++i) {
      const F p0 = proj_down.load<V>(i * rank_pad + j0);
      const F p1 = proj_down.load<V>(i * rank_pad + j0 + L);
      for (int r = 0; r < R; ++r) {
        const F xi = V::set1(x[r * k + i]);
        acc[r][0] = V::add(acc[r][0], V::mul(xi, p0));
        acc[r][1] = V::add(acc[r][1], V::mul(xi, p1));
      }
    }
    for (int r = 0; r < R; ++r) {
      V::store(lora + r * rank + j0, m0, acc[r][0]);
      V::store(lora + r * rank + j0 + L, m1, acc[r][1]);
    }
  }
}

// proj_down as lora_down_rows reads it for a call of m rows: past
// kSvdquantSmallM rows (the large-M path), a 16-bit array is widened to f32
// once per call into this thread's buffer (kept between calls, grow-only), so
// that the loop loads it without widening every vector: that loop ran 1.35x
// faster at M = 2048 on Zen 5 (one thread, K = 3072, BF16; scratch harness).
template <class V>
StoredView down_for_rows(const SvdquantPacked& pk, int64_t m) {
  const StoredView stored(pk.proj_down);
  if (m <= kSvdquantSmallM || pk.proj_down.width() == FloatWidth::f32) return stored;
  thread_local std::vector<float> widened;
  const int64_t count = pk.k * pk.rank_pad;  // a multiple of kSvdquantRankPad, so of kLanes
  if (widened.size() < static_cast<size_t>(count)) widened.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; i += V::kLanes) V::store(widened.data() + i, stored.load<V>(i));
  return StoredView(FloatWidth::f32, widened.data());
}

// y for rows [m0, m0+R) of the U column vectors from panel p0 on: (main +
// lora·proj_upᵀ) + bias, the low-rank sum in r order. The sums of UC column
// vectors of all R rows run side by side (one proj_upᵀ load per vector and
// rank step for all rows, R·UC independent add chains, where one vector's R
// chains left the adds waiting on each other); each row's own operations and
// their order are the reference's.
// UC = U where the chains, out and the loads fit the 32 zmm, else 1.
// proj_upᵀ's columns from panel p0 on are read from up_t at width W, rank j's
// at j·up_stride + up_col0 (the packed array, or block()'s f32 copy).
template <class V, FloatWidth W, int R, int U>
void finish_width(const SvdquantPacked& pk, const SvdquantActs& a, int64_t m0, int64_t p0, const void* up_t,
                  int64_t up_stride, int64_t up_col0, const typename V::F (&out)[R][U], float* y) {
  using F = typename V::F;
  constexpr int L = V::kLanes, UC = V::kLanes == 16 && 2 * R * U + U + 1 <= 32 ? U : 1;
  const float* lora = a.lora.data() + m0 * a.rank;
  for (int u0 = 0; u0 < U; u0 += UC) {
    F low[R][UC];
    MIXQ_UNROLL
    for (int r = 0; r < R; ++r)
      MIXQ_UNROLL
      for (int c = 0; c < UC; ++c) low[r][c] = V::zero();
    for (int64_t j = 0; j < a.rank; ++j) {
      F up[UC];
      MIXQ_UNROLL
      for (int c = 0; c < UC; ++c) up[c] = load_width<V, W>(up_t, j * up_stride + up_col0 + L * (u0 + c));
      MIXQ_UNROLL
      for (int r = 0; r < R; ++r) {
        const F l = V::set1(lora[r * a.rank + j]);
        MIXQ_UNROLL
        for (int c = 0; c < UC; ++c) low[r][c] = V::add(low[r][c], V::mul(l, up[c]));
      }
    }
    for (int c = 0; c < UC; ++c) {
      const int64_t col = p0 * 16 + L * (u0 + c);
      const typename V::M mask = V::mask(pk.n - col);
      for (int r = 0; r < R; ++r) {
        F v = V::add(out[r][u0 + c], low[r][c]);
        if (!pk.bias.empty()) v = V::add(v, V::loadz(mask, pk.bias.data() + col));
        V::store_first(y + (m0 + r) * pk.n + col, pk.n - col, v);
      }
    }
  }
}

// finish_width at proj_upᵀ's stored width (picked once per block, not per load).
template <class V, int R, int U>
void finish(const SvdquantPacked& pk, const SvdquantActs& a, int64_t m0, int64_t p0,
            const typename V::F (&out)[R][U], float* y) {
  const void* up_t = StoredView(pk.proj_up_t).base;
  const int64_t np = pk.panels * 16, col0 = p0 * 16;
  switch (pk.proj_up_t.width()) {
    case FloatWidth::f16: finish_width<V, FloatWidth::f16, R, U>(pk, a, m0, p0, up_t, np, col0, out, y); break;
    case FloatWidth::bf16: finish_width<V, FloatWidth::bf16, R, U>(pk, a, m0, p0, up_t, np, col0, out, y); break;
    default: finish_width<V, FloatWidth::f32, R, U>(pk, a, m0, p0, up_t, np, col0, out, y); break;
  }
}

// At least `bytes` of this thread's scratch from `buffer` (kept between
// calls, grow-only), 64-byte aligned: the unpacked panels.
inline uint8_t* aligned_scratch(std::vector<uint8_t>& buffer, size_t bytes) {
  if (buffer.size() < bytes + 64) buffer.resize(bytes + 64);
  return buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64;
}

// A group of CB panels unpacked for large M (SvdquantTile::kUnpackLargeM) in
// this thread's buffer: the weights as bytes (unpack_nibble_rows: K·16 bytes
// a panel, octet o's low nibbles at 128·o, its high ones 64 bytes further),
// and the group's columns of the group scales and of proj_upᵀ widened to f32
// (rows of CB·16: no width switch or widening per load in the loop).
struct UnpackedPanels {
  const uint8_t* weight;
  const float* wscale;  // [K/64][CB·16]
  const float* up_t;    // [rank][CB·16]
};

// Rows [m0, m0+R) × panels [p0, p0+CB): U = CB·16/kLanes vectors of columns,
// vector u covering columns 16·p0 + kLanes·u. prefetch: how far ahead (bytes)
// each panel's weights are fetched, and with it the group scales
// kScaleGroupsAhead groups ahead and proj_upᵀ's rows over the first groups
// (0: none, where the rows reuse them from cache). At M = 1 from DRAM the
// three together made the call 1.28x faster (median of alternating builds;
// BENCHMARKS.md, "fifth session"). Unpacked: the panels are read from
// `unpacked` instead of pk.
inline constexpr int64_t kScaleGroupsAhead = 4;
template <class V, int R, int CB, class Tile = SvdquantTile<V>, bool Unpacked = false>
void block(const SvdquantPacked& pk, const SvdquantActs& a, int64_t m0, int64_t p0, int64_t prefetch,
           const UnpackedPanels& unpacked, float* y) {
  using F = typename V::F;
  using I = typename V::I;
  constexpr int L = V::kLanes, H = 16 / L, U = CB * H;
  const int64_t k8 = pk.k / 8, np = pk.panels * 16, groups = a.groups;
  const I low4 = V::set1b(0x0F);
  const StoredView wscale(pk.wscale), up_t(pk.proj_up_t);
  F out[R][U];
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < U; ++u) out[r][u] = V::zero();
  for (int64_t g = 0; g < groups; ++g) {
    if (prefetch > 0) {
      // The rows of the group scales and of proj_upᵀ (for finish()) are np
      // columns apart: misses no stream prefetcher follows.
      if (g + kScaleGroupsAhead < groups) {
        _mm_prefetch(wscale.at((g + kScaleGroupsAhead) * np + p0 * 16), _MM_HINT_T0);
        _mm_prefetch(wscale.at((g + kScaleGroupsAhead) * np + (p0 + CB) * 16 - 1), _MM_HINT_T0);
      }
      if (g < a.rank) {
        _mm_prefetch(up_t.at(g * np + p0 * 16), _MM_HINT_T1);
        _mm_prefetch(up_t.at(g * np + (p0 + CB) * 16 - 1), _MM_HINT_T1);
      }
    }
    // Each group dot is a block dot (simd_traits.hpp: dot_begin, 16
    // dot_step, dot_end) that ends at its offset term: Σ (qw + 8)·qa − 8·Σ qa
    // = Σ qw·qa, exact in int32, with no subtraction after the dots. Without
    // VNNI the group's products add up in i16 before one vpmaddwd: an i16
    // lane takes 32 of them, weight offsets 0..15 times |qa| <= 15, so its
    // sum stays within 32·15·15 = 7200 and never saturates or wraps.
    int32_t start[R];
    I acc[R][U];
    for (int r = 0; r < R; ++r) {
      start[r] = a.offset_terms[(m0 + r) * groups + g];
      for (int u = 0; u < U; ++u) acc[r][u] = V::dot_begin(start[r]);
    }
    // Unrolled: g++ 12 otherwise copies every accumulator between registers
    // once or twice per octet (objdump), as many moves as dot products.
    MIXQ_UNROLL
    for (int oct = 0; oct < 8; ++oct) {
      const int64_t o = g * 8 + oct;
      if (prefetch > 0)  // one 64-byte line per panel and octet
        for (int c = 0; c < CB; ++c)
          _mm_prefetch(reinterpret_cast<const char*>(pk.weight.data() + ((p0 + c) * k8 + o) * 16) + prefetch,
                       Tile::kStreamPrefetchHint);
      // Low nibbles (k 0..3 of the octet) against every row, then the high
      // ones (k 4..7).
      auto weights = [&](I* w, bool high) {
        if constexpr (Unpacked) {
          for (int u = 0; u < U; ++u)
            w[u] = V::loadi_a(unpacked.weight + (u / H) * k8 * 128 + o * 128 + (high ? 64 : 0) + 4 * L * (u % H));
          return;
        }
        for (int u = 0; u < U; ++u) {
          const I v = V::loadi(pk.weight.data() + ((p0 + u / H) * k8 + o) * 16 + L * (u % H));
          w[u] = V::andi(high ? V::template srli<4>(v) : v, low4);
        }
      };
      for (int half = 0; half < 2; ++half) {
        I w[U];
        weights(w, half == 1);
        for (int r = 0; r < R; ++r) {
          const I x = V::bcast4(a.q() + (m0 + r) * a.k + o * 8 + 4 * half);
          for (int u = 0; u < U; ++u)  // weight offsets 0..15 (unsigned) · qa -7..15 (signed)
            acc[r][u] = V::dot_step(acc[r][u], w[u], x);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < U; ++u) acc[r][u] = V::dot_end(acc[r][u], start[r]);
    for (int u = 0; u < U; ++u) {
      const int64_t col = p0 * 16 + L * u;
      const F ws = Unpacked ? V::load(unpacked.wscale + g * CB * 16 + L * u) : wscale.load<V>(g * np + col);
      for (int r = 0; r < R; ++r) {
        const int64_t row = m0 + r;
        const F sc = V::mul(V::set1(a.scales[row * groups + g]), ws);
        out[r][u] = V::add(out[r][u], V::mul(V::cvt(acc[r][u]), sc));
      }
    }
  }
  if constexpr (Unpacked) finish_width<V, FloatWidth::f32, R, U>(pk, a, m0, p0, unpacked.up_t, CB * 16, 0, out, y);
  else finish<V, R, U>(pk, a, m0, p0, out, y);
}

#if defined(MIXQ_SVDQUANT_AMX)
// AMX-INT8 (Isa::amx; compiled only into svdquant_amx.avx512amx.cpp, which
// defines MIXQ_SVDQUANT_AMX and has the AMX flags): rows
// [m0, m0 + 16) × panel p, whose weights `b` are unpacked to the int8 panel
// layout (unpack_nibble_rows). Per 64-group one tdpbsud gives the 16 × 16 exact
// group dots into a small buffer; the next group's tile work is issued before
// this group's vector epilogue (two tile sets: C 0/1, A 4/5, B 6/7), so the
// tiles work while the vectors do. Every group then goes through exactly
// block()'s fp32 operations, in group order: the same bits.
template <class V>
void block_amx(const SvdquantPacked& pk, const SvdquantActs& a, int64_t m0, int64_t p, const uint8_t* b, float* y) {
  using F = typename V::F;
  using I = typename V::I;
  static_assert(V::kLanes == 16, "one zmm per panel row");
  const int64_t np = pk.panels * 16, groups = a.groups, col = p * 16, lda = a.k;
  const StoredView wscale(pk.wscale);
  F out[16][1];
  MIXQ_UNROLL
  for (int r = 0; r < 16; ++r) out[r][0] = V::zero();
  alignas(64) int32_t dots[2][256];
  const int8_t* rows = a.q() + m0 * lda;
  auto issue = [&](int64_t g) {  // group g's dots into dots[g % 2]
    int32_t* c = dots[g % 2];
    if (g % 2 == 0) {
      _tile_loadd(4, rows + 64 * g, lda);
      _tile_loadd(6, b + 1024 * g, 64);
      _tile_zero(0);
      _tile_dpbsud(0, 4, 6);
      _tile_stored(0, c, 64);
    } else {
      _tile_loadd(5, rows + 64 * g, lda);
      _tile_loadd(7, b + 1024 * g, 64);
      _tile_zero(1);
      _tile_dpbsud(1, 5, 7);
      _tile_stored(1, c, 64);
    }
  };
  issue(0);
  for (int64_t g = 0; g < groups; ++g) {
    if (g + 1 < groups) issue(g + 1);
    const F ws = wscale.load<V>(g * np + col);
    const int32_t* c = dots[g % 2];
    MIXQ_UNROLL
    for (int r = 0; r < 16; ++r) {
      const int64_t row = m0 + r;
      const I dot = V::addi(V::loadi_a(c + 16 * r), V::bcast4(a.offset_terms.data() + row * groups + g));
      const F sc = V::mul(V::set1(a.scales[row * groups + g]), ws);
      out[r][0] = V::add(out[r][0], V::mul(V::cvt(dot), sc));
    }
  }
  finish<V, 16, 1>(pk, a, m0, p, out, y);
}
#endif


// Rows [m_begin, m_end) against CB panels from p, Tile::kRows rows at a
// time, then the remaining rows in one smaller block.
template <class V, int CB, class Tile = SvdquantTile<V>, bool Unpacked = false>
void rows(const SvdquantPacked& pk, const SvdquantActs& a, int64_t m_begin, int64_t m_end, int64_t p,
          int64_t prefetch, const UnpackedPanels& unpacked, float* y) {
  constexpr int R = Tile::kRows;
  static_assert(R <= 6, "the remainder cases below go up to 5 rows");
  int64_t m = m_begin;
  for (; m + R <= m_end; m += R) block<V, R, CB, Tile, Unpacked>(pk, a, m, p, prefetch, unpacked, y);
  switch (m_end - m) {
    case 5: if constexpr (R > 5) block<V, 5, CB, Tile, Unpacked>(pk, a, m, p, prefetch, unpacked, y); break;
    case 4: if constexpr (R > 4) block<V, 4, CB, Tile, Unpacked>(pk, a, m, p, prefetch, unpacked, y); break;
    case 3: if constexpr (R > 3) block<V, 3, CB, Tile, Unpacked>(pk, a, m, p, prefetch, unpacked, y); break;
    case 2: if constexpr (R > 2) block<V, 2, CB, Tile, Unpacked>(pk, a, m, p, prefetch, unpacked, y); break;
    case 1: block<V, 1, CB, Tile, Unpacked>(pk, a, m, p, prefetch, unpacked, y); break;
    default: break;
  }
}

// CB panels from p against rows [m_begin, m_end), unpacked first into this
// thread's buffer (UnpackedPanels).
template <class V, int CB, class Tile = SvdquantTile<V>>
void rows_unpacked(const SvdquantPacked& pk, const SvdquantActs& a, int64_t m_begin, int64_t m_end, int64_t p,
                   float* y) {
  constexpr int L = V::kLanes;
  constexpr int64_t kCols = CB * 16;
  const int64_t octets = pk.k / 8, groups = pk.k / svdq::kGroup, np = pk.panels * 16;
  const int64_t weight_bytes = CB * octets * 128, floats = (groups + pk.rank) * kCols;
  thread_local std::vector<uint8_t> buffer;
  uint8_t* b = aligned_scratch(buffer, static_cast<size_t>(weight_bytes + floats * 4));
  float* wscale = reinterpret_cast<float*>(b + weight_bytes);
  float* up_t = wscale + groups * kCols;
  for (int c = 0; c < CB; ++c)
    unpack_nibble_rows<V>(reinterpret_cast<const uint8_t*>(pk.weight.data() + (p + c) * octets * 16), octets,
                          b + c * octets * 128);
  const StoredView ws(pk.wscale), up(pk.proj_up_t);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t c = 0; c < kCols; c += L) V::store(wscale + g * kCols + c, ws.load<V>(g * np + p * 16 + c));
  for (int64_t j = 0; j < pk.rank; ++j)
    for (int64_t c = 0; c < kCols; c += L) V::store(up_t + j * kCols + c, up.load<V>(j * np + p * 16 + c));
  rows<V, CB, Tile, true>(pk, a, m_begin, m_end, p, 0, UnpackedPanels{b, wscale, up_t}, y);
}

// Panel groups outer, rows inner: a group of kPanels panels (kPanels·K/2
// bytes) is fetched once and reused from L1/L2 by every row of the range.
// (Rows outer re-read the whole weight from L3 for every few rows: 3x slower
// at M = 4096 on AVX-512.) prefetch 0 (large M) unpacks each group first
// where Tile::kUnpackLargeM, the range has kUnpackMinRows rows and K is at
// most kUnpackMaxK.
template <class V, class Tile = SvdquantTile<V>>
void run(const SvdquantPacked& pk, const SvdquantActs& a, int64_t m_begin, int64_t m_end, int64_t p_begin,
         int64_t p_end, int64_t prefetch, float* y) {
  constexpr int CB = Tile::kPanels;
  const bool unpack =
      Tile::kUnpackLargeM && prefetch == 0 && m_end - m_begin >= Tile::kUnpackMinRows && pk.k <= Tile::kUnpackMaxK;
  int64_t p = p_begin;
  for (; p + CB <= p_end; p += CB) {
    if (unpack) rows_unpacked<V, CB, Tile>(pk, a, m_begin, m_end, p, y);
    else rows<V, CB, Tile>(pk, a, m_begin, m_end, p, prefetch, {}, y);
  }
  for (; p < p_end; ++p) {
    if (unpack) rows_unpacked<V, 1, Tile>(pk, a, m_begin, m_end, p, y);
    else rows<V, 1, Tile>(pk, a, m_begin, m_end, p, prefetch, {}, y);
  }
}

// One row (M = 1) against panels [p_begin, p_end), streamed: kOneRowPanels
// at a time, then one.
template <class V, class Tile = SvdquantTile<V>>
void one_row(const SvdquantPacked& pk, const SvdquantActs& a, int64_t p_begin, int64_t p_end, float* y) {
  constexpr int CB = Tile::kOneRowPanels;
  int64_t p = p_begin;
  for (; p + CB <= p_end; p += CB) block<V, 1, CB, Tile>(pk, a, 0, p, kStreamPrefetchBytes, {}, y);
  if constexpr (CB > 1)
    for (; p < p_end; ++p) block<V, 1, 1, Tile>(pk, a, 0, p, kStreamPrefetchBytes, {}, y);
}

#if defined(MIXQ_SVDQUANT_AMX)
// Rows [m_begin, m_end) on AMX: panels outer (each unpacked once into this
// thread's buffer), 16-row tiles inner, the rows left over by block().
template <class V>
void run_amx(const SvdquantPacked& pk, const SvdquantActs& a, int64_t m_begin, int64_t m_end, float* y) {
  thread_local std::vector<uint8_t> buffer;
  uint8_t* b = aligned_scratch(buffer, static_cast<size_t>(pk.k * 16));
  const int64_t tiles_end = m_begin + (m_end - m_begin) / 16 * 16;
  for (int64_t p = 0; p < pk.panels; ++p) {
    unpack_nibble_rows<V>(reinterpret_cast<const uint8_t*>(pk.weight.data() + p * (pk.k / 8) * 16), pk.k / 8, b);
    for (int64_t m = m_begin; m < tiles_end; m += 16) block_amx<V>(pk, a, m, p, b, y);
    if (tiles_end < m_end) rows<V, 1>(pk, a, tiles_end, m_end, p, 0, {}, y);
  }
}
#endif

// The whole linear; always inlined into its one per-target entry point, so
// each target compiles it as one function. Tile: the register blocks
// (SvdquantTile; bench/isa/svdquant_tunings.*.cpp runs others).
template <class V, class Tile = SvdquantTile<V>>
__attribute__((always_inline)) inline void svdquant_forward(const SvdquantPacked& pk, const float* x, int64_t m,
                                                            float* y, bool amx = false) {
  // Kept by the calling thread between calls (grow-only): a fresh one per
  // call paid its page faults and zero fill every time (12 MB of codes at
  // M = 4096, K = 3072). The lambdas below run on pool threads, so they
  // must see the caller's instance through a plain reference.
  thread_local SvdquantActs kept;
  SvdquantActs& a = kept;
  a.size_for(pk, m);
  const int64_t k = pk.k, rank = pk.rank;
  util::PhaseScope prepare("smooth + quantize activations, low-rank down");
  const StoredView smooth(pk.smooth), proj_down = down_for_rows<V>(pk, m);
  util::parallel_for(m, 4, [&](int64_t begin, int64_t end, int) {
    // Four rows at a time through both steps, so that lora_down_rows reads
    // them from L1 / L2 rather than from memory a second time.
    std::vector<float> tmp(k);
    for (int64_t r0 = begin; r0 < end; r0 += 4) {
      const int64_t r1 = std::min(end, r0 + 4);
      for (int64_t r = r0; r < r1; ++r)
        quantize_act_row<V>(x + r * k, smooth, k, pk.act_unsigned, tmp.data(), a.q() + r * k,
                            a.scales.data() + r * a.groups, a.offset_terms.data() + r * a.groups);
      if (r1 - r0 == 4) lora_down_rows<V, 4>(x + r0 * k, k, proj_down, rank, pk.rank_pad, a.lora.data() + r0 * rank);
      else
        for (int64_t r = r0; r < r1; ++r)
          lora_down_rows<V, 1>(x + r * k, k, proj_down, rank, pk.rank_pad, a.lora.data() + r * rank);
    }
  });
  prepare.end();
  util::PhaseScope gemm("W4A4 GEMM + low-rank up + epilogue");
  if (m <= kSvdquantSmallM) {
    // Memory-bound: each thread streams its own panels once, in groups of
    // the block's panels.
    const int64_t group = m == 1 ? Tile::kOneRowPanels : Tile::kPanels;
    util::parallel_for((pk.panels + group - 1) / group, 1, [&](int64_t begin, int64_t end, int) {
      const int64_t p0 = begin * group, p1 = std::min(end * group, pk.panels);
      if (m == 1) one_row<V, Tile>(pk, a, p0, p1, y);
      else run<V, Tile>(pk, a, 0, m, p0, p1, kStreamPrefetchBytes, y);
    });
  } else if (amx) {
    if constexpr (V::kLanes == 16) {
      // Row chunks of at most kAmxRowChunk rows, as many per thread (their
      // codes stay in L2 while every panel, unpacked once per chunk, passes
      // over them; whole chunks left M = 17..256 on one thread).
      constexpr int64_t kAmxRowChunk = 256;
      util::parallel_for_row_blocks(m, kAmxRowChunk, 16,
                                    [&](int64_t r0, int64_t r1) { svdquant_amx_rows(pk, a, r0, r1, y); });
    }
  } else {
    // Chunks of at most kSvdquantRowChunk rows, as many per thread (with
    // whole chunks of 128 rows, M = 64 and 128 ran on one thread, as slowly as
    // M = 256 on two).
    util::parallel_for_row_blocks(m, kSvdquantRowChunk, Tile::kRows,
                                  [&](int64_t r0, int64_t r1) { run<V, Tile>(pk, a, r0, r1, 0, pk.panels, 0, y); });
  }
}

}  // namespace
}  // namespace mixq::kernels::x86
