#pragma once
// The vector types the x86 kernels are written over, one struct per target:
// a kernel family is written once as templates on `V` (the *_impl.hpp files)
// and compiled per target by a tiny translation unit, *.avx2.cpp with the
// Avx2 traits, *.avxvnni.cpp with Avx2Vnni and *.avx512[vbmi].cpp with the
// Avx512 traits (CMakeLists.txt gives those files their ISA flags). Include
// only from such files, and instantiate a kernel only with the traits of the
// file's own instruction set.
//
// Each struct has the same members: the float / int32 vector types F and I,
// kLanes (8 or 16 floats), a lane mask M for partial vectors, and inline
// wrappers of one instruction (or a short fixed sequence) each. Where the two
// targets reach one result by different instructions (a byte-table lookup:
// vpshufb needs the index masked, vpermb not), the struct holds the
// difference and the kernels stay one loop. Per-target tuning (tile sizes,
// prefetch distances, block bytes) lives in each family's own traits, next to
// its kernel.
//
// Everything is in an anonymous namespace: each translation unit compiles its
// own copy with its own flags, so no AVX-512 instance of an inline function
// can be picked by the linker for the AVX2 path (no ODR mixing).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/stored_floats.hpp"

namespace mixq::kernels::x86 {
namespace {

// g++ contracts a vmulps feeding a vaddps into one FMA in C++ (-ffp-contract=fast
// is its default, and these files have -mfma); the reference rounds the
// product first, so such a product passes through this empty asm barrier.
template <class T>
inline T rounded(T v) {
  __asm__("" : "+vm"(v));
  return v;
}

// g++ 12 does not fully unroll the constant tile loops of the micro kernels,
// which leaves the accumulator arrays in memory (seen in objdump); complete
// unrolling lets them live in registers.
#define MIXQ_UNROLL _Pragma("GCC unroll 16")

#if defined(__AVX2__)
// Four vectors a[j] transposed as 4 x 4 dwords within each 128-bit lane:
// afterwards a[s] holds dword s of a[0..3], lane by lane (8 unpacks).
inline void transpose_dwords_4x4_lanes(__m256i a[4]) {
  const __m256i t0 = _mm256_unpacklo_epi32(a[0], a[1]), t1 = _mm256_unpackhi_epi32(a[0], a[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(a[2], a[3]), t3 = _mm256_unpackhi_epi32(a[2], a[3]);
  a[0] = _mm256_unpacklo_epi64(t0, t2);
  a[1] = _mm256_unpackhi_epi64(t0, t2);
  a[2] = _mm256_unpacklo_epi64(t1, t3);
  a[3] = _mm256_unpackhi_epi64(t1, t3);
}

struct Avx2 {
  using F = __m256;
  using I = __m256i;
  using M = __m256i;  // lane mask: all ones in valid lanes
  static constexpr int kLanes = 8;
  static constexpr bool kVnni = false;  // no `vpdpbusd`: dot4 (exact for any u8 · s8) exists only with VNNI

  // ---- masks and memory ----
  static M mask(int64_t count) {  // the first `count` lanes (all for >= 8, none for <= 0)
    const int c = static_cast<int>(std::clamp<int64_t>(count, 0, 8));
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F loadz(M m, const float* p) { return _mm256_maskload_ps(p, m); }
  // The first `count` lanes at p, zeros after (none for <= 0): a plain load
  // when all are valid. A row read by masked loads alone ran at 10-16 GB/s a
  // thread from DRAM on Zen 5, as if the hardware prefetchers did not follow
  // it; plain loads of the same row 2-3x faster (BENCHMARKS.md, "Issue 14 on
  // Zen 5, seventh session").
  static F load_first(const float* p, int64_t count) { return count >= 8 ? load(p) : loadz(mask(count), p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void store(float* p, M m, F v) { _mm256_maskstore_ps(p, m, v); }
  // kLanes 16-bit floats at p widened to f32, both exact: F16C vcvtph2ps for
  // f16; bf16 is the high half of an f32, so zero-extend and shift left 16.
  static F load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F load_bf16(const uint16_t* p) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }

  // ---- float arithmetic ----
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }  // b where either is NaN
  static F min(F a, F b) { return _mm256_min_ps(a, b); }  // b where either is NaN
  static F abs(F v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
  static F round(F v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }  // ties even
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F load_a(const float* p) { return _mm256_load_ps(p); }  // 32-byte aligned
  static void store_a(float* p, F v) { _mm256_store_ps(p, v); }

  // ---- comparisons (a mask vector per lane) ----
  using MF = __m256;
  static MF lt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static F select(MF m, F yes, F no) { return _mm256_blendv_ps(no, yes, m); }
  static MF ordered(F v) { return _mm256_cmp_ps(v, v, _CMP_ORD_Q); }  // not NaN
  // Rounds to the nearest integer (ties even) in the lanes of `keep`, 0 elsewhere.
  static I cvtr_where(MF keep, F v) { return _mm256_and_si256(_mm256_cvtps_epi32(v), _mm256_castps_si256(keep)); }
  static float reduce_max(F v) {  // for NaN-free v
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }

  // ---- int32 lanes ----
  static I zeroi() { return _mm256_setzero_si256(); }
  static I set1i(int32_t v) { return _mm256_set1_epi32(v); }
  static I set1b(int8_t v) { return _mm256_set1_epi8(v); }
  static I loadi(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static I addi(I a, I b) { return _mm256_add_epi32(a, b); }
  static I subi(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I andi(I a, I b) { return _mm256_and_si256(a, b); }
  static I maxi(I a, I b) { return _mm256_max_epi32(a, b); }
  template <int N>
  static I srli(I v) { return _mm256_srli_epi32(v, N); }
  static F cvt(I v) { return _mm256_cvtepi32_ps(v); }
  static I cvtt(F v) { return _mm256_cvttps_epi32(v); }  // truncating; NaN -> INT32_MIN
  static I cvtr(F v) { return _mm256_cvtps_epi32(v); }  // rounding (ties even)
  template <int N>
  static I srli16(I v) { return _mm256_srli_epi16(v, N); }
  template <int N>
  static I slli(I v) { return _mm256_slli_epi32(v, N); }
  static I ori(I a, I b) { return _mm256_or_si256(a, b); }
  static I xori(I a, I b) { return _mm256_xor_si256(a, b); }
  static F as_float(I v) { return _mm256_castsi256_ps(v); }
  static I as_int(F v) { return _mm256_castps_si256(v); }
  static I loadi_a(const void* p) { return _mm256_load_si256(static_cast<const __m256i*>(p)); }
  static void storei_a(void* p, I v) { _mm256_store_si256(static_cast<__m256i*>(p), v); }
  static void storei(void* p, I v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
  // kLanes bytes at p, zero-extended into the int32 lanes.
  static I load_u8(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  // -d in the lanes whose sign bit of v is set, d elsewhere (d must be 0
  // where v is +0.0: vpsignd zeroes there).
  static I negate_if_negative(I d, F v) { return _mm256_sign_epi32(d, _mm256_castps_si256(v)); }
  // Stores each lane as int8 (lanes hold -128..127).
  static void store_i8(int8_t* p, I v) {
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi16(w, w));
  }
  static I mullo(I a, I b) { return _mm256_mullo_epi32(a, b); }
  template <int N>
  static I srai(I v) { return _mm256_srai_epi32(v, N); }
  // Stores the first `count` lanes (none for <= 0); a plain store when all
  // are valid (vmaskmovps stores are microcoded on AMD cores).
  static void store_first(float* p, int64_t count, F v) {
    if (count >= 8) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, mask(count), v);
  }
  // Stores the 16 lanes of v[0], v[1] as int8 (lanes hold -128..127). packs
  // interleaves the 128-bit lanes: [v0 0-3, v1 0-3 | v0 4-7, v1 4-7]; vpermq
  // 0xD8 restores the order before the final 16 -> 8 bit pack.
  static void store_i8x16(int8_t* p, const I* v) {
    const __m256i w16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(v[0], v[1]), 0xD8);
    const __m128i w8 = _mm_packs_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), w8);
  }
  // A 16-entry byte table, and table[idx & 15] per byte (vpshufb reads bit 7
  // of the index as "zero", so the index is masked).
  static I table16(const int8_t* t) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
  }
  static I lookup16(I table, I idx) { return _mm256_shuffle_epi8(table, _mm256_and_si256(idx, _mm256_set1_epi8(0x0F))); }
  static int32_t reduce_add(I v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
  }
  // Lane j: `op` over the 8 lanes of v[j] (an associative, commutative op on
  // the values given: max of NaN-free floats, int32 sums), in three levels of
  // pairwise lane moves; then lane 4(j % 2) + j / 2 holds v[j], moved back.
  template <class Op>
  static __m256 reduce_each(const __m256* v, Op op) {
    __m256 w[4], x[2];
    for (int i = 0; i < 4; ++i)  // 128-bit lane h: v[2i + h]
      w[i] = op(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
                _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
    for (int i = 0; i < 2; ++i) {  // lane h: v[4i + h] twice, v[4i + 2 + h] twice
      const __m256d a = _mm256_castps_pd(w[2 * i]), b = _mm256_castps_pd(w[2 * i + 1]);
      x[i] = op(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)), _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
    }
    const __m256 z = op(_mm256_shuffle_ps(x[0], x[1], 0x88), _mm256_shuffle_ps(x[0], x[1], 0xDD));
    return _mm256_permutevar8x32_ps(z, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  }
  // The 4 bytes at p in every int32 lane.
  static I bcast4(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
  }
  // Stores the low byte of each lane (lanes hold 0..255).
  static void store_bytes(uint8_t* p, I v) {
    const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(w, w));
  }
  // acc + Σ_4 u8·s8 per lane, where every pair sum of products fits int16
  // (vpmaddubsw saturates there; exact for operands such as 0..15 × 0..15).
  static I dot4_small(I acc, I u8, I s8) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), _mm256_set1_epi16(1)));
  }
  // Signed bytes w, x as an (unsigned, signed) pair with the same products:
  // |w| (0..128) and x·sign(w). For x in [-127, 127] the pair sums stay
  // within ±2·128·127 = ±32512, so dot4_small(acc, abs8(w), sign8(x, w)) is
  // the exact Σ_4 w·x.
  static I abs8(I w) { return _mm256_abs_epi8(w); }
  static I sign8(I x, I w) { return _mm256_sign_epi8(x, w); }
  // A block dot of 16 u8·s8 products per lane, in steps of 4 (one weight
  // vector against 4 activation bytes each):
  //   d = dot_begin(c); d = dot_step(d, w, x) ×4; dot_end(d, c) = c + Σ.
  // Without VNNI the products of the four steps add up in i16 (vpmaddubsw;
  // the caller guarantees the 16-product sum fits, e.g. <= 2304 for NVFP4's
  // 0..24 × -12..12) and one vpmaddwd widens at the end: 9 instructions per
  // block instead of 12. The empty asm keeps g++ from reassociating the i16
  // sums into a tree, which kept more products live.
  static I dot_begin(int32_t) { return _mm256_setzero_si256(); }
  static I dot_step(I d, I u8, I s8) {
    d = _mm256_add_epi16(d, _mm256_maddubs_epi16(u8, s8));
    __asm__("" : "+x"(d));
    return d;
  }
  static I dot_end(I d, int32_t c) { return add_widened(_mm256_set1_epi32(c), d); }
  // acc + the i16 lanes of d summed in pairs (one vpmaddwd).
  static I add_widened(I acc, I d) { return _mm256_add_epi32(acc, _mm256_madd_epi16(d, _mm256_set1_epi16(1))); }

  // ---- lane moves ----
  template <int Imm>
  static F permute(F v) { return _mm256_permute_ps(v, Imm); }  // within each 128-bit quarter
  static F swap_halves(F v) { return _mm256_permute2f128_ps(v, v, 0x01); }  // the two 128-bit quarters
};

// AVX2 with AVX-VNNI: the int8 dot products are one `vpdpbusd ymm`. Only in
// *.avxvnni.cpp files.
struct Avx2Vnni : Avx2 {
  static constexpr bool kVnni = true;
  static I dot4_small(I acc, I u8, I s8) { return _mm256_dpbusd_avx_epi32(acc, u8, s8); }
  static I dot4(I acc, I u8, I s8) { return _mm256_dpbusd_avx_epi32(acc, u8, s8); }
  static I dot_begin(int32_t c) { return _mm256_set1_epi32(c); }
  static I dot_step(I d, I u8, I s8) { return _mm256_dpbusd_avx_epi32(d, u8, s8); }
  static I dot_end(I d, int32_t) { return d; }
};
#endif  // __AVX2__

#if defined(__AVX512F__)
// g++ 12 reports -W(maybe-)uninitialized inside its own AVX-512 headers for the
// pass-through operand of unmasked intrinsics (_mm512_undefined_ps() is the
// self-initialised `__m512 __Y = __Y;`). Nothing of ours is uninitialised; the
// suppression covers only these wrappers, and g++ honours it where they are
// inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
struct Avx512 {
  using F = __m512;
  using I = __m512i;
  using M = __mmask16;
  static constexpr int kLanes = 16;
  static constexpr bool kVnni = true;

  // ---- masks and memory ----
  static M mask(int64_t count) {  // the first `count` lanes (all for >= 16, none for <= 0)
    if (count <= 0) return 0;
    return count >= 16 ? M(0xFFFF) : M((1u << count) - 1u);
  }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F loadz(M m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static F load_first(const float* p, int64_t count) { return count >= 16 ? load(p) : loadz(mask(count), p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, M m, F v) { _mm512_mask_storeu_ps(p, m, v); }
  static F load_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F load_bf16(const uint16_t* p) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
  }

  // ---- float arithmetic ----
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }  // b where either is NaN
  static F min(F a, F b) { return _mm512_min_ps(a, b); }  // b where either is NaN
  static F abs(F v) { return _mm512_abs_ps(v); }
  static F round(F v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F load_a(const float* p) { return _mm512_load_ps(p); }  // 64-byte aligned
  static void store_a(float* p, F v) { _mm512_store_ps(p, v); }

  // ---- comparisons (a mask register) ----
  using MF = __mmask16;
  static MF lt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static F select(MF m, F yes, F no) { return _mm512_mask_mov_ps(no, m, yes); }
  static MF ordered(F v) { return _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q); }
  static I cvtr_where(MF keep, F v) {
    return _mm512_maskz_cvt_roundps_epi32(keep, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static float reduce_max(F v) { return _mm512_reduce_max_ps(v); }

  // ---- int32 lanes ----
  static I zeroi() { return _mm512_setzero_si512(); }
  static I set1i(int32_t v) { return _mm512_set1_epi32(v); }
  static I set1b(int8_t v) { return _mm512_set1_epi8(v); }
  static I loadi(const void* p) { return _mm512_loadu_si512(p); }
  static I addi(I a, I b) { return _mm512_add_epi32(a, b); }
  static I subi(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I andi(I a, I b) { return _mm512_and_si512(a, b); }
  static I maxi(I a, I b) { return _mm512_max_epi32(a, b); }
  template <int N>
  static I srli(I v) { return _mm512_srli_epi32(v, N); }
  static F cvt(I v) { return _mm512_cvtepi32_ps(v); }
  static I cvtt(F v) { return _mm512_cvttps_epi32(v); }
  static I cvtr(F v) { return _mm512_cvtps_epi32(v); }
  template <int N>
  static I srli16(I v) { return _mm512_srli_epi16(v, N); }
  template <int N>
  static I slli(I v) { return _mm512_slli_epi32(v, N); }
  static I ori(I a, I b) { return _mm512_or_si512(a, b); }
  static I xori(I a, I b) { return _mm512_xor_si512(a, b); }
  static F as_float(I v) { return _mm512_castsi512_ps(v); }
  static I as_int(F v) { return _mm512_castps_si512(v); }
  static I loadi_a(const void* p) { return _mm512_load_si512(p); }
  static void storei_a(void* p, I v) { _mm512_store_si512(p, v); }
  static void storei(void* p, I v) { _mm512_storeu_si512(p, v); }
  static I load_u8(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I negate_if_negative(I d, F v) {
    return _mm512_mask_sub_epi32(d, _mm512_movepi32_mask(_mm512_castps_si512(v)), _mm512_setzero_si512(), d);
  }
  static void store_i8x16(int8_t* p, const I* v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v[0]));
  }
  static void store_i8(int8_t* p, I v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v)); }
  static I mullo(I a, I b) { return _mm512_mullo_epi32(a, b); }
  template <int N>
  static I srai(I v) { return _mm512_srai_epi32(v, N); }
  static void store_first(float* p, int64_t count, F v) { _mm512_mask_storeu_ps(p, mask(count), v); }
  // vpermb reads index bits 0-5: the 16 entries repeated 4 times make bits
  // 4-5 (the other nibble, or bits shifted in) irrelevant, so no mask.
  static I table16(const int8_t* t) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
  }
  static I lookup16(I table, I idx) { return _mm512_permutexvar_epi8(idx, table); }  // VBMI: *.avx512vbmi.cpp
  static int32_t reduce_add(I v) { return _mm512_reduce_add_epi32(v); }
  // Lane j: `op` over the 16 lanes of v[j] (an associative, commutative op
  // on the values given: max of NaN-free floats, int32 sums), in four levels
  // of pairwise lane moves; then lane 4(j % 4) + j / 4 holds v[j], moved back.
  template <class Op>
  static __m512 reduce_each(const __m512* v, Op op) {
    __m512 w[8], x[4], y[2];
    for (int i = 0; i < 8; ++i)  // lanes 0-7: v[2i], 8-15: v[2i + 1]
      w[i] = op(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44), _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; ++i)  // quarter q: v[4i + q]
      x[i] = op(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0x88), _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; ++i) {  // quarter q: v[8i + q] twice, v[8i + 4 + q] twice
      const __m512d a = _mm512_castps_pd(x[2 * i]), b = _mm512_castps_pd(x[2 * i + 1]);
      y[i] = op(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    const __m512 z = op(_mm512_shuffle_ps(y[0], y[1], 0x88), _mm512_shuffle_ps(y[0], y[1], 0xDD));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), z);
  }
  static I bcast4(const void* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(static_cast<int>(v));
  }
  static void store_bytes(uint8_t* p, I v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v));
  }
  static I dot4_small(I acc, I u8, I s8) { return _mm512_dpbusd_epi32(acc, u8, s8); }
  static I dot4(I acc, I u8, I s8) { return _mm512_dpbusd_epi32(acc, u8, s8); }
  static I abs8(I w) { return _mm512_abs_epi8(w); }
  // -x where w < 0 (no vpsignb in AVX-512; where w = 0, |w| = 0 anyway).
  static I sign8(I x, I w) { return _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x); }
  static I dot_begin(int32_t c) { return _mm512_set1_epi32(c); }
  static I dot_step(I d, I u8, I s8) { return _mm512_dpbusd_epi32(d, u8, s8); }
  static I dot_end(I d, int32_t) { return d; }

  // ---- lane moves ----
  template <int Imm>
  static F permute(F v) { return _mm512_permute_ps(v, Imm); }
  template <int Imm>  // the four 128-bit quarters, as permute moves lanes within each
  static F swap_quarters(F v) { return _mm512_shuffle_f32x4(v, v, Imm); }
};
#pragma GCC diagnostic pop
#endif  // __AVX512F__

// ---- Per-column byte tables (the in-kernel decode of 4-bit codes, int_gemm_impl.hpp) ----
// A vector in the int8 weight-panel layout (int_pack.hpp: byte 4c + t belongs
// to column c, kLanes columns per vector) looked up in a 16-entry byte table
// per column. vpshufb looks up within each 128-bit lane (4 columns), so the
// tables are held as 4 vectors: vector j holds in lane q the table of the
// lane's column j (column 4q + j of the vector), and the 4 lookups are merged
// per 32-bit element (one column each). Keyed by kLanes so that Avx2Vnni
// shares the Avx2 version.
template <int Lanes>
struct ColumnTables;

#if defined(__AVX2__)
template <>
struct ColumnTables<8> {
  using I = __m256i;
  // Vector j for the 8 columns whose tables are t[0..7].
  static I load(const int8_t* const* t, int j) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t[j]));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t[4 + j]));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  }
  // tab[0..3] = load() of the 8 tables lut + 16·row[c] (c = 0..7), no
  // pointer array. Each offset is a byte load and a shift: computing them 8
  // at a time through a stored vector (as ColumnTables<16> does) put a
  // store-to-load round trip before every table, and M = 1 asym_w4a8 ran
  // 1.1-1.2x slower on Zen 2 (BENCHMARKS.md).
  static void load_rows(const int8_t* lut, const uint8_t* row, I* tab) {
    auto table = [&](int c) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(lut + (static_cast<size_t>(row[c]) << 4)));
    };
    for (int j = 0; j < 4; ++j) {
      const __m128i lo = table(j), hi = table(4 + j);
      tab[j] = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    }
  }
  // tab[4] from load(); idx bytes 0..15.
  static I lookup(const I* tab, I idx) {
    I r = _mm256_shuffle_epi8(tab[0], idx);
    r = _mm256_blend_epi32(r, _mm256_shuffle_epi8(tab[1], idx), 0x22);
    r = _mm256_blend_epi32(r, _mm256_shuffle_epi8(tab[2], idx), 0x44);
    return _mm256_blend_epi32(r, _mm256_shuffle_epi8(tab[3], idx), 0x88);
  }
};
#endif  // __AVX2__

#if defined(__AVX512F__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
template <>
struct ColumnTables<16> {
  using I = __m512i;
  // kColumnsInOrder: lane q of tab[j] holds column 4j + q instead of 4q + j
  // (the VBMI lookup's order, codes_vbmi.avx512vbmi.cpp); here and in load_rows.
  template <bool kColumnsInOrder = false>
  static I load(const int8_t* const* t, int j) {
    auto lane = [&](int q) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(t[kColumnsInOrder ? 4 * j + q : 4 * q + j]));
    };
    I v = _mm512_zextsi128_si512(lane(0));
    v = _mm512_inserti32x4(v, lane(1), 1);
    v = _mm512_inserti32x4(v, lane(2), 2);
    return _mm512_inserti32x4(v, lane(3), 3);
  }
  // tab[0..3] = load() of the 16 tables lut + 16·row[c] (c = 0..15), no
  // pointer array: the offsets from two 8-byte loads by shifts (scalar work,
  // off the vector and the load ports), each table pair one 256-bit insert,
  // each register one 512-bit insert. At one token this build is most of
  // asym_w4a8's work: on Zen 4, offsets computed 16 at a time through a
  // stored vector and lanes filled by masked 512-bit broadcasts made M = 1
  // 1.15x slower, a byte load per offset 1.13x (BENCHMARKS.md, "Issue 14
  // on Zen 4, fifth session").
  template <bool kColumnsInOrder = false>
  static void load_rows(const int8_t* lut, const uint8_t* row, I* tab) {
    uint64_t bytes[2];
    std::memcpy(bytes, row, 16);
    auto lane = [&](int j, int q) {
      const int c = kColumnsInOrder ? 4 * j + q : 4 * q + j;
      const size_t offset = static_cast<size_t>((bytes[c / 8] >> (8 * (c % 8))) & 0xFF) << 4;
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(lut + offset));
    };
    for (int j = 0; j < 4; ++j) {
      const __m256i a = _mm256_inserti128_si256(_mm256_castsi128_si256(lane(j, 0)), lane(j, 1), 1);
      const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(lane(j, 2)), lane(j, 3), 1);
      tab[j] = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
    }
  }
  static I lookup(const I* tab, I idx) {
    I r = _mm512_shuffle_epi8(tab[0], idx);
    r = _mm512_mask_blend_epi32(0x2222, r, _mm512_shuffle_epi8(tab[1], idx));
    r = _mm512_mask_blend_epi32(0x4444, r, _mm512_shuffle_epi8(tab[2], idx));
    return _mm512_mask_blend_epi32(0x8888, r, _mm512_shuffle_epi8(tab[3], idx));
  }
};
#pragma GCC diagnostic pop
#endif  // __AVX512F__

// Lane j: the maximum of v[j]'s lanes (NaN-free) / the sum of v[j]'s int32
// lanes, for j < kLanes (V::reduce_each).
template <class V>
inline typename V::F max_each(const typename V::F* v) {
  return V::reduce_each(v, [](typename V::F a, typename V::F b) { return V::max(a, b); });
}
template <class V>
inline typename V::I sum_each(const typename V::I* v) {
  using F = typename V::F;
  F f[V::kLanes];
  for (int i = 0; i < V::kLanes; ++i) f[i] = V::as_float(v[i]);
  return V::as_int(V::reduce_each(f, [](F a, F b) { return V::as_float(V::addi(V::as_int(a), V::as_int(b))); }));
}

// kLanes elements of a StoredFloats array of width W from index i, widened
// to f32 (exact at every width): for kernels that fix the width at compile
// time (no branch in their loops).
template <class V, FloatWidth W>
inline typename V::F load_width(const void* base, int64_t i) {
  if constexpr (W == FloatWidth::f16) return V::load_f16(static_cast<const uint16_t*>(base) + i);
  else if constexpr (W == FloatWidth::bf16) return V::load_bf16(static_cast<const uint16_t*>(base) + i);
  else return V::load(static_cast<const float*>(base) + i);
}

// A StoredFloats array as the kernels read it: kLanes elements from index i
// widened to f32 (exact at every width). Taken once per loop (the width does
// not change inside), so the branch is on a loop-invariant value.
struct StoredView {
  FloatWidth width;
  const void* base;
  explicit StoredView(const StoredFloats& s)
      : width(s.width()), base(s.width() == FloatWidth::f32 ? static_cast<const void*>(s.f32()) : s.h16()) {}
  StoredView(FloatWidth w, const void* b) : width(w), base(b) {}
  template <class V>
  typename V::F load(int64_t i) const {
    switch (width) {
      case FloatWidth::f16: return V::load_f16(static_cast<const uint16_t*>(base) + i);
      case FloatWidth::bf16: return V::load_bf16(static_cast<const uint16_t*>(base) + i);
      default: return V::load(static_cast<const float*>(base) + i);
    }
  }
  // Address of element i (prefetches) and the bytes of n elements.
  const char* at(int64_t i) const { return static_cast<const char*>(base) + i * elem(); }
  int64_t elem() const { return width == FloatWidth::f32 ? 4 : 2; }
};

}  // namespace
}  // namespace mixq::kernels::x86
