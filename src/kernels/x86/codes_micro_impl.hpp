#pragma once
// Few tokens on 4-bit codes (IntCodes, asym_w4a8_int8) in the step layout
// (int_pack.hpp; the AVX-512 targets, and AVX2 where the k-block layout of
// codes_blocks_impl.hpp does not apply): the int8 micro-kernel's sums with
// every code looked up in registers, so no decoded tile is written and read
// back (int_gemm_impl.hpp, run_tile). Include only from int_gemm_impl.hpp
// (the per-target translation units' anonymous namespace).
//
// Per group, panel and column vector (16 / kLanes of them) the columns'
// tables are built once (group_table_registers: the u8 operand w8 + 128 of
// each code), then that vector of each 64-byte code step (8 k: low nibbles
// k0..k0+3, high nibbles k0+4..k0+7, int_pack.hpp) is looked up and
// multiplied by the tokens' activation bytes: the very u8 / s8 operands the
// micro-kernel reads from decode_panel's tile. Integer sums are exact, so
// summing group by group, panel after panel, gives the same integers and
// the same bits after the epilogue.
//
// Why: with the tile, an M = 1 call wrote and re-read two bytes for every
// byte of codes and walked the P panels one after another; in registers the
// P panels are P memory streams: M = 1 runs 1.3-1.6x faster, M = 2-6
// 1.07-1.26x. From 7 tokens each 6-token panel would look every code up
// again, and the tile, decoded once, is faster (bench_int_tunings --format
// asym_w4a8_int8, BENCHMARKS.md). Groups must be whole code steps
// (group_size % 8 == 0; 16 is the format's default); group_size 4 keeps the
// tile.
#include <immintrin.h>

#include <cstdint>

#include "kernels/x86/int_micro_impl.hpp"
#include "kernels/x86/int_pack.hpp"
#include "kernels/x86/int_weight_panels.hpp"
#include "kernels/x86/simd_traits.hpp"

namespace mixq::kernels::x86 {
namespace {

inline bool codes_in_registers(const PackedIntWeights& w) { return w.codes && w.group_size % 8 == 0; }

// How codes_micro turns a (panel, group)'s codes into u8 operands, on any
// target: ColumnTables' 16-entry tables, 4 `vpshufb` and 3 blends per
// vector of 16 columns (codes_vbmi.avx512vbmi.cpp has a VBMI one).
template <class V>
struct ShuffleLookup {
  using I = typename V::I;
  static constexpr int H = 16 / V::kLanes;
  typename V::F levels[H];
  alignas(64) int8_t scratch[kPanelCols][16];
  explicit ShuffleLookup(const PackedIntWeights& w) {
    for (int h = 0; h < H; ++h) levels[h] = V::load(w.levels + h * V::kLanes);
  }
  // The tables tv[4] of column vector v (16 / kLanes per panel) for group g.
  __attribute__((always_inline)) void tables(const PackedIntWeights& w, int64_t pn, int64_t g, int v, I* tv) {
    group_table_registers<V>(w, pn, g, v, levels, scratch, tv);
  }
  // The operands of the column vector whose tables are tv for the codes in
  // the low nibbles of `codes` (the high nibbles with `high`).
  __attribute__((always_inline)) I operands(const I* tv, I codes, bool high) const {
    const I low4 = V::set1b(0x0F);
    return ColumnTables<V::kLanes>::lookup(tv, V::andi(high ? V::template srli16<4>(codes) : codes, low4));
  }
};

// MR tokens of one activation panel (a: int_pack.hpp's layout, kMr slots
// per 4-byte step) against the P code panels `panel`, all of K; each
// panel's codes fetched `ahead` bytes ahead (0: none). Results to
// out[r][P·16] (int32, with the weight bias where BiasedInt8 keeps it), as
// micro() writes them.
template <class V, class Lookup, int P, int MR>
void codes_micro(const PackedIntWeights& w, const int8_t* a, const int64_t* panel, int64_t ahead, int32_t* out) {
  using I = typename V::I;
  constexpr int L = V::kLanes, H = 16 / L;
  Lookup lookup(w);
  const uint8_t* src[P];
  for (int p = 0; p < P; ++p) src[p] = w.panel(panel[p]);
  I c[MR][P * H];
  MIXQ_UNROLL
  for (int r = 0; r < MR; ++r)
    MIXQ_UNROLL
    for (int v = 0; v < P * H; ++v) c[r][v] = V::zeroi();
  const int64_t group_steps = w.group_size / 8;
  for (int64_t g = 0; g < w.groups; ++g) {
    MIXQ_UNROLL
    for (int p = 0; p < P; ++p) {
      // One column vector at a time: its 4 tables and its MR accumulators
      // are all the registers the code steps keep. AVX2 (2 vectors): with
      // both vectors' tables at once the accumulators and tables spilled,
      // and M = 1 ran 1.15-1.2x slower on Zen 2 (BENCHMARKS.md).
      MIXQ_UNROLL
      for (int v = 0; v < H; ++v) {
        // A local, not a member of `lookup` (which the out-of-line f32
        // table builder sees through `scratch`): g++ then keeps the tables
        // in registers only, where it stored them to `lookup` once per group.
        I tv[4];
        lookup.tables(w, panel[p], g, v, tv);
        for (int64_t k8 = g * group_steps; k8 < (g + 1) * group_steps; ++k8) {
          const uint8_t* step = src[p] + k8 * 64;
          if (ahead > 0 && v == 0) _mm_prefetch(reinterpret_cast<const char*>(step + ahead), _MM_HINT_T0);
          const I codes = V::loadi_a(step + 4 * L * v);
          const BiasedInt8<V> lo = BiasedInt8<V>::of(lookup.operands(tv, codes, false));
          const BiasedInt8<V> hi = BiasedInt8<V>::of(lookup.operands(tv, codes, true));
          const int8_t* a_lo = a + 2 * k8 * kMr * 4;  // int8 steps 2·k8 (low nibbles) and 2·k8 + 1
          const int8_t* a_hi = a_lo + kMr * 4;
          MIXQ_UNROLL
          for (int r = 0; r < MR; ++r) {
            const I x_lo = V::bcast4(a_lo + 4 * r), x_hi = V::bcast4(a_hi + 4 * r);
            c[r][p * H + v] = lo.dot(c[r][p * H + v], x_lo);
            c[r][p * H + v] = hi.dot(c[r][p * H + v], x_hi);
          }
        }
      }
    }
  }
  MIXQ_UNROLL
  for (int r = 0; r < MR; ++r)
    MIXQ_UNROLL
    for (int v = 0; v < P * H; ++v) V::storei_a(out + r * P * 16 + v * L, c[r][v]);
}

// codes_micro for 1 .. kMr tokens.
template <class V, class Lookup, int P>
void codes_micro_rows(const PackedIntWeights& w, const int8_t* a, const int64_t* panel, int rows, int64_t ahead,
                      int32_t* out) {
  switch (rows) {
    case 1: return codes_micro<V, Lookup, P, 1>(w, a, panel, ahead, out);
    case 2: return codes_micro<V, Lookup, P, 2>(w, a, panel, ahead, out);
    case 3: return codes_micro<V, Lookup, P, 3>(w, a, panel, ahead, out);
    case 4: return codes_micro<V, Lookup, P, 4>(w, a, panel, ahead, out);
    case 5: return codes_micro<V, Lookup, P, 5>(w, a, panel, ahead, out);
    default: return codes_micro<V, Lookup, P, 6>(w, a, panel, ahead, out);
  }
}

}  // namespace
}  // namespace mixq::kernels::x86
