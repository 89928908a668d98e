// codes_micro (codes_micro_impl.hpp) with a VBMI lookup: each 64-byte vector
// of 16 columns × 4 codes becomes the index code | 16·(column % 8), and two
// `vpermi2b` over 128-entry tables (columns 0-7, then 8-15; the 16 bytes of
// column c at 16·(c % 8)) plus one blend give the u8 operands, against 4
// `vpshufb` and 3 blends with ColumnTables. The same operands, so the same
// integer sums and bits. 1.06-1.16x at M = 1, 1.08-1.21x at M = 4
// (bench_int_tunings --format asym_w4a8_int8 --tuning vpshufb,
// BENCHMARKS.md).
#include "kernels/x86/codes_vbmi.hpp"

#include <immintrin.h>

#include "kernels/x86/codes_micro_impl.hpp"

namespace mixq::kernels::x86 {
namespace {

struct VbmiLookup {
  using I = __m512i;
  Avx512::F levels[1];
  alignas(64) int8_t scratch[kPanelCols][16];
  I pattern;  // 16·(c % 8) in every byte of dword c
  explicit VbmiLookup(const PackedIntWeights& w)
      : pattern(_mm512_setr_epi32(0, 0x10101010, 0x20202020, 0x30303030, 0x40404040, 0x50505050, 0x60606060,
                                  0x70707070, 0, 0x10101010, 0x20202020, 0x30303030, 0x40404040, 0x50505050,
                                  0x60606060, 0x70707070)) {
    levels[0] = Avx512::load(w.levels);
  }
  // t[j]: the tables of columns 4j .. 4j+3, one per 128-bit lane.
  __attribute__((always_inline)) void tables(const PackedIntWeights& w, int64_t pn, int64_t g, int v, I* t) {
    group_table_registers<Avx512, true>(w, pn, g, v, levels, scratch, t);
  }
  __attribute__((always_inline)) I operands(const I* t, I codes, bool high) const {
    // (codes & 0x0F) | pattern in one ternary-logic op (0xEA: A & B | C).
    const I idx = _mm512_ternarylogic_epi32(high ? _mm512_srli_epi16(codes, 4) : codes, _mm512_set1_epi8(0x0F),
                                            pattern, 0xEA);
    return _mm512_mask_blend_epi32(0xFF00, _mm512_permutex2var_epi8(t[0], idx, t[1]),
                                   _mm512_permutex2var_epi8(t[2], idx, t[3]));
  }
};

}  // namespace

void codes_micro_avx512vbmi(const PackedIntWeights& w, const int8_t* a, const int64_t* panel, int rows,
                            int64_t ahead, int32_t* out) {
  codes_micro_rows<Avx512, VbmiLookup, 4>(w, a, panel, rows, ahead, out);
}

}  // namespace mixq::kernels::x86
