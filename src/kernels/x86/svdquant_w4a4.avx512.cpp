// AVX-512 VNNI SVDQuant W4A4 linear (svdquant_w4a4.hpp).
//
// Per call: activation rows are quantized (offset-unsigned codes, per-group
// scales and code sums) and the low-rank input lora = x·proj_down is formed;
// then a register block of R = 4 rows × CB = 2 panels (8 int32 group
// accumulators + 8 fp32 outputs) walks K group by group. Small M splits the
// panels over the threads (weights streamed once); larger M splits rows.
// GCC 12 reports false -Wmaybe-uninitialized inside its own AVX-512 headers
// (the _mm512_undefined_* idiom); nothing of ours is uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// g++ contracts a*b+c into FMA in C++ even under -std=c++20 when -mfma is on;
// the reference (baseline flags) cannot, so keep every product rounded.
#pragma GCC optimize("fp-contract=off")
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "util/parallel.hpp"
#include "kernels/ref/svdquant_common.hpp"
#include "kernels/x86/svdquant_w4a4.hpp"

namespace mixq::kernels::x86 {
namespace {

using Acts = SvdquantActs;

// Lanes for `count` valid values (all for >= 16, none for <= 0).
inline __mmask16 tail_mask(int64_t count) {
  if (count <= 0) return 0;
  return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1u);
}

// svdq::quantize_act_row vectorised, with the same fp32 operations, so the
// codes, scales and sums are identical: (x + shift) / smooth; per 64-group
// absmax ignoring NaN (vmaxps returns its second operand for a NaN first);
// s = max(a, 1e-10) / qmax; code = clamp(rne(v / s)) + offset, where min/max
// take the operands in the order that keeps a NaN like std::min/max do and
// the truncating conversion turns it into byte 0 like the scalar cast.
void quantize_act_row(const float* x, const float* smooth, int64_t k, bool act_unsigned, float* tmp,
                      uint8_t* codes, float* scales, int32_t* code_sums) {
  const __m512 shift = _mm512_set1_ps(act_unsigned ? svdq::kShift : 0.0f);
  for (int64_t i = 0; i < k; i += 16)
    _mm512_storeu_ps(tmp + i, _mm512_div_ps(_mm512_add_ps(_mm512_loadu_ps(x + i), shift), _mm512_loadu_ps(smooth + i)));
  const float qmax = act_unsigned ? 15.0f : 7.0f;
  const __m512 vmax = _mm512_set1_ps(qmax), vlo = _mm512_set1_ps(act_unsigned ? 0.0f : -7.0f);
  const __m512 offset = _mm512_set1_ps(act_unsigned ? 0.0f : 8.0f);
  const __m512i byte = _mm512_set1_epi32(0xFF);
  for (int64_t g = 0; g < k / svdq::kGroup; ++g) {
    const float* v = tmp + g * svdq::kGroup;
    __m512 amax = _mm512_setzero_ps();
    for (int q = 0; q < 4; ++q) amax = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(v + 16 * q)), amax);
    const float s = std::max(_mm512_reduce_max_ps(amax), 1e-10f) / qmax;
    const __m512 vs = _mm512_set1_ps(s);
    __m512i sum = _mm512_setzero_si512();
    for (int q = 0; q < 4; ++q) {
      __m512 c = _mm512_roundscale_ps(_mm512_div_ps(_mm512_loadu_ps(v + 16 * q), vs),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      c = _mm512_add_ps(_mm512_max_ps(vlo, _mm512_min_ps(vmax, c)), offset);
      const __m512i ci = _mm512_and_si512(_mm512_cvttps_epi32(c), byte);
      sum = _mm512_add_epi32(sum, ci);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + g * svdq::kGroup + 16 * q), _mm512_cvtepi32_epi8(ci));
    }
    scales[g] = s;
    code_sums[g] = _mm512_reduce_add_epi32(sum);
  }
}

// svdq::lora_down_row for R rows at once (each proj_down row is read once for
// all of them), 32 ranks per pass: lora[r][j] = lora[r][j] + x[r][i]·p[i][j]
// in i order, product rounded first, as the reference.
template <int R>
void lora_down_rows(const float* x, int64_t k, const float* proj_down, int64_t rank, float* lora) {
  for (int64_t j0 = 0; j0 < rank; j0 += 32) {
    const __mmask16 m0 = tail_mask(rank - j0), m1 = tail_mask(rank - j0 - 16);
    __m512 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t i = 0; i < k; ++i) {
      const __m512 p0 = _mm512_maskz_loadu_ps(m0, proj_down + i * rank + j0);
      const __m512 p1 = _mm512_maskz_loadu_ps(m1, proj_down + i * rank + j0 + 16);
      for (int r = 0; r < R; ++r) {
        const __m512 xi = _mm512_set1_ps(x[r * k + i]);
        acc[r][0] = _mm512_add_ps(acc[r][0], _mm512_mul_ps(xi, p0));
        acc[r][1] = _mm512_add_ps(acc[r][1], _mm512_mul_ps(xi, p1));
      }
    }
    for (int r = 0; r < R; ++r) {
      _mm512_mask_storeu_ps(lora + r * rank + j0, m0, acc[r][0]);
      _mm512_mask_storeu_ps(lora + r * rank + j0 + 16, m1, acc[r][1]);
    }
  }
}

inline __m512i bcast4(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(static_cast<int>(v));
}

template <int R, int CB>
void block(const SvdquantWeights& w, const SvdquantPacked& pk, const Acts& a, int64_t m0, int64_t p0, float* y) {
  const int64_t k8 = w.k / 8, np = pk.panels * 16, groups = a.groups;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512 out[R][CB];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < CB; ++c) out[r][c] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m512i acc[R][CB];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < CB; ++c) acc[r][c] = _mm512_setzero_si512();
    for (int64_t o = g * 8; o < g * 8 + 8; ++o) {
      __m512i lo[CB], hi[CB];
      for (int c = 0; c < CB; ++c) {
        const __m512i v = _mm512_loadu_si512(pk.weight.data() + ((p0 + c) * k8 + o) * 16);
        lo[c] = _mm512_and_si512(v, low4);
        hi[c] = _mm512_and_si512(_mm512_srli_epi32(v, 4), low4);
      }
      for (int r = 0; r < R; ++r) {
        const uint8_t* codes = a.codes.data() + (m0 + r) * a.k + o * 8;
        const __m512i a0 = bcast4(codes), a1 = bcast4(codes + 4);
        for (int c = 0; c < CB; ++c) {
          acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], a0, lo[c]);
          acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], a1, hi[c]);
        }
      }
    }
    for (int c = 0; c < CB; ++c) {
      const int64_t col = (p0 + c) * 16;
      const __m512i colterm = _mm512_loadu_si512(pk.colterm.data() + g * np + col);
      const __m512 ws = _mm512_loadu_ps(pk.wscale.data() + g * np + col);
      for (int r = 0; r < R; ++r) {
        const int64_t row = m0 + r;
        __m512i dot = _mm512_sub_epi32(acc[r][c], colterm);
        dot = _mm512_sub_epi32(dot, _mm512_set1_epi32(8 * a.sums[row * groups + g]));
        const __m512 sc = _mm512_mul_ps(_mm512_set1_ps(a.scales[row * groups + g]), ws);
        out[r][c] = _mm512_add_ps(out[r][c], _mm512_mul_ps(_mm512_cvtepi32_ps(dot), sc));
      }
    }
  }
  // y = (main + lora·proj_upᵀ) + bias, the low-rank sum in r order.
  for (int c = 0; c < CB; ++c) {
    const int64_t col = (p0 + c) * 16;
    const __mmask16 mask = tail_mask(w.n - col);
    for (int r = 0; r < R; ++r) {
      const float* lora = a.lora.data() + (m0 + r) * a.rank;
      __m512 low = _mm512_setzero_ps();
      for (int64_t j = 0; j < a.rank; ++j)
        low = _mm512_add_ps(low, _mm512_mul_ps(_mm512_set1_ps(lora[j]), _mm512_loadu_ps(pk.proj_up_t.data() + j * np + col)));
      __m512 v = _mm512_add_ps(out[r][c], low);
      if (!w.bias.empty()) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, w.bias.data() + col));
      _mm512_mask_storeu_ps(y + (m0 + r) * w.n + col, mask, v);
    }
  }
}

// Rows [m_begin, m_end) against CB panels from p, 4 rows at a time.
template <int CB>
void rows(const SvdquantWeights& w, const SvdquantPacked& pk, const Acts& a, int64_t m_begin, int64_t m_end,
          int64_t p, float* y) {
  int64_t m = m_begin;
  for (; m + 4 <= m_end; m += 4) block<4, CB>(w, pk, a, m, p, y);
  switch (m_end - m) {
    case 3: block<3, CB>(w, pk, a, m, p, y); break;
    case 2: block<2, CB>(w, pk, a, m, p, y); break;
    case 1: block<1, CB>(w, pk, a, m, p, y); break;
    default: break;
  }
}

// Panel pairs outer, rows inner: a pair (2·K/2 bytes) is fetched once and
// reused from L1/L2 by every row of the range. (Rows outer re-read the whole
// weight from L3 for every 4 rows: 3x slower at M = 4096.)
void run(const SvdquantWeights& w, const SvdquantPacked& pk, const Acts& a, int64_t m_begin, int64_t m_end,
         int64_t p_begin, int64_t p_end, float* y) {
  int64_t p = p_begin;
  for (; p + 2 <= p_end; p += 2) rows<2>(w, pk, a, m_begin, m_end, p, y);
  if (p < p_end) rows<1>(w, pk, a, m_begin, m_end, p, y);
}

}  // namespace

void svdquant_avx512(const SvdquantWeights& w, const SvdquantPacked& pk, const float* x, int64_t m, float* y) {
  Acts a(w, m);
  util::parallel_for(m, 4, [&](int64_t begin, int64_t end, int) {
    std::vector<float> tmp(w.k);
    for (int64_t r = begin; r < end; ++r)
      quantize_act_row(x + r * w.k, w.smooth.data(), w.k, w.act_unsigned, tmp.data(), a.codes.data() + r * w.k,
                       a.scales.data() + r * a.groups, a.sums.data() + r * a.groups);
    int64_t r = begin;
    for (; r + 4 <= end; r += 4)
      lora_down_rows<4>(x + r * w.k, w.k, w.proj_down.data(), w.rank, a.lora.data() + r * w.rank);
    for (; r < end; ++r) lora_down_rows<1>(x + r * w.k, w.k, w.proj_down.data(), w.rank, a.lora.data() + r * w.rank);
  });
  if (m <= 16) {
    // Memory-bound: each thread streams its own panels once.
    const int64_t pairs = (pk.panels + 1) / 2;
    util::parallel_for(pairs, 1, [&](int64_t begin, int64_t end, int) {
      run(w, pk, a, 0, m, begin * 2, std::min(end * 2, pk.panels), y);
    });
  } else {
    constexpr int64_t kRows = 128;  // codes of 128 rows (K bytes each) stay in L2
    util::parallel_for((m + kRows - 1) / kRows, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t b = begin; b < end; ++b) run(w, pk, a, b * kRows, std::min(m, (b + 1) * kRows), 0, pk.panels, y);
    });
  }
}

}  // namespace mixq::kernels::x86
