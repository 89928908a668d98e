// AVX2 + FMA AWQ W4A16 linear (awq_w4a16.hpp), same packed weights as the
// AVX-512 kernel. AVX2 has no bf16 dot product, so the codes are decoded in
// registers to f32 weights and multiplied with the fp32 activations (x is not
// rounded at all, unlike the AVX-512 bf16 path):
//   w = q·s + z'  with  z' = z − 8·s  (one FMA per 8 weights; q ∈ 0..15 is exact)
// The scale is folded into the decoded weight, so there is one accumulator
// per (row, 8 columns) over all of K and no per-group epilogue. Register
// block: R ≤ 4 rows × one 16-column panel (8 ymm accumulators). Small M splits
// panels over the threads (weights streamed once); larger M splits rows into
// blocks of 32 whose activations stay in L2 while every panel passes by.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "util/parallel.hpp"
#include "kernels/x86/awq_w4a16.hpp"

namespace mixq::kernels::x86 {
namespace {

// Stores 8 outputs (+ bias), only the first `count` (1..8) of them.
inline void store8(float* y, const float* bias, __m256 v, int64_t count) {
  if (count >= 8) {
    if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias));
    _mm256_storeu_ps(y, v);
    return;
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lane);
  if (bias) v = _mm256_add_ps(v, _mm256_maskload_ps(bias, mask));
  _mm256_maskstore_ps(y, mask, v);
}

// Rows m0..m0+R−1 against panel p.
template <int R>
void block(const AwqPacked& w, const float* x, int64_t m0, int64_t p, float* y) {
  const int64_t half = w.k / 2, np = w.panels * 16, steps = w.group / 2, groups = w.k / w.group;
  const __m256i low4 = _mm256_set1_epi32(0x0F);
  const __m256 eight = _mm256_set1_ps(8.0f);
  const uint8_t* codes = w.codes.data() + p * half * 16;
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    const float* sp = w.scale.data() + g * np + p * 16;
    const float* zp = w.zeros.data() + g * np + p * 16;
    __m256 s[2], z[2];
    for (int h = 0; h < 2; ++h) {
      s[h] = _mm256_loadu_ps(sp + 8 * h);
      z[h] = _mm256_fnmadd_ps(eight, s[h], _mm256_loadu_ps(zp + 8 * h));  // z − 8s
    }
    for (int64_t j = g * steps; j < (g + 1) * steps; ++j) {
      for (int h = 0; h < 2; ++h) {
        // Bytes of columns 16p+8h .. +7: low nibble = k 2j, high nibble = k 2j+1.
        const auto* bytes = reinterpret_cast<const __m128i*>(codes + j * 16 + 8 * h);
        const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(bytes));  // unaligned-safe 8-byte load
        const __m256 w0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v, low4)), s[h], z[h]);
        const __m256 w1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)), s[h], z[h]);
        for (int r = 0; r < R; ++r) {
          const float* xr = x + (m0 + r) * w.k + 2 * j;
          acc[r][h] = _mm256_fmadd_ps(w0, _mm256_broadcast_ss(xr), acc[r][h]);
          acc[r][h] = _mm256_fmadd_ps(w1, _mm256_broadcast_ss(xr + 1), acc[r][h]);
        }
      }
    }
  }
  for (int h = 0; h < 2; ++h) {
    const int64_t col = p * 16 + 8 * h;
    if (col >= w.n) break;
    const float* bias = w.bias.empty() ? nullptr : w.bias.data() + col;
    for (int r = 0; r < R; ++r) store8(y + (m0 + r) * w.n + col, bias, acc[r][h], w.n - col);
  }
}

void run(const AwqPacked& w, const float* x, int64_t m_begin, int64_t m_end, int64_t p_begin, int64_t p_end,
         float* y) {
  for (int64_t p = p_begin; p < p_end; ++p) {
    int64_t m = m_begin;
    for (; m + 4 <= m_end; m += 4) block<4>(w, x, m, p, y);
    switch (m_end - m) {
      case 3: block<3>(w, x, m, p, y); break;
      case 2: block<2>(w, x, m, p, y); break;
      case 1: block<1>(w, x, m, p, y); break;
      default: break;
    }
  }
}

}  // namespace

void awq_avx2(const AwqPacked& w, const float* x, int64_t m, float* y) {
  if (m <= 16) {
    util::parallel_for(w.panels, 1, [&](int64_t begin, int64_t end, int) { run(w, x, 0, m, begin, end, y); });
  } else {
    constexpr int64_t kRows = 32;
    util::parallel_for((m + kRows - 1) / kRows, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t b = begin; b < end; ++b) run(w, x, b * kRows, std::min(m, (b + 1) * kRows), 0, w.panels, y);
    });
  }
}

}  // namespace mixq::kernels::x86
