// AVX2 radix-4 Hadamard: stride 1 inside a ymm (a quadruple is one 128-bit
// lane), stride 4 on 128-bit quarters of each 16-float block, strides >= 16 on
// whole ymm. Same operations and order as hadamard_rotate_row (src/numeric), so results are
// bit-identical.
#include <immintrin.h>

#include "kernels/hadamard_fast.hpp"
#include "numeric/hadamard.hpp"

namespace mixq::kernels {
namespace {

inline __m256 quad_step(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 rev) {
  const __m256 half = _mm256_mul_ps(_mm256_set1_ps(0.5f),
                                    _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  return _mm256_sub_ps(half, rev);
}

inline __m128 quad_step4(__m128 a0, __m128 a1, __m128 a2, __m128 a3, __m128 rev) {
  const __m128 half = _mm_mul_ps(_mm_set1_ps(0.5f), _mm_add_ps(_mm_add_ps(a0, a1), _mm_add_ps(a2, a3)));
  return _mm_sub_ps(half, rev);
}

inline __m256 stage1(__m256 v) {
  return quad_step(_mm256_permute_ps(v, 0x00), _mm256_permute_ps(v, 0x55), _mm256_permute_ps(v, 0xAA),
                   _mm256_permute_ps(v, 0xFF), _mm256_permute_ps(v, 0x1B));
}

}  // namespace

void hadamard_row_avx2(float* row, int64_t k, int64_t g) {
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) _mm256_storeu_ps(row + i, stage1(_mm256_loadu_ps(row + i)));
  if (i < k) {  // only possible for g == 4: one trailing group of 4
    hadamard_rotate_row(row + i, k - i, g);
  }
  if (g == 4) return;
  for (int64_t off = 0; off < k; off += g) {
    float* v = row + off;
    // Stride 4: quadruples (i, i+4, i+8, i+12) inside each 16-float block.
    for (int64_t b = 0; b < g; b += 16) {
      const __m128 a0 = _mm_loadu_ps(v + b), a1 = _mm_loadu_ps(v + b + 4);
      const __m128 a2 = _mm_loadu_ps(v + b + 8), a3 = _mm_loadu_ps(v + b + 12);
      _mm_storeu_ps(v + b, quad_step4(a0, a1, a2, a3, a3));
      _mm_storeu_ps(v + b + 4, quad_step4(a0, a1, a2, a3, a2));
      _mm_storeu_ps(v + b + 8, quad_step4(a0, a1, a2, a3, a1));
      _mm_storeu_ps(v + b + 12, quad_step4(a0, a1, a2, a3, a0));
    }
    for (int64_t s = 16; s < g; s *= 4) {
      for (int64_t block = 0; block < g; block += 4 * s) {
        for (int64_t j = block; j < block + s; j += 8) {
          const __m256 a0 = _mm256_loadu_ps(v + j), a1 = _mm256_loadu_ps(v + j + s);
          const __m256 a2 = _mm256_loadu_ps(v + j + 2 * s), a3 = _mm256_loadu_ps(v + j + 3 * s);
          _mm256_storeu_ps(v + j, quad_step(a0, a1, a2, a3, a3));
          _mm256_storeu_ps(v + j + s, quad_step(a0, a1, a2, a3, a2));
          _mm256_storeu_ps(v + j + 2 * s, quad_step(a0, a1, a2, a3, a1));
          _mm256_storeu_ps(v + j + 3 * s, quad_step(a0, a1, a2, a3, a0));
        }
      }
    }
  }
}

}  // namespace mixq::kernels
