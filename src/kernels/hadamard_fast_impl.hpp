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
//    zmm, or two ymm);
//  - strides >= 16: four whole vectors at distance s.
// The sum (a0+a1)+(a2+a3) of a lane's quadruple is formed by two swaps and
// two adds: lane 0 adds a1 to a0, lane 1 a0 to a1, the same sum (IEEE
// addition commutes), and likewise for the pairs: 2 lane moves where
// broadcasting each member took 4.
// A group of up to kGroupInRegisters floats runs every stage in registers,
// read from the source once and stored once; wider groups then run their
// remaining stages as passes over the row.
#include <cstdint>

#include "kernels/hadamard_fast.hpp"
#include "kernels/stream_prefetch.hpp"
#include "kernels/x86/simd_traits.hpp"
#include "numeric/hadamard.hpp"

namespace mixq::kernels::x86 {
namespace {

template <class V>
inline typename V::F quad_out(typename V::F sum, typename V::F rev) {
  return V::sub(V::mul(V::set1(0.5f), sum), rev);
}

template <class V>
inline typename V::F quad_step(typename V::F a0, typename V::F a1, typename V::F a2, typename V::F a3,
                               typename V::F rev) {
  return quad_out<V>(V::add(V::add(a0, a1), V::add(a2, a3)), rev);
}

// Stride 1: the quadruple of each lane is its own 128-bit quarter.
template <class V>
inline typename V::F stage1(typename V::F v) {
  const typename V::F pairs = V::add(v, V::template permute<0xB1>(v));  // a0+a1 | a1+a0 | a2+a3 | a3+a2
  return quad_out<V>(V::add(pairs, V::template permute<0x4E>(pairs)), V::template permute<0x1B>(v));
}

// Stride 4 over the 16 floats in v[0 .. 16 / kLanes): the quarters of the block.
template <class V>
inline void stage4(typename V::F* v) {
  using F = typename V::F;
  if constexpr (V::kLanes == 16) {
    const F pairs = V::add(v[0], V::template swap_quarters<0xB1>(v[0]));
    v[0] = quad_out<V>(V::add(pairs, V::template swap_quarters<0x4E>(pairs)), V::template swap_quarters<0x1B>(v[0]));
  } else {  // v[0] holds quarters 0, 1 and v[1] quarters 2, 3
    const F p0 = V::add(v[0], V::swap_halves(v[0])), p1 = V::add(v[1], V::swap_halves(v[1]));
    const F out0 = quad_out<V>(V::add(p0, p1), V::swap_halves(v[1]));
    v[1] = quad_out<V>(V::add(p1, p0), V::swap_halves(v[0]));
    v[0] = out0;
  }
}

// The widest group whose every stage runs in registers: 16 vectors of floats
// at most (AVX-512: 256; AVX2: 64, as 256 would take 32 of its 16 ymm).
template <class V>
constexpr int64_t kGroupInRegisters = V::kLanes == 16 ? 256 : 64;

// The stage at stride S vectors over the NV vectors of a group in registers,
// then the stages after it.
template <class V, int NV, int S>
__attribute__((always_inline)) inline void wide_stages(typename V::F* r) {
  if constexpr (S < NV) {
    MIXQ_UNROLL
    for (int block = 0; block < NV; block += 4 * S)
      MIXQ_UNROLL
      for (int i = block; i < block + S; ++i) {
        const typename V::F sum = V::add(V::add(r[i], r[i + S]), V::add(r[i + 2 * S], r[i + 3 * S]));
        const typename V::F a0 = r[i], a1 = r[i + S];
        r[i] = quad_out<V>(sum, r[i + 3 * S]);
        r[i + S] = quad_out<V>(sum, r[i + 2 * S]);
        r[i + 2 * S] = quad_out<V>(sum, a1);
        r[i + 3 * S] = quad_out<V>(sum, a0);
      }
    wide_stages<V, NV, 4 * S>(r);
  }
}

// Every stage of the G floats at src (G = 16, 64 or 256), in registers,
// stored to dst (which may be src).
template <class V, int G>
__attribute__((always_inline)) inline void group_in_registers(const float* src, float* dst) {
  constexpr int L = V::kLanes, NV = G / L, B = 16 / L;  // vectors per group, per 16-float block
  typename V::F r[NV];
  MIXQ_UNROLL
  for (int v = 0; v < NV; v += B) {
    prefetch_activations_ahead(src + v * L);
    MIXQ_UNROLL
    for (int h = 0; h < B; ++h) r[v + h] = stage1<V>(V::load(src + (v + h) * L));
    stage4<V>(r + v);
  }
  wide_stages<V, NV, B>(r);  // strides of 16, 64 floats
  MIXQ_UNROLL
  for (int v = 0; v < NV; ++v) V::store(dst + v * L, r[v]);
}

// The row of k floats at src, rotated in groups of g, to dst (which may be
// src).
template <class V>
__attribute__((always_inline)) inline void hadamard_row(const float* src, float* dst, int64_t k, int64_t g) {
  constexpr int64_t L = V::kLanes;
  if (g == 4) {
    int64_t i = 0;
    for (; i + L <= k; i += L) V::store(dst + i, stage1<V>(V::load(src + i)));
    if (i < k) {
      for (int64_t j = i; j < k; ++j) dst[j] = src[j];
      hadamard_rotate_row(dst + i, k - i, g);
    }
    return;
  }
  // g >= 16 (a power of 4), so k is a multiple of 16.
  const int64_t in_registers = std::min(g, kGroupInRegisters<V>);
  for (int64_t off = 0; off < k; off += in_registers) {
    if (in_registers == 16) group_in_registers<V, 16>(src + off, dst + off);
    else if (in_registers == 64) group_in_registers<V, 64>(src + off, dst + off);
    else if constexpr (kGroupInRegisters<V> >= 256) group_in_registers<V, 256>(src + off, dst + off);
  }
  for (int64_t off = 0; off < k; off += g) {
    float* v = dst + off;
    for (int64_t s = in_registers; s < g; s *= 4) {
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
