#pragma once
// The integer GEMM's weight panels made just before use (int_gemm_impl.hpp;
// layouts: int_pack.hpp): 4-bit codes decoded to the int8 panel layout
// through per-(column, group) tables, and in-place rows transposed into the
// int8 / int4 panel layouts. Include only from int_gemm_impl.hpp (the
// per-target translation units' anonymous namespace, simd_traits.hpp).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/x86/int_pack.hpp"
#include "kernels/x86/nibble_quads.hpp"
#include "kernels/x86/simd_traits.hpp"

namespace mixq::kernels::x86 {
namespace {

// The 16-entry tables of column vector v (columns v·kLanes .. v·kLanes +
// kLanes - 1) of panel `pn` for group g into tab[c], each entry the u8 operand w8 + 128 (int_pack.hpp):
// E4M3 s_rel reads the precomputed table of its byte; f32 s_rel computes
// w8 = clamp(rint(level · s_rel), -127, 127) into `scratch` (one fp32 product
// per entry; clamping before the rounding gives the same integers, as ±127
// are integers), then flips the sign bit (w8 ^ 0x80 = w8 + 128 as a byte).
template <class V>
void group_tables(const PackedIntWeights& w, int64_t pn, int64_t g, int v, const typename V::F* levels,
                  int8_t (*scratch)[16], const int8_t** tab) {
  using I = typename V::I;
  constexpr int L = V::kLanes;
  const int64_t at = (pn * w.groups + g) * kPanelCols;
  const int c0 = v * L;
  if (!w.s_rel_e4m3.empty()) {
    for (int c = c0; c < c0 + L; ++c)
      tab[c] = w.code_lut.data() + 16 * w.s_rel_e4m3[static_cast<size_t>(at + c)];
    return;
  }
  const typename V::F lo = V::set1(-127.0f), hi = V::set1(127.0f);
  for (int c = c0; c < c0 + L; ++c) {
    const typename V::F s = V::set1(w.s_rel_f32[static_cast<size_t>(at + c)]);
    I q[2];
    for (int h = 0; h < 16 / L; ++h) q[h] = V::cvtr(V::min(V::max(V::mul(levels[h], s), lo), hi));
    V::store_i8x16(scratch[c], q);
    uint64_t half[2];
    std::memcpy(half, scratch[c], 16);
    half[0] ^= 0x8080808080808080ull;
    half[1] ^= 0x8080808080808080ull;
    std::memcpy(scratch[c], half, 16);
    tab[c] = scratch[c];
  }
}

// The tables of panel `pn`'s columns v·kLanes .. v·kLanes + kLanes - 1 (the
// column vector v of a code step) for group g as ColumnTables registers
// tv[4]: E4M3 s_rel straight from code_lut by the scale bytes
// (ColumnTables::load_rows; building them through a pointer array made an
// M = 1 call 1.2-1.3x slower, BENCHMARKS.md), f32 s_rel through
// group_tables' products (`scratch`: the caller's, so that this inlines into
// the code loops with no stack realignment). Inlined: called out of line,
// tv went through memory (M = 1 1.4x slower). kColumnsInOrder:
// ColumnTables<16>'s other lane order (the VBMI lookup's).
template <class V, bool kColumnsInOrder = false>
__attribute__((always_inline)) inline void group_table_registers(const PackedIntWeights& w, int64_t pn, int64_t g,
                                                                 int v, const typename V::F* levels,
                                                                 int8_t (*scratch)[16], typename V::I* tv) {
  using T = ColumnTables<V::kLanes>;
  constexpr int L = V::kLanes;
  if (!w.s_rel_e4m3.empty()) {
    const uint8_t* row = w.s_rel_e4m3.data() + (pn * w.groups + g) * kPanelCols + v * L;
    if constexpr (kColumnsInOrder) T::template load_rows<true>(w.code_lut.data(), row, tv);
    else T::load_rows(w.code_lut.data(), row, tv);
    return;
  }
  const int8_t* tab[kPanelCols];
  group_tables<V>(w, pn, g, v, levels, scratch, tab);
  MIXQ_UNROLL
  for (int j = 0; j < 4; ++j) {
    if constexpr (kColumnsInOrder) tv[j] = T::template load<true>(tab + v * L, j);
    else tv[j] = T::load(tab + v * L, j);
  }
}

// Decodes panel `pn` of codes (int_pack.hpp) into the int8 panel layout
// (u8 = w8 + 128, straight from the tables) at `out` (kp · 16 bytes, 64-byte aligned). A 64-byte code
// step (8 k's) gives two int8 steps: its low nibbles (k 8k8 .. 8k8+3) and its
// high nibbles (8k8+4 .. 8k8+7); a group is a multiple of 4 k's, so each half
// lies in one group. prefetch_bytes > 0 (weights from DRAM: small M) fetches
// the codes that far ahead (one panel is one memory stream): 1-5 % faster at
// M = 1 (bench_int_tunings --format asym_w4a8_int8). The decode is bound by
// building the tables of every (column, group); up to IntTile's
// kCodesInRegistersRows tokens codes_micro (codes_micro_impl.hpp) looks the
// codes up without this tile.
template <class V>
void decode_panel(const PackedIntWeights& w, int64_t pn, uint8_t* out, int64_t prefetch_bytes = 0) {
  using I = typename V::I;
  using T = ColumnTables<V::kLanes>;
  constexpr int L = V::kLanes, H = 16 / L;
  const uint8_t* src = w.panel(pn);
  typename V::F levels[16 / L];
  for (int h = 0; h < 16 / L; ++h) levels[h] = V::load(w.levels + h * L);
  alignas(64) int8_t scratch[kPanelCols][16];
  I tv[H][4];
  const I mask = V::set1b(0x0F);
  int64_t g = -1, next = 0;  // the current group and its end
  auto tables = [&](int64_t k0) {  // k0 grows by 4 per call
    if (k0 < next) return;
    ++g;
    next += w.group_size;
    MIXQ_UNROLL
    for (int v = 0; v < H; ++v) group_table_registers<V>(w, pn, g, v, levels, scratch, tv[v]);
  };
  for (int64_t k8 = 0; k8 < w.kp / 8; ++k8) {
    if (prefetch_bytes > 0) _mm_prefetch(reinterpret_cast<const char*>(src + k8 * 64 + prefetch_bytes), _MM_HINT_T0);
    I c[H];
    MIXQ_UNROLL
    for (int v = 0; v < H; ++v) c[v] = V::loadi_a(src + k8 * 64 + 4 * L * v);
    tables(8 * k8);
    MIXQ_UNROLL
    for (int v = 0; v < H; ++v)
      V::storei_a(out + 2 * k8 * 64 + 4 * L * v, T::lookup(tv[v], V::andi(c[v], mask)));
    tables(8 * k8 + 4);
    MIXQ_UNROLL
    for (int v = 0; v < H; ++v)
      V::storei_a(out + (2 * k8 + 1) * 64 + 4 * L * v, T::lookup(tv[v], V::andi(V::template srli16<4>(c[v]), mask)));
  }
}

// Four stored row words (4 bytes of one row each) as the panel's words
// (int_pack.hpp): int8 bytes + 128; int4 the 8 nibbles of a word regrouped
// (regroup_nibble_quad: low nibbles k0..k0+3, high k0+4..k0+7) and + 8.
template <bool Int4>
inline __m128i panel_words(__m128i v) {
  if constexpr (!Int4) {
    return _mm_xor_si128(v, _mm_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m128i m = _mm_set1_epi8(0x0F);
    const __m128i f = _mm_and_si128(v, m), s = _mm_and_si128(_mm_srli_epi16(v, 4), m);
    // Per word: a = F0 | F2<<4 (byte 0), F1 | F3<<4 (byte 1); b the same of S.
    const __m128i a = _mm_or_si128(f, _mm_slli_epi32(_mm_srli_epi32(f, 16), 4));
    const __m128i b = _mm_or_si128(s, _mm_slli_epi32(_mm_srli_epi32(s, 16), 4));
    const __m128i ab = _mm_or_si128(_mm_and_si128(a, _mm_set1_epi32(0xFFFF)), _mm_slli_epi32(b, 16));
    const __m128i order = _mm_setr_epi8(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15);
    return _mm_xor_si128(_mm_shuffle_epi8(ab, order), _mm_set1_epi8(static_cast<char>(0x88)));
  }
}

#if defined(__AVX512F__)
#pragma GCC diagnostic push  // g++ 12 warns inside its own zmm intrinsics (simd_traits.hpp)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// panel_words on 16 words at once (vpshufb and the shifts act per 128-bit
// lane and per word alike).
template <bool Int4>
inline __m512i panel_words(__m512i v) {
  if constexpr (!Int4) {
    return _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m512i m = _mm512_set1_epi8(0x0F);
    const __m512i f = _mm512_and_si512(v, m), s = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
    const __m512i a = _mm512_or_si512(f, _mm512_slli_epi32(_mm512_srli_epi32(f, 16), 4));
    const __m512i b = _mm512_or_si512(s, _mm512_slli_epi32(_mm512_srli_epi32(s, 16), 4));
    const __m512i ab = _mm512_or_si512(_mm512_and_si512(a, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(b, 16));
    const __m512i order = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15));
    return _mm512_xor_si512(_mm512_shuffle_epi8(ab, order), _mm512_set1_epi8(static_cast<char>(0x88)));
  }
}

// 16 rows × 16 words (a[i]: row i) -> 16 steps (a[s]: word s of rows 0..15,
// row c at dword c). Unpacks of dwords then qwords give u[4j + e] whose lane
// q holds word 4q + e of rows 4j..4j+3; two rounds of 128-bit lane shuffles
// gather lane q of u[e], u[4 + e], u[8 + e], u[12 + e] into step 4q + e.
inline void transpose_words_16x16(__m512i a[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]);
  }
  for (int j = 0; j < 4; ++j) {
    u[4 * j + 0] = _mm512_unpacklo_epi64(t[4 * j], t[4 * j + 2]);
    u[4 * j + 1] = _mm512_unpackhi_epi64(t[4 * j], t[4 * j + 2]);
    u[4 * j + 2] = _mm512_unpacklo_epi64(t[4 * j + 1], t[4 * j + 3]);
    u[4 * j + 3] = _mm512_unpackhi_epi64(t[4 * j + 1], t[4 * j + 3]);
  }
  for (int e = 0; e < 4; ++e) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x44), v1 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xEE);
    const __m512i w0 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x44);
    const __m512i w1 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xEE);
    a[e] = _mm512_shuffle_i32x4(v0, w0, 0x88);
    a[4 + e] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
    a[8 + e] = _mm512_shuffle_i32x4(v1, w1, 0x88);
    a[12 + e] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
  }
}
#pragma GCC diagnostic pop
#endif

// Transposes panel `pn` of the in-place rows into the int8 or int4 panel
// layout at `out` (panel_bytes, 64-byte aligned): step s (64 bytes) holds
// word s of each of the 16 rows, word 4c at byte 4c (int_pack.hpp). On
// AVX-512, 16 words of the 16 rows at a time (transpose_words_16x16: at
// M = 4096, K = N = 3072 in-place ConvRot W4A4 took 1.05x the packed
// weights' time, 1.10x with the SSE2 transpose; INT8 1.05x either way;
// BENCHMARKS.md "fifth session"); then, and elsewhere, 4 words of 4 rows (a 4×4 word
// transpose, SSE2 unpacks). Words past the last whole 4 of a row, and
// partial panels, go one at a time (int8: byte by byte, as K % 4 may be
// non-zero; int4 rows are whole words).
template <bool Int4>
void transpose_panel(const PackedIntWeights& w, int64_t pn, uint8_t* out) {
  const int64_t rb = w.row_bytes, steps = w.panel_bytes / 64, row0 = 16 * pn;
  const uint8_t zero = Int4 ? 0x88 : 0x80;  // weight 0
  const int64_t valid = std::clamp<int64_t>(w.n - row0, 0, kPanelCols);
  if (valid == 0) {
    std::memset(out, zero, static_cast<size_t>(steps * 64));
    return;
  }
  int64_t s = 0;
  if (valid == kPanelCols) {
#if defined(__AVX512F__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
    for (; 4 * s + 64 <= rb; s += 16) {
      __m512i a[16];
      for (int i = 0; i < 16; ++i) a[i] = _mm512_loadu_si512(w.rows + (row0 + i) * rb + 4 * s);
      transpose_words_16x16(a);
      for (int j = 0; j < 16; ++j) _mm512_store_si512(out + (s + j) * 64, panel_words<Int4>(a[j]));
    }
#pragma GCC diagnostic pop
#endif
    for (; 4 * s + 16 <= rb; s += 4)
      for (int g = 0; g < 4; ++g) {
        const uint8_t* r = w.rows + (row0 + 4 * g) * rb + 4 * s;
        __m128i a[4];
        for (int i = 0; i < 4; ++i) a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + i * rb));
        const __m128i t0 = _mm_unpacklo_epi32(a[0], a[1]), t1 = _mm_unpackhi_epi32(a[0], a[1]);
        const __m128i t2 = _mm_unpacklo_epi32(a[2], a[3]), t3 = _mm_unpackhi_epi32(a[2], a[3]);
        const __m128i step[4] = {_mm_unpacklo_epi64(t0, t2), _mm_unpackhi_epi64(t0, t2),
                                 _mm_unpacklo_epi64(t1, t3), _mm_unpackhi_epi64(t1, t3)};
        for (int j = 0; j < 4; ++j)
          _mm_store_si128(reinterpret_cast<__m128i*>(out + (s + j) * 64 + 16 * g), panel_words<Int4>(step[j]));
      }
  }
  for (; s < steps; ++s)
    for (int c = 0; c < kPanelCols; ++c) {
      uint8_t* dst = out + s * 64 + 4 * c;
      const uint8_t* src = w.rows + (row0 + c) * rb + 4 * s;
      if constexpr (Int4) {
        const bool inside = c < valid && 4 * s < rb;
        store_u32(dst, inside ? regroup_nibble_quad<false>(load_u32(src)) ^ 0x88888888u : 0x88888888u);
      } else {
        for (int t = 0; t < 4; ++t) dst[t] = c < valid && 4 * s + t < rb ? static_cast<uint8_t>(src[t] ^ 0x80) : zero;
      }
    }
}

}  // namespace
}  // namespace mixq::kernels::x86
