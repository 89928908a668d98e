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

#include "kernels/parallel.hpp"
#include "kernels/ref/svdquant_common.hpp"
#include "kernels/x86/svdquant_w4a4.hpp"

namespace mixq::kernels::x86 {
namespace {

struct Acts {
  int64_t m = 0, k = 0, groups = 0, rank = 0;
  std::vector<uint8_t> codes;   // [M][K]
  std::vector<float> scales;    // [M][groups]
  std::vector<int32_t> sums;    // [M][groups]
  std::vector<float> lora;      // [M][R]
};

inline __mmask16 tail_mask(int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1u);
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

template <int R>
void rows(const SvdquantWeights& w, const SvdquantPacked& pk, const Acts& a, int64_t m0, int64_t p_begin,
          int64_t p_end, float* y) {
  int64_t p = p_begin;
  for (; p + 2 <= p_end; p += 2) block<R, 2>(w, pk, a, m0, p, y);
  if (p < p_end) block<R, 1>(w, pk, a, m0, p, y);
}

void run(const SvdquantWeights& w, const SvdquantPacked& pk, const Acts& a, int64_t m_begin, int64_t m_end,
         int64_t p_begin, int64_t p_end, float* y) {
  int64_t m = m_begin;
  for (; m + 4 <= m_end; m += 4) rows<4>(w, pk, a, m, p_begin, p_end, y);
  switch (m_end - m) {
    case 3: rows<3>(w, pk, a, m, p_begin, p_end, y); break;
    case 2: rows<2>(w, pk, a, m, p_begin, p_end, y); break;
    case 1: rows<1>(w, pk, a, m, p_begin, p_end, y); break;
    default: break;
  }
}

}  // namespace

void svdquant_avx512(const SvdquantWeights& w, const SvdquantPacked& pk, const float* x, int64_t m, float* y) {
  Acts a;
  a.m = m;
  a.k = w.k;
  a.groups = w.k / svdq::kGroup;
  a.rank = w.rank;
  a.codes.resize(static_cast<size_t>(m * w.k));
  a.scales.resize(static_cast<size_t>(m * a.groups));
  a.sums.resize(a.scales.size());
  a.lora.resize(static_cast<size_t>(m * w.rank));
  parallel_for(m, 4, [&](int64_t begin, int64_t end, int) {
    std::vector<float> tmp(w.k);
    for (int64_t r = begin; r < end; ++r) {
      svdq::quantize_act_row(x + r * w.k, w.smooth.data(), w.k, w.act_unsigned, tmp.data(),
                             a.codes.data() + r * w.k, a.scales.data() + r * a.groups, a.sums.data() + r * a.groups);
      svdq::lora_down_row(x + r * w.k, w.proj_down.data(), w.k, w.rank, a.lora.data() + r * w.rank);
    }
  });
  if (m <= 16) {
    // Memory-bound: each thread streams its own panels once.
    const int64_t pairs = (pk.panels + 1) / 2;
    parallel_for(pairs, 1, [&](int64_t begin, int64_t end, int) {
      run(w, pk, a, 0, m, begin * 2, std::min(end * 2, pk.panels), y);
    });
  } else {
    constexpr int64_t kRows = 32;
    parallel_for((m + kRows - 1) / kRows, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t b = begin; b < end; ++b) run(w, pk, a, b * kRows, std::min(m, (b + 1) * kRows), 0, pk.panels, y);
    });
  }
}

}  // namespace mixq::kernels::x86
