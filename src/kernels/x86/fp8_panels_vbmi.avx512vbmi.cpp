// A few activation rows against packed FP8 panels (E4M3, E5M2, MXFP8;
// float_gemm.hpp's layout: per panel one 16-byte row of 16 columns per k)
// with the codes decoded by table lookups (fp8_few_rows_vbmi.hpp) instead of
// the FMA core's f16 widening; every output is the FMA core's chain in k
// order, bit for bit.
//
// Why: at one token the FMA core spends its vector work on the widening
// (per 32 codes a sign extension, a shift, a mask, two vcvtph2ps and an
// extract), not on the FMAs. Here 64 codes (4 k of a panel, one 64-byte
// load) take two vpermi2b and a ternary-logic op, then one vpermt2b per k
// places each column's bf16 bytes at the top of its f32 lane: 1.3x the FMA
// core's rate from L2 on Zen 4 (one thread, three panels; BENCHMARKS.md,
// "Issue 14 on Zen 4, fifth session"). NaN codes need no marker here: the
// packer listed their columns (FloatPanels::nan_columns).
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/x86/float_gemm.hpp"
#include "kernels/x86/fp8_few_rows_vbmi.hpp"
#include "kernels/x86/simd_traits.hpp"
#include "mixq/error.hpp"

namespace mixq::kernels::x86 {
namespace {

#pragma GCC diagnostic push  // g++ 12 warns inside its own zmm intrinsics
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// Step u of a 64-byte load of panel rows k0 .. k0 + 3: column d of row k0 + u
// is byte 16u + d.
constexpr PlaceIndices kPlace = make_place_indices([](int u, int d) { return 16 * u + d; });

struct Call {
  const float* a;
  int64_t lda;
  const FloatPanels* w;
  int64_t prefetch;
  float alpha;
  const float* bias;
  float* y;
  Call rows_from(int64_t m0) const {
    Call c = *this;
    c.a += m0 * lda;
    c.y += m0 * w->n;
    return c;
  }
};

// Rows [0, R) against panels p .. p+J-1, all of K, 4 k at a time, the J
// panels' FMAs alternating k by k (J independent chains per row in flight).
template <int R, int J, class Codes>
void panels(const Call& c, int64_t p) {
  const FloatPanels& w = *c.w;
  const int64_t k = w.k, n = w.n;
  const uint8_t* b[J];
  for (int j = 0; j < J; ++j) b[j] = w.data.data() + (p + j) * w.steps * 16;  // row s at b[j] + 16·s
  __m512 acc[J][R];
  for (int j = 0; j < J; ++j)
    for (int i = 0; i < R; ++i) acc[j][i] = _mm512_setzero_ps();
  [[maybe_unused]] __m512 scale[J];  // MXFP8: the current 32-block's column scales (k is a multiple of 32)
  // Rows [s, s + count) of every panel (count = 4 but at the end of K,
  // where the rows past K are not loaded).
  auto step = [&](auto full, int64_t s) {
    constexpr bool kFull = decltype(full)::value;
    const int64_t count = kFull ? 4 : k - s;
    if constexpr (Codes::kBlockScaled) {
      if (s % 32 == 0)
        MIXQ_UNROLL
        for (int j = 0; j < J; ++j) {
          const uint8_t* e = w.scales.data() + ((p + j) * w.blocks + s / 32) * 16;
          scale[j] = _mm512_castsi512_ps(
              _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e))), 23));
        }
    }
    __m512i hi[J], lo[J];
    MIXQ_UNROLL
    for (int j = 0; j < J; ++j) {
      const uint8_t* at = b[j] + 16 * s;
      if (c.prefetch > 0) _mm_prefetch(reinterpret_cast<const char*>(at + c.prefetch), _MM_HINT_T0);
      const __mmask64 rows = kFull ? ~__mmask64{0} : (__mmask64{1} << (16 * count)) - 1;
      const __m512i x = kFull ? _mm512_loadu_si512(at) : _mm512_maskz_loadu_epi8(rows, at);
      bf16_bytes<Codes>(x, hi[j], lo[j]);
    }
    MIXQ_UNROLL
    for (int u = 0; u < 4; ++u) {
      if (!kFull && u >= count) break;
      __m512 av[R];
      MIXQ_UNROLL
      for (int i = 0; i < R; ++i) av[i] = _mm512_set1_ps(c.a[i * c.lda + s + u]);
      MIXQ_UNROLL
      for (int j = 0; j < J; ++j) {  // every output's chain in k order
        __m512 wv = placed(hi[j], lo[j], kPlace.idx[u]);
        if constexpr (Codes::kBlockScaled) wv = _mm512_mul_ps(wv, scale[j]);
        MIXQ_UNROLL
        for (int i = 0; i < R; ++i) acc[j][i] = _mm512_fmadd_ps(av[i], wv, acc[j][i]);
      }
    }
  };
  int64_t s = 0;
  for (; s + 4 <= k; s += 4) step(std::true_type{}, s);
  if (s < k) step(std::false_type{}, s);
  // As the FMA core's micro-kernel: alpha (rounded), then the bias.
  const __m512 alpha = _mm512_set1_ps(c.alpha);
  for (int j = 0; j < J; ++j) {
    const int64_t c0 = (p + j) * 16;
    const __m512 bias = c.bias ? _mm512_loadu_ps(c.bias + c0) : _mm512_setzero_ps();
    for (int i = 0; i < R; ++i) {
      __m512 out = rounded(_mm512_mul_ps(acc[j][i], alpha));
      if (c.bias) out = _mm512_add_ps(out, bias);
      _mm512_storeu_ps(c.y + i * n + c0, out);
    }
  }
}

template <int R, int J, class Codes>
void panel_groups(const Call& c, int64_t& p, int64_t p1) {
  for (; p + J <= p1; p += J) panels<R, J, Codes>(c, p);
}

template <int R, class Codes>
void rows_against_panels(const Call& c, int64_t p0, int64_t p1, int side_by_side) {
  int64_t p = p0;
  switch (side_by_side) {
    case 4: panel_groups<R, 4, Codes>(c, p, p1); break;
    case 3: panel_groups<R, 3, Codes>(c, p, p1); break;
    case 2: panel_groups<R, 2, Codes>(c, p, p1); break;
    default: break;
  }
  panel_groups<R, 1, Codes>(c, p, p1);
}

#pragma GCC diagnostic pop

}  // namespace

void fp8_panels_avx512vbmi(const float* a, int64_t lda, int64_t m, const FloatPanels& w, int64_t p0, int64_t p1,
                           int side_by_side, int64_t prefetch_bytes, float alpha, const float* bias, float* y) {
  if (w.in_place()) fail("fp8 panels: packed panels only");
  const Call c{a, lda, &w, prefetch_bytes, alpha, bias, y};
  run_row_groups(c, w.type, m, [&]<int R, class Codes>(const Call& rows) {
    rows_against_panels<R, Codes>(rows, p0, p1, side_by_side);
  });
}

}  // namespace mixq::kernels::x86
