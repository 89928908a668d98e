// AVX-512 radix-4 Hadamard. Stages with stride 1 and 4 live inside one zmm of
// 16 floats (a quadruple is 4 adjacent lanes, or the 4 128-bit lanes), so they
// are lane permutes; strides >= 16 combine 4 whole zmm. Every lane computes
// half = 0.5·((a0+a1)+(a2+a3)), out = half - a[3-d] exactly as the scalar code.
#include <immintrin.h>

#include "kernels/hadamard_fast.hpp"
#include "numeric/hadamard.hpp"

namespace mixq::kernels {
namespace {

inline __m512 quad_step(__m512 a0, __m512 a1, __m512 a2, __m512 a3, __m512 rev) {
  const __m512 half = _mm512_mul_ps(_mm512_set1_ps(0.5f),
                                    _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  return _mm512_sub_ps(half, rev);
}

// Stride 1: quadruples are lanes 4q..4q+3 within each 128-bit lane.
inline __m512 stage1(__m512 v) {
  return quad_step(_mm512_permute_ps(v, 0x00), _mm512_permute_ps(v, 0x55),
                   _mm512_permute_ps(v, 0xAA), _mm512_permute_ps(v, 0xFF),
                   _mm512_permute_ps(v, 0x1B));
}

// Stride 4: quadruples are the four 128-bit lanes.
inline __m512 stage4(__m512 v) {
  return quad_step(_mm512_shuffle_f32x4(v, v, 0x00), _mm512_shuffle_f32x4(v, v, 0x55),
                   _mm512_shuffle_f32x4(v, v, 0xAA), _mm512_shuffle_f32x4(v, v, 0xFF),
                   _mm512_shuffle_f32x4(v, v, 0x1B));
}

}  // namespace

void hadamard_row_avx512(float* row, int64_t k, int64_t g) {
  if (g == 4) {
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) _mm512_storeu_ps(row + i, stage1(_mm512_loadu_ps(row + i)));
    if (i < k) hadamard_rotate_row(row + i, k - i, g);
    return;
  }
  // g >= 16: both in-register stages per 16 floats, then the wide stages.
  for (int64_t i = 0; i < k; i += 16)
    _mm512_storeu_ps(row + i, stage4(stage1(_mm512_loadu_ps(row + i))));
  for (int64_t off = 0; off < k; off += g) {
    float* v = row + off;
    for (int64_t s = 16; s < g; s *= 4) {
      for (int64_t block = 0; block < g; block += 4 * s) {
        for (int64_t i = block; i < block + s; i += 16) {
          const __m512 a0 = _mm512_loadu_ps(v + i), a1 = _mm512_loadu_ps(v + i + s);
          const __m512 a2 = _mm512_loadu_ps(v + i + 2 * s), a3 = _mm512_loadu_ps(v + i + 3 * s);
          _mm512_storeu_ps(v + i, quad_step(a0, a1, a2, a3, a3));
          _mm512_storeu_ps(v + i + s, quad_step(a0, a1, a2, a3, a2));
          _mm512_storeu_ps(v + i + 2 * s, quad_step(a0, a1, a2, a3, a1));
          _mm512_storeu_ps(v + i + 3 * s, quad_step(a0, a1, a2, a3, a0));
        }
      }
    }
  }
}

}  // namespace mixq::kernels
