#pragma once
// What the two AVX-512 VBMI kernels that run FP8 weights (E4M3, E5M2,
// MXFP8) at a few activation rows share: fp8_rows_in_place.avx512vbmi.cpp
// (rows read in place, transposed in registers) and
// fp8_panels_vbmi.avx512vbmi.cpp (packed panels). Include only from
// translation units built with VBMI.
//
// Decoding by table lookups: two 128-entry byte tables give the high and the
// low byte of each code's bf16 image, then one two-table `vpermt2b` a k puts
// 16 columns' two bytes at the top of 16 dwords (the rest zeroed): the f32
// that the FMA core's f16 widening gives (exact in bf16).
//
// E4M3 (and MXFP8) decode to e4m3(code)·2^-8 (float_gemm.hpp: the 2^8 is in
// alpha), never an f32 subnormal (2^-17 at the least; a subnormal FMA operand
// costs a microcode assist, ~80 ns on the AMX VM, so a shift-only decode to
// 2^-120 scale does not pay); E4M3 NaN codes (0x7F, 0xFF) look up a low byte
// no other code has (a set low nibble), which a kernel that reads codes it
// has not seen collects by OR (packed panels carry their NaN columns). E5M2
// decodes to its value (2^-16 at the least), infinities and NaNs as the f16
// conversion gives them. Then the dispatch over row groups and code types.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "kernels/x86/float_gemm.hpp"
#include "mixq/error.hpp"

namespace mixq::kernels::x86 {
namespace {

#pragma GCC diagnostic push  // g++ 12 warns inside its own zmm intrinsics
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// bf16 bits of e4m3(c)·2^-8 for the magnitudes c = 0 .. 127. The low byte
// of every one has a zero low nibble (3 mantissa bits); the NaN code 0x7F
// gets 0x000F.
constexpr uint16_t bf16_of_scaled_e4m3(int c) {
  const int e = c >> 3, m = c & 7;
  if (c == 0x7F) return 0x000F;
  if (c == 0) return 0;
  if (e > 0) return static_cast<uint16_t>((e + 112) << 7 | m << 4);  // 2^(e-7-8)·(1 + m/8)
  const int top = m >= 4 ? 2 : m >= 2 ? 1 : 0;  // subnormal m·2^-17: normalised at its top bit
  return static_cast<uint16_t>((110 + top) << 7 | ((m << (7 - top)) & 0x7F));
}
// bf16 bits of e5m2(c) for the magnitudes c = 0 .. 127: the top half of the
// f32 that vcvtph2ps gives for the f16 c << 8 (FloatIo::fp8), the NaNs
// quieted (0x7D: 0x7FE0, 0x7E: 0x7FC0, 0x7F: 0x7FE0).
constexpr uint16_t bf16_of_e5m2(int c) {
  const int e = c >> 2, m = c & 3;
  if (e == 31) return static_cast<uint16_t>(0x7F80 | (m ? 0x40 | m << 5 : 0));
  if (c == 0) return 0;
  if (e > 0) return static_cast<uint16_t>((e + 112) << 7 | m << 5);  // 2^(e-15)·(1 + m/4)
  return m == 1 ? 111 << 7 : static_cast<uint16_t>(112 << 7 | (m & 1) << 6);  // subnormal m·2^-16
}
struct Bf16Tables {
  alignas(64) std::array<uint8_t, 128> high{}, low{};
};
template <class Bf16Of>
constexpr Bf16Tables make_tables(Bf16Of bf16_of) {
  Bf16Tables t;
  for (int c = 0; c < 128; ++c) {
    t.high[c] = static_cast<uint8_t>(bf16_of(c) >> 8);
    t.low[c] = static_cast<uint8_t>(bf16_of(c));
  }
  return t;
}
constexpr Bf16Tables kE4m3Tables = make_tables(bf16_of_scaled_e4m3);
constexpr Bf16Tables kE5m2Tables = make_tables(bf16_of_e5m2);

// What a panel type's codes need: its tables, whether a NaN code must be
// found (E4M3's decode to a finite marker), whether the MXFP8 block scales
// multiply in.
struct E4m3Codes {
  static constexpr const Bf16Tables& kTables = kE4m3Tables;
  static constexpr bool kNanMarker = true, kBlockScaled = false;
};
struct Mxfp8Codes {
  static constexpr const Bf16Tables& kTables = kE4m3Tables;
  static constexpr bool kNanMarker = true, kBlockScaled = true;
};
struct E5m2Codes {
  static constexpr const Bf16Tables& kTables = kE5m2Tables;
  static constexpr bool kNanMarker = false, kBlockScaled = false;
};

// The high bytes (sign | table) and the low bytes of the bf16 images of the
// 64 codes in x.
template <class Codes>
inline void bf16_bytes(__m512i x, __m512i& hi, __m512i& lo) {
  const Bf16Tables& t = Codes::kTables;
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
  hi = _mm512_ternarylogic_epi32(
      _mm512_permutex2var_epi8(_mm512_load_si512(t.high.data()), x, _mm512_load_si512(t.high.data() + 64)), x, sign,
      0xF8);
  lo = _mm512_permutex2var_epi8(_mm512_load_si512(t.low.data()), x, _mm512_load_si512(t.low.data() + 64));
}

// vpermt2b indices for the 4 k of a register of 64 codes: index[u] puts the
// code at byte byte_of(u, d) into dword d, its high byte (first source) at
// byte 3 and its low byte (second source, +64) at byte 2; bytes 0, 1 are
// zeroed by the mask kTopHalves.
struct PlaceIndices {
  alignas(64) uint8_t idx[4][64] = {};
};
template <class ByteOf>
constexpr PlaceIndices make_place_indices(ByteOf byte_of) {
  PlaceIndices p;
  for (int u = 0; u < 4; ++u)
    for (int d = 0; d < 16; ++d) {
      p.idx[u][4 * d + 3] = static_cast<uint8_t>(byte_of(u, d));
      p.idx[u][4 * d + 2] = static_cast<uint8_t>(64 + byte_of(u, d));
    }
  return p;
}
constexpr __mmask64 kTopHalves = 0xCCCCCCCCCCCCCCCCull;
// The f32 values of step u (index[u]) of the bytes hi / lo.
inline __m512 placed(__m512i hi, __m512i lo, const uint8_t* index) {
  return _mm512_castsi512_ps(_mm512_maskz_permutex2var_epi8(kTopHalves, hi, _mm512_load_si512(index), lo));
}

// The call's rows in groups of up to 4 (each group decoding the codes
// again), each run as run.template operator()<R, Codes>(call) with Codes the
// weight's code type; Call::rows_from(m0) is the call for the rows from m0.
template <class Call, class Run>
void run_row_groups(const Call& first, PanelType type, int64_t m, Run&& run) {
  auto groups = [&]<class Codes>() {
    for (int64_t m0 = 0; m0 < m; m0 += 4) {
      const Call c = first.rows_from(m0);
      switch (std::min<int64_t>(4, m - m0)) {
        case 1: run.template operator()<1, Codes>(c); break;
        case 2: run.template operator()<2, Codes>(c); break;
        case 3: run.template operator()<3, Codes>(c); break;
        default: run.template operator()<4, Codes>(c); break;
      }
    }
  };
  switch (type) {
    case PanelType::e4m3: groups.template operator()<E4m3Codes>(); break;
    case PanelType::mxfp8: groups.template operator()<Mxfp8Codes>(); break;
    case PanelType::e5m2: groups.template operator()<E5m2Codes>(); break;
    default: fail("fp8 few rows: E4M3, E5M2 or MXFP8 codes only");
  }
}

#pragma GCC diagnostic pop

}  // namespace
}  // namespace mixq::kernels::x86
