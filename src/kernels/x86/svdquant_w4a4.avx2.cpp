// AVX2 SVDQuant W4A4 linear (svdquant_w4a4.hpp), bit-identical to
// kernels::svdquant_ref like the AVX-512 kernel.
//
// Same packed weights as the AVX-512 kernel: a 16-column panel's 64-byte
// octet row is read as two ymm halves (columns 0-7, 8-15). The register block
// is R = 2 rows × one panel (2 halves): 4 int32 group accumulators + 4 fp32
// outputs + 4 unpacked weight vectors + 2 broadcasts = 14 of the 16 ymm.
// The group dot uses `vpdpbusd ymm` (AVX-VNNI) when the CPU has it, else
// vpmaddubsw + vpmaddwd: codes and weight offsets are both 0..15, so the
// 16-bit pair sums (<= 450) cannot saturate and the result is the same exact
// int32. Activation preparation is the reference's scalar code (it is a small
// part of the time; the AVX-512 kernel has a vectorised copy).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// g++ contracts a*b+c into FMA when -mfma is on; the reference (baseline
// flags) cannot, so keep every product rounded.
#pragma GCC optimize("fp-contract=off")
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu.hpp"
#include "util/parallel.hpp"
#include "kernels/ref/svdquant_common.hpp"
#include "kernels/x86/svdquant_w4a4.hpp"

namespace mixq::kernels::x86 {
namespace {

using Acts = SvdquantActs;

inline __m256i bcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Lanes of an 8-float vector that hold one of `count` valid values.
inline __m256i lane_mask(int64_t count) {
  const int c = static_cast<int>(std::clamp<int64_t>(count, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// acc + Σ_4 codes·weights per int32 lane (both operands 0..15).
template <bool Vnni>
inline __m256i dot4(__m256i acc, __m256i codes, __m256i weights) {
  if constexpr (Vnni) return _mm256_dpbusd_avx_epi32(acc, codes, weights);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(codes, weights), _mm256_set1_epi16(1)));
}

// Rows [m0, m0+R) × panel p: the same operations, in the same order, as the
// AVX-512 block (and so the reference), 8 lanes at a time.
template <int R, bool Vnni>
void block(const SvdquantWeights& w, const SvdquantPacked& pk, const Acts& a, int64_t m0, int64_t p, float* y) {
  const int64_t k8 = w.k / 8, np = pk.panels * 16, groups = a.groups;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 out[R][2];
  for (int r = 0; r < R; ++r) out[r][0] = out[r][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m256i acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int64_t o = g * 8; o < g * 8 + 8; ++o) {
      const uint32_t* row = pk.weight.data() + (p * k8 + o) * 16;
      __m256i lo[2], hi[2];
      for (int h = 0; h < 2; ++h) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 8 * h));
        lo[h] = _mm256_and_si256(v, low4);
        hi[h] = _mm256_and_si256(_mm256_srli_epi32(v, 4), low4);
      }
      for (int r = 0; r < R; ++r) {
        const uint8_t* codes = a.codes.data() + (m0 + r) * a.k + o * 8;
        const __m256i a0 = bcast4(codes), a1 = bcast4(codes + 4);
        for (int h = 0; h < 2; ++h) {
          acc[r][h] = dot4<Vnni>(acc[r][h], a0, lo[h]);
          acc[r][h] = dot4<Vnni>(acc[r][h], a1, hi[h]);
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      const int64_t col = p * 16 + 8 * h;
      const __m256i colterm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pk.colterm.data() + g * np + col));
      const __m256 ws = _mm256_loadu_ps(pk.wscale.data() + g * np + col);
      for (int r = 0; r < R; ++r) {
        const int64_t row = m0 + r;
        __m256i dot = _mm256_sub_epi32(acc[r][h], colterm);
        dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(8 * a.sums[row * groups + g]));
        const __m256 sc = _mm256_mul_ps(_mm256_set1_ps(a.scales[row * groups + g]), ws);
        out[r][h] = _mm256_add_ps(out[r][h], _mm256_mul_ps(_mm256_cvtepi32_ps(dot), sc));
      }
    }
  }
  // y = (main + lora·proj_upᵀ) + bias, the low-rank sum in r order.
  for (int h = 0; h < 2; ++h) {
    const int64_t col = p * 16 + 8 * h;
    const __m256i mask = lane_mask(w.n - col);
    for (int r = 0; r < R; ++r) {
      const float* lora = a.lora.data() + (m0 + r) * a.rank;
      __m256 low = _mm256_setzero_ps();
      for (int64_t j = 0; j < a.rank; ++j)
        low = _mm256_add_ps(low, _mm256_mul_ps(_mm256_set1_ps(lora[j]), _mm256_loadu_ps(pk.proj_up_t.data() + j * np + col)));
      __m256 v = _mm256_add_ps(out[r][h], low);
      if (!w.bias.empty()) v = _mm256_add_ps(v, _mm256_maskload_ps(w.bias.data() + col, mask));
      _mm256_maskstore_ps(y + (m0 + r) * w.n + col, mask, v);
    }
  }
}

// Panels outer, rows inner (a panel is fetched once and reused from L1/L2 by
// every row of the range), 2 rows at a time.
template <bool Vnni>
void run(const SvdquantWeights& w, const SvdquantPacked& pk, const Acts& a, int64_t m_begin, int64_t m_end,
         int64_t p_begin, int64_t p_end, float* y) {
  for (int64_t p = p_begin; p < p_end; ++p) {
    int64_t m = m_begin;
    for (; m + 2 <= m_end; m += 2) block<2, Vnni>(w, pk, a, m, p, y);
    if (m < m_end) block<1, Vnni>(w, pk, a, m, p, y);
  }
}

template <bool Vnni>
void forward(const SvdquantWeights& w, const SvdquantPacked& pk, const float* x, int64_t m, float* y) {
  Acts a(w, m);
  util::parallel_for(m, 4, [&](int64_t begin, int64_t end, int) {
    std::vector<float> tmp(static_cast<size_t>(w.k));
    for (int64_t r = begin; r < end; ++r) {
      svdq::quantize_act_row(x + r * w.k, w.smooth.data(), w.k, w.act_unsigned, tmp.data(), a.codes.data() + r * w.k,
                             a.scales.data() + r * a.groups, a.sums.data() + r * a.groups);
      svdq::lora_down_row(x + r * w.k, w.proj_down.data(), w.k, w.rank, a.lora.data() + r * w.rank);
    }
  });
  if (m <= 16) {
    // Memory-bound: each thread streams its own panels once.
    util::parallel_for(pk.panels, 1, [&](int64_t begin, int64_t end, int) { run<Vnni>(w, pk, a, 0, m, begin, end, y); });
  } else {
    constexpr int64_t kRows = 128;  // codes of 128 rows (K bytes each) stay in L2
    util::parallel_for((m + kRows - 1) / kRows, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t b = begin; b < end; ++b)
        run<Vnni>(w, pk, a, b * kRows, std::min(m, (b + 1) * kRows), 0, pk.panels, y);
    });
  }
}

}  // namespace

void svdquant_avx2(const SvdquantWeights& w, const SvdquantPacked& pk, const float* x, int64_t m, float* y,
                   bool avx_vnni) {
  if (avx_vnni) forward<true>(w, pk, x, m, y);
  else forward<false>(w, pk, x, m, y);
}

}  // namespace mixq::kernels::x86
