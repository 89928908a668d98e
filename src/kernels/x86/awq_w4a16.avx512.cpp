// AVX-512 AWQ W4A16 linears (awq_w4a16.hpp), two cores over the same packed
// weights; kernels::float_dot() (measured per process) picks one per layer.
//  - awq_avx512 (`vdpbf16ps`, below; AVX-512 BF16 only, no AVX2 twin):
//    register block R = 4 rows × CB = 2 panels (8 group accumulators + 8
//    outputs). Small M splits panels over the threads (weights streamed
//    once); larger M splits rows.
//  - awq_avx512_fma (`vfmadd231ps`): the f32-FMA core written once for every
//    target in awq_w4a16_impl.hpp.
// GCC 12 reports false -Wmaybe-uninitialized inside its own AVX-512 headers
// (the _mm512_undefined_* idiom); nothing of ours is uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/x86/awq_w4a16_impl.hpp"
#include "mixq/numeric.hpp"
#include "util/parallel.hpp"

namespace mixq::kernels::x86 {
namespace {

struct Acts {
  int64_t k2 = 0, groups = 0;
  std::vector<uint32_t> pairs;  // [M][K/2] bf16 pairs (x[2j] low, x[2j+1] high)
  std::vector<float> sums;      // [M][groups] fp32 Σ x over the group
};

inline __mmask16 tail_mask(int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1u);
}

// 16 stored bytes -> 16 lanes of bf16 pairs (q_lo − 8, q_hi − 8).
inline __m512i decode(const uint8_t* p, __m512i table, __m512i low_mask) {
  const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i t = _mm512_slli_epi32(v, 12);  // high nibble -> bits 16..19
  // mask ? v : t  (imm 0xCA): word 0 index = low nibble, word 1 index = high nibble.
  const __m512i idx = _mm512_ternarylogic_epi32(low_mask, v, t, 0xCA);
  return _mm512_permutexvar_epi16(idx, table);
}

template <int R, int CB>
void block(const AwqPacked& w, const Acts& a, int64_t m0, int64_t p0, __m512i table, float* y) {
  const int64_t half = w.k / 2, np = w.panels * 16, steps = w.group / 2;
  const __m512i low_mask = _mm512_set1_epi32(0x0F);
  __m512 out[R][CB];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < CB; ++c) out[r][c] = _mm512_setzero_ps();
  const StoredView scale(w.scale), zeros(w.zeros);
  for (int64_t g = 0; g < a.groups; ++g) {
    __m512 acc[R][CB];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < CB; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int64_t j = g * steps; j < (g + 1) * steps; ++j) {
      __m512i wv[CB];
      for (int c = 0; c < CB; ++c) wv[c] = decode(w.codes.data() + ((p0 + c) * half + j) * 16, table, low_mask);
      for (int r = 0; r < R; ++r) {
        const __m512i xv = _mm512_set1_epi32(static_cast<int>(a.pairs[(m0 + r) * a.k2 + j]));
        for (int c = 0; c < CB; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], (__m512bh)wv[c], (__m512bh)xv);
      }
    }
    for (int c = 0; c < CB; ++c) {
      const int64_t col = (p0 + c) * 16;
      const __m512 s = scale.load<Avx512>(g * np + col);
      const __m512 z = zeros.load<Avx512>(g * np + col);
      for (int r = 0; r < R; ++r) {
        out[r][c] = _mm512_fmadd_ps(acc[r][c], s, out[r][c]);
        out[r][c] = _mm512_fmadd_ps(_mm512_set1_ps(a.sums[(m0 + r) * a.groups + g]), z, out[r][c]);
      }
    }
  }
  for (int c = 0; c < CB; ++c) {
    const int64_t col = (p0 + c) * 16;
    const __mmask16 mask = tail_mask(w.n - col);
    for (int r = 0; r < R; ++r) {
      __m512 v = out[r][c];
      if (!w.bias.empty()) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, w.bias.data() + col));
      _mm512_mask_storeu_ps(y + (m0 + r) * w.n + col, mask, v);
    }
  }
}

template <int R>
void rows(const AwqPacked& w, const Acts& a, int64_t m0, int64_t p_begin, int64_t p_end, __m512i table, float* y) {
  int64_t p = p_begin;
  for (; p + 2 <= p_end; p += 2) block<R, 2>(w, a, m0, p, table, y);
  if (p < p_end) block<R, 1>(w, a, m0, p, table, y);
}

void run(const AwqPacked& w, const Acts& a, int64_t m_begin, int64_t m_end, int64_t p_begin, int64_t p_end,
         float* y) {
  alignas(64) uint16_t words[32] = {};
  for (int i = 0; i < 16; ++i) {
    const float v = static_cast<float>(i - 8);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    words[i] = static_cast<uint16_t>(bits >> 16);  // exact: small integers
  }
  const __m512i table = _mm512_load_si512(words);
  int64_t m = m_begin;
  for (; m + 4 <= m_end; m += 4) rows<4>(w, a, m, p_begin, p_end, table, y);
  switch (m_end - m) {
    case 3: rows<3>(w, a, m, p_begin, p_end, table, y); break;
    case 2: rows<2>(w, a, m, p_begin, p_end, table, y); break;
    case 1: rows<1>(w, a, m, p_begin, p_end, table, y); break;
    default: break;
  }
}

}  // namespace

void awq_avx512(const AwqPacked& w, const float* x, int64_t m, float* y) {
  Acts a;
  a.k2 = w.k / 2;
  a.groups = w.k / w.group;
  a.pairs.resize(static_cast<size_t>(m * a.k2));
  a.sums.resize(static_cast<size_t>(m * a.groups));
  util::parallel_for(m, 4, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * w.k;
      uint16_t* dst = reinterpret_cast<uint16_t*>(a.pairs.data() + r * a.k2);
      int64_t i = 0;
      for (; i + 16 <= w.k; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(xr + i)));
      if (i < w.k) {
        const __mmask16 mask = tail_mask(w.k - i);
        _mm256_mask_storeu_epi16(dst + i, mask, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, xr + i)));
      }
      // The zero-point term sums the same bf16-rounded x the dot multiplies,
      // so the layer is exactly a linear over bf16(x) (f32 sums in k order).
      for (int64_t g = 0; g < a.groups; ++g) {
        float s = 0.0f;
        for (int64_t j = g * w.group; j < (g + 1) * w.group; ++j) s += bf16_to_f32(dst[j]);
        a.sums[r * a.groups + g] = s;
      }
    }
  });
  if (m <= 16) {
    const int64_t pairs = (w.panels + 1) / 2;
    util::parallel_for(pairs, 1, [&](int64_t begin, int64_t end, int) {
      run(w, a, 0, m, begin * 2, std::min(end * 2, w.panels), y);
    });
  } else {
    constexpr int64_t kRows = 32;
    util::parallel_for((m + kRows - 1) / kRows, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t b = begin; b < end; ++b) run(w, a, b * kRows, std::min(m, (b + 1) * kRows), 0, w.panels, y);
    });
  }
}

// ---- f32-FMA core: awq_w4a16_impl.hpp compiled for AVX-512 ----------------
void awq_avx512_fma(const AwqPacked& w, const float* x, int64_t m, float* y) { awq_fma<Avx512>(w, x, m, y); }

}  // namespace mixq::kernels::x86
