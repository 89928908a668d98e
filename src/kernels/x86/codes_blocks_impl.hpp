#pragma once
// 4-bit codes (IntCodes, asym_w4a8_int8) in the "codes in k blocks" layout
// (int_pack.hpp), on the AVX2 targets (8 int32 lanes): the few-token kernel
// that looks them up in registers, and the decode of a panel into the int8
// panel layout for the tile path. Include only from int_gemm_impl.hpp (the
// per-target translation units' anonymous namespace).
//
// Why a layout of its own: in the step layout a 128-bit lane holds 4 bytes
// of 4 columns, each with its own 16-entry table, so a vector of 64 codes
// took 8 `vpshufb` and 6 blends, and an M = 1 call was bound by them on Zen 2
// (BENCHMARKS.md). Here a lane holds 32 codes of one column: the 16 k of its
// low nibbles lie in one group, as do the 16 of its high nibbles, so the 64
// codes of a vector take 2 `vpshufb` on 2 tables of 2 columns each. Each
// column's int32 partial sums (4 a lane) are added across once per block
// (two rounds of `vphaddd` over a column vector's 4 pairs), giving the 8
// columns in order. Integer sums are exact, so the results are those of the
// step layout, the tile and the reference, bit for bit.
#include <immintrin.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/x86/int_micro_impl.hpp"
#include "kernels/x86/int_pack.hpp"
#include "kernels/x86/int_weight_panels.hpp"
#include "kernels/x86/simd_traits.hpp"

namespace mixq::kernels::x86 {
namespace {

// How a group's tables are found: E4M3 s_rel bytes pick rows of code_lut
// (e4m3_doubled: the bytes stored times 2, PackedIntWeights::s_rel_doubled,
// so that the offset 8 · byte is an addressing mode, no shift; with the
// panel's s_rel row taken once per column stream, 149 -> 136 instructions
// per column vector and block at M = 1); f32 s_rel takes group_tables'
// products.
enum class SRel { f32, e4m3, e4m3_doubled };

// The s_rel source of one column vector (columns 8v .. 8v + 7) of panel pn.
template <class V>
struct VectorSRel {
  const PackedIntWeights& w;
  int64_t pn;
  int v;
  const typename V::F* levels;
  const uint8_t* bytes;  // E4M3: group g's 8 bytes at bytes + 16 g
  VectorSRel(const PackedIntWeights& w_, int64_t pn_, int v_, const typename V::F* levels_)
      : w(w_), pn(pn_), v(v_), levels(levels_),
        bytes(w_.s_rel_e4m3.empty() ? nullptr : w_.s_rel_e4m3.data() + pn_ * w_.groups * kPanelCols + 8 * v_) {}
};

// The tables of one column vector for group g, pair by pair. E4M3: each
// address computed where it is used (through an array of pointers, as the
// f32 tables go, g++ kept the pointers in memory: objdump of the first
// build); f32: group_tables' products in `scratch`.
template <class V, SRel S>
class VectorTables {
 public:
  VectorTables(const VectorSRel<V>& src, int64_t g, int8_t (*scratch)[16]) {
    if constexpr (S != SRel::f32) {
      row_ = src.bytes + g * kPanelCols;
      lut_ = src.w.code_lut.data();
    } else {
      const int8_t* tab[kPanelCols];
      group_tables<V>(src.w, src.pn, g, src.v, src.levels, scratch, tab);
      for (int c = 0; c < 8; ++c) col_[c] = tab[8 * src.v + c];
    }
  }
  // Pair j's table register: column j in the low lane, column j + 4 in the high one.
  __attribute__((always_inline)) __m256i pair(int j) const {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(table(j)), table(j + 4), 1);
  }

 private:
  __attribute__((always_inline)) __m128i table(int c) const {
    const int8_t* t;
    if constexpr (S == SRel::e4m3) t = lut_ + 16 * static_cast<size_t>(row_[c]);
    else if constexpr (S == SRel::e4m3_doubled) t = lut_ + 8 * static_cast<size_t>(row_[c]);
    else t = col_[c];
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(t));
  }
  const uint8_t* row_ = nullptr;
  const int8_t* lut_ = nullptr;
  const int8_t* col_[8] = {};
};

// f.template operator()<S>() with the SRel of w.
template <class F>
__attribute__((always_inline)) inline void with_s_rel(const PackedIntWeights& w, F&& f) {
  if (w.s_rel_e4m3.empty()) f.template operator()<SRel::f32>();
  else if (w.s_rel_doubled) f.template operator()<SRel::e4m3_doubled>();
  else f.template operator()<SRel::e4m3>();
}

// The groups of successive 16-k halves of K (16 divides the group size),
// counted without a division per block (two `idiv`s a block were half the
// cycles of the first build's M = 1 loop, by llvm-mca -mcpu=znver2).
class GroupOfHalves {
 public:
  explicit GroupOfHalves(int64_t group_size) : per_group_(group_size / 16), left_(per_group_) {}
  int64_t next() {
    const int64_t g = g_;
    if (--left_ == 0) {
      ++g_;
      left_ = per_group_;
    }
    return g;
  }

 private:
  int64_t per_group_, left_, g_ = 0;
};

// The u8 operands (w8 + 128) of pair j's 64 codes at `codes`: lo = k 0..15
// of the block, hi = k 16..31, each with the column in the low lane and its
// partner (+4) in the high lane.
__attribute__((always_inline)) inline void lookup_pair(const uint8_t* codes, __m256i t_lo, __m256i t_hi, __m256i& lo,
                                                       __m256i& hi) {
  const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(codes));
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  lo = _mm256_shuffle_epi8(t_lo, _mm256_and_si256(raw, low4));
  hi = _mm256_shuffle_epi8(t_hi, _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4));
}

// f(integral_constant<int, i>) for i = 0 .. N-1, unrolled at compile time
// (so that arrays indexed by i stay in registers).
template <int N, class F>
__attribute__((always_inline)) inline void unrolled(F&& f) {
  [&]<int... i>(std::integer_sequence<int, i...>) { (f(std::integral_constant<int, i>{}), ...); }
  (std::make_integer_sequence<int, N>{});
}

// Walks column stream v (columns 8v .. 8v + 7) of panel pn block by block:
// f(b, codes, t_lo, t_hi) with the block's 128 code bytes and the tables
// of its low and high 16 k, each block fetched `ahead` bytes ahead (0:
// none). The one walk of the kernel and the decode below.
template <class V, SRel S, class F>
__attribute__((always_inline)) inline void each_block(const PackedIntWeights& w, int64_t pn, int v, int64_t ahead,
                                                      F&& f) {
  using Tables = VectorTables<V, S>;
  typename V::F levels[2];
  for (int h = 0; h < 2; ++h) levels[h] = V::load(w.levels + 8 * h);
  alignas(64) int8_t scratch[2][kPanelCols][16];  // f32 s_rel: the low and high halves' tables
  const VectorSRel<V> src(w, pn, v, levels);
  const uint8_t* codes = w.panel(pn) + v * w.kp * 4;
  GroupOfHalves groups(w.group_size);
  for (int64_t b = 0; b < w.kp / 32; ++b, codes += 128) {
    const int64_t g_lo = groups.next(), g_hi = groups.next();
    if (ahead > 0) {
      _mm_prefetch(reinterpret_cast<const char*>(codes + ahead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(codes + ahead + 64), _MM_HINT_T0);
    }
    const Tables t_lo(src, g_lo, scratch[0]);
    const Tables t_hi = g_hi == g_lo ? t_lo : Tables(src, g_hi, scratch[1]);
    f(b, codes, t_lo, t_hi);
  }
}

// MR tokens (int8 rows of `stride` bytes from a, in k order) against the P
// code panels `panel`, all of K, one column stream (8 columns) after the
// other, each fetched `ahead` bytes ahead (0: none). Results to
// out[r][P·16] as micro() writes them (with the weight bias where
// BiasedInt8 keeps it); S: how the tables are found (VectorTables).
template <class V, int P, int MR, SRel S>
void codes_blocks_micro(const PackedIntWeights& w, const int8_t* a, int64_t stride, const int64_t* panel,
                        int64_t ahead, int32_t* out) {
  static_assert(V::kLanes == 8, "the k-block layout is the AVX2 targets'");
  using I = __m256i;
  for (int p = 0; p < P; ++p)
    for (int v = 0; v < 2; ++v) {
      I c[MR];
      unrolled<MR>([&](auto r) { c[r] = V::zeroi(); });
      each_block<V, S>(w, panel[p], v, ahead, [&](int64_t b, const uint8_t* codes, const auto& t_lo, const auto& t_hi) {
        // Per token, pairs 0 and 1 added across (vphaddd works in lanes:
        // [pair 0, pair 0, pair 1, pair 1 | their +4 columns]), pair 2's
        // sums, then all 4 pairs: the 8 columns in order.
        I h01[MR], d2[MR];
        unrolled<4>([&](auto j) {
          I lo, hi;
          lookup_pair(codes + 32 * j, t_lo.pair(j), t_hi.pair(j), lo, hi);
          const BiasedInt8<V> wl = BiasedInt8<V>::of(lo), wh = BiasedInt8<V>::of(hi);
          unrolled<MR>([&](auto r) {
            const int8_t* x = a + r * stride + 32 * b;
            const I x_lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
            const I x_hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 16)));
            const I d = wh.dot(wl.dot(V::zeroi(), x_lo), x_hi);
            if constexpr (j == 0) h01[r] = d;
            else if constexpr (j == 1) h01[r] = _mm256_hadd_epi32(h01[r], d);
            else if constexpr (j == 2) d2[r] = d;
            else c[r] = _mm256_add_epi32(c[r], _mm256_hadd_epi32(h01[r], _mm256_hadd_epi32(d2[r], d)));
          });
        });
      });
      unrolled<MR>([&](auto r) { V::storei_a(out + r * P * 16 + p * 16 + v * 8, c[r]); });
    }
}

// codes_blocks_micro for 1 .. kMr tokens.
template <class V, int P>
void codes_blocks_micro_rows(const PackedIntWeights& w, const int8_t* a, int64_t stride, const int64_t* panel,
                             int rows, int64_t ahead, int32_t* out) {
  with_s_rel(w, [&]<SRel S>() {
    switch (rows) {
      case 1: return codes_blocks_micro<V, P, 1, S>(w, a, stride, panel, ahead, out);
      case 2: return codes_blocks_micro<V, P, 2, S>(w, a, stride, panel, ahead, out);
      case 3: return codes_blocks_micro<V, P, 3, S>(w, a, stride, panel, ahead, out);
      case 4: return codes_blocks_micro<V, P, 4, S>(w, a, stride, panel, ahead, out);
      case 5: return codes_blocks_micro<V, P, 5, S>(w, a, stride, panel, ahead, out);
      default: return codes_blocks_micro<V, P, 6, S>(w, a, stride, panel, ahead, out);
    }
  });
}

// decode_panel for the k-block layout: panel `pn` into the int8 panel
// layout (u8 = w8 + 128) at `out`, column stream by column stream.
template <class V, SRel S>
void decode_blocks_panel(const PackedIntWeights& w, int64_t pn, uint8_t* out, int64_t ahead) {
  static_assert(V::kLanes == 8, "the k-block layout is the AVX2 targets'");
  for (int v = 0; v < 2; ++v)
    each_block<V, S>(w, pn, v, ahead, [&](int64_t b, const uint8_t* codes, const auto& t_lo, const auto& t_hi) {
      // Pair j's lookups hold columns j (low lane) and j + 4 (high lane),
      // 4 k per dword: transposed within the lanes, vector s holds step s
      // (k 4s .. 4s + 3) of columns 0..3 and 4..7, as the int8 layout wants.
      __m256i lo[4], hi[4];
      for (int j = 0; j < 4; ++j) lookup_pair(codes + 32 * j, t_lo.pair(j), t_hi.pair(j), lo[j], hi[j]);
      transpose_dwords_4x4_lanes(lo);
      transpose_dwords_4x4_lanes(hi);
      for (int st = 0; st < 4; ++st) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(out + (8 * b + st) * 64 + 32 * v), lo[st]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(out + (8 * b + 4 + st) * 64 + 32 * v), hi[st]);
      }
    });
}

template <class V>
void decode_blocks_panel(const PackedIntWeights& w, int64_t pn, uint8_t* out, int64_t prefetch_bytes = 0) {
  with_s_rel(w, [&]<SRel S>() { decode_blocks_panel<V, S>(w, pn, out, prefetch_bytes); });
}

}  // namespace
}  // namespace mixq::kernels::x86
