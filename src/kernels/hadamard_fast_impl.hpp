#pragma once
// The radix-4 Hadamard row transform over a vector type V (x86/simd_traits.hpp),
// compiled once per target by hadamard_fast.avx2.cpp / hadamard_fast.avx512.cpp.
// Same stages, in the same order per element and with the same fp32
// operations as hadamard_rotate_row (src/numeric), so every target is
// bit-identical to it: for a quadruple (a0..a3) at stride s,
// half = 0.5·((a0+a1)+(a2+a3)) and out[d] = half - a[3-d].
//  - stride 1: quadruples are 4 adjacent lanes, one 128-bit quarter (in-lane
//    permutes);
//  - stride 4: quadruples are the four quarters of each 16-float block (one
//    zmm, or two ymm), combined with quarter broadcasts;
//  - strides >= 16: four whole vectors at distance s.
// Stages 1 and 4 touch each 16-float block alone, so both run per block in
// registers before the wide stages.
#include <cstdint>

#include "kernels/hadamard_fast.hpp"
#include "kernels/x86/simd_traits.hpp"
#include "numeric/hadamard.hpp"

namespace mixq::kernels::x86 {
namespace {

template <class V>
inline typename V::F quad_step(typename V::F a0, typename V::F a1, typename V::F a2, typename V::F a3,
                               typename V::F rev) {
  const typename V::F half = V::mul(V::set1(0.5f), V::add(V::add(a0, a1), V::add(a2, a3)));
  return V::sub(half, rev);
}

// Stride 1: the quadruple of each lane is its own 128-bit quarter.
template <class V>
inline typename V::F stage1(typename V::F v) {
  return quad_step<V>(V::template permute<0x00>(v), V::template permute<0x55>(v), V::template permute<0xAA>(v),
                      V::template permute<0xFF>(v), V::template permute<0x1B>(v));
}

// Stages 1 and 4 of the 16 floats at p (one zmm, or two ymm v0 / v1).
template <class V>
inline void block16(float* p) {
  constexpr int kVecs = 16 / V::kLanes;
  const typename V::F v0 = stage1<V>(V::load(p));
  const typename V::F v1 = kVecs == 2 ? stage1<V>(V::load(p + V::kLanes)) : v0;
  for (int h = 0; h < kVecs; ++h)
    V::store(p + h * V::kLanes, quad_step<V>(V::template quarter<0>(v0, v1), V::template quarter<1>(v0, v1),
                                             V::template quarter<2>(v0, v1), V::template quarter<3>(v0, v1),
                                             V::quarters_reversed(v0, v1, h)));
}

template <class V>
__attribute__((always_inline)) inline void hadamard_row(float* row, int64_t k, int64_t g) {
  constexpr int64_t L = V::kLanes;
  if (g == 4) {
    int64_t i = 0;
    for (; i + L <= k; i += L) V::store(row + i, stage1<V>(V::load(row + i)));
    if (i < k) hadamard_rotate_row(row + i, k - i, g);
    return;
  }
  // g >= 16 (a power of 4), so k is a multiple of 16.
  for (int64_t i = 0; i < k; i += 16) block16<V>(row + i);
  for (int64_t off = 0; off < k; off += g) {
    float* v = row + off;
    for (int64_t s = 16; s < g; s *= 4) {
      for (int64_t block = 0; block < g; block += 4 * s) {
        for (int64_t i = block; i < block + s; i += L) {
          const typename V::F a0 = V::load(v + i), a1 = V::load(v + i + s);
          const typename V::F a2 = V::load(v + i + 2 * s), a3 = V::load(v + i + 3 * s);
          V::store(v + i, quad_step<V>(a0, a1, a2, a3, a3));
          V::store(v + i + s, quad_step<V>(a0, a1, a2, a3, a2));
          V::store(v + i + 2 * s, quad_step<V>(a0, a1, a2, a3, a1));
          V::store(v + i + 3 * s, quad_step<V>(a0, a1, a2, a3, a0));
        }
      }
    }
  }
}

}  // namespace
}  // namespace mixq::kernels::x86
