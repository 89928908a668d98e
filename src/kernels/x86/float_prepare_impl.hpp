#pragma once
// Activation preparation for the float GEMM cores (ActPrep, float_gemm.hpp):
// the FP8 / MXFP8 quantizers' values (or bf16 rounding) as f32 rows or as
// bf16 pairs, over a vector type V, compiled per target by
// float_gemm.avx2.cpp and float_gemm.avx512.cpp.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/stream_prefetch.hpp"
#include "kernels/x86/float_gemm_impl.hpp"
#include "mixq/error.hpp"
#include "util/parallel.hpp"

namespace mixq::kernels::x86 {
namespace {

// RNE of |v| (finite or NaN, already clamped) to a minifloat grid kept in f32:
// normals (>= min_normal) keep `Mant` mantissa bits, subnormals sit on the
// grid `sub_step`; the sign is put back afterwards. NaN stays NaN (its
// payload only grows toward the kept bits).
template <class V, int Mant>
inline typename V::F round_minifloat(typename V::F v, float min_normal, float sub_step) {
  using I = typename V::I;
  const I sign = V::andi(V::as_int(v), V::set1i(INT32_MIN));
  const typename V::F a = V::abs(v);
  const I u = V::as_int(a);
  constexpr int drop = 23 - Mant;
  const I odd = V::andi(V::template srli<drop>(u), V::set1i(1));
  I r = V::addi(u, V::addi(V::set1i((1 << (drop - 1)) - 1), odd));
  r = V::andi(r, V::set1i(static_cast<int32_t>(~((1u << drop) - 1u))));
  const typename V::F sub = V::mul(V::round(V::mul(a, V::set1(1.0f / sub_step))), V::set1(sub_step));
  const typename V::F mag = V::select(V::lt(a, V::set1(min_normal)), sub, V::as_float(r));
  return V::as_float(V::ori(V::as_int(mag), sign));
}

// clamp(v, -hi, hi) keeping NaN (max/min return the second operand on NaN).
template <class V>
inline typename V::F clamp_keep_nan(typename V::F v, float hi) {
  v = V::max(V::set1(-hi), v);
  return V::min(V::set1(hi), v);
}

template <class V>
inline typename V::F fp8_value(typename V::F v, ActPrep prep) {
  if (prep == ActPrep::e5m2) return round_minifloat<V, 2>(clamp_keep_nan<V>(v, 57344.0f), 0x1p-14f, 0x1p-16f);
  return round_minifloat<V, 3>(clamp_keep_nan<V>(v, 448.0f), 0x1p-6f, 0x1p-9f);
}

// ceil(log2(r)) of a positive finite f32, from its bits (the reference
// quantizer's frexp, exactly, without a libm call per block): a normal r =
// 2^(E-127)·1.m is a power of two when m = 0; a subnormal r = m·2^-149.
inline int ceil_log2(float r) {
  const uint32_t u = std::bit_cast<uint32_t>(r);
  const uint32_t biased = u >> 23, m = u & 0x7FFFFF;
  if (biased == 0) return 31 - std::countl_zero(m) - 149 + ((m & (m - 1)) != 0);  // + 1 unless m = 2^j
  return static_cast<int>(biased) - 127 + (m != 0);
}

// 2^(e-127) for an E8M0 exponent e in 0 .. 254, from its bits (e = 0: the
// subnormal 2^-127), as std::ldexp(1.0f, e - 127) gives it.
inline float pow2_e8m0(int e) { return std::bit_cast<float>(e == 0 ? 0x00400000u : static_cast<uint32_t>(e) << 23); }

constexpr int64_t kPrepChunk = 32;  // floats prepared at a time (one MXFP8 block)

// x[k0, k0+32) of one row (zeros past k) as the prepared values v[0..Q).
// `round` and `none` leave x as is.
template <class V>
inline void prepare_values(const float* row, int64_t k, int64_t k0, ActPrep prep, float inv,
                           typename V::F* v) {
  constexpr int L = V::kLanes, Q = kPrepChunk / L;
  MIXQ_UNROLL
  for (int64_t b = 0; b < kPrepChunk * 4; b += 64)
    prefetch_activations_ahead(reinterpret_cast<const char*>(row + k0) + b);
  MIXQ_UNROLL
  for (int q = 0; q < Q; ++q) v[q] = V::load_first(row + k0 + q * L, k - k0 - q * L);
  if (prep == ActPrep::e4m3 || prep == ActPrep::e5m2) {
    MIXQ_UNROLL
    for (int q = 0; q < Q; ++q) v[q] = fp8_value<V>(V::mul(v[q], V::set1(inv)), prep);
  } else if (prep == ActPrep::mxfp8) {
    // §3.3: a = max|x| (NaN ignored), e = clamp(ceil(log2(max(a/448, 2^-127))) + 127, 0, 254),
    // codes = e4m3(clamp(x / 2^(e-127), ±448)); the GEMM uses code·e8m0(e), e8m0(0) = 0.
    typename V::F amax = V::zero();
    MIXQ_UNROLL
    for (int q = 0; q < Q; ++q) amax = V::max(V::abs(v[q]), amax);
    const float a = V::reduce_max(amax);
    if (a == 0.0f) {
      for (int q = 0; q < Q; ++q) v[q] = V::zero();
      return;
    }
    const float ratio = a / 448.0f;
    const int e = std::isfinite(ratio) ? std::clamp(ceil_log2(std::max(ratio, 0x1p-127f)) + 127, 0, 254) : 254;
    // x / 2^(e-127) as x · 2^(127-e): one rounding of the same exact
    // quotient (every 2^(127-e), e = 0 .. 254, is an f32), a multiply instead
    // of a division per value.
    const typename V::F inv = V::set1(pow2_e8m0(254 - e));
    const typename V::F back = V::set1(e == 0 ? 0.0f : pow2_e8m0(e));
    MIXQ_UNROLL
    for (int q = 0; q < Q; ++q) v[q] = V::mul(fp8_value<V>(V::mul(v[q], inv), ActPrep::e4m3), back);
  }
}

template <class V>
void prepare_f32(const float* x, int64_t m, int64_t k, int64_t cols, ActPrep prep, float inv_scale, float* out) {
  if (k > cols) fail("float gemm: activation has {} columns, the weight only {}", k, cols);
  if constexpr (V::kLanes == 8) {
    if (prep == ActPrep::round) fail("float gemm: the AVX2 path computes in f32; bf16 rounding is avx512's");
  }
  if (prep == ActPrep::mxfp8 && cols % 32 != 0) fail("float gemm: MXFP8 needs 32-blocks, {} columns", cols);
  constexpr int L = V::kLanes, Q = kPrepChunk / L;
  util::parallel_for(m, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = x + r * k;
      float* dst = out + r * cols;
      for (int64_t k0 = 0; k0 < cols; k0 += kPrepChunk) {
        typename V::F v[Q];
        prepare_values<V>(row, k, k0, prep, inv_scale, v);
        if constexpr (V::kLanes == 16) {
          if (prep == ActPrep::round)
            for (int q = 0; q < Q; ++q) v[q] = FloatIo<V>::bf16_value(v[q]);
        }
        MIXQ_UNROLL
        for (int q = 0; q < Q; ++q) V::store_first(dst + k0 + q * L, cols - k0 - q * L, v[q]);
      }
    }
  });
}

#if defined(__AVX512F__)
inline void prepare_bf16(const float* x, int64_t m, int64_t k, int64_t steps, ActPrep prep, float inv_scale,
                         uint32_t* out, bool amx_tiles) {
  if (k > 2 * steps) fail("float gemm: activation has {} columns, the weight only {}", k, 2 * steps);
  util::parallel_for(m, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t k0 = 0; k0 < 2 * steps; k0 += kPrepChunk) {
        __m512 v[2];
        prepare_values<Avx512>(x + r * k, k, k0, prep, inv_scale, v);  // the bf16 store rounds
        // A chunk of 32 values is 16 pairs: 64 bytes, one A tile row.
        uint32_t* at = amx_tiles ? out + (r / 16) * 16 * steps + (k0 / 32) * 256 + (r % 16) * 16
                                 : out + r * steps + k0 / 2;
        FloatIo<Avx512>::store_pairs(at, steps - k0 / 2, v[0], v[1]);
      }
  });
}
#endif  // __AVX512F__

}  // namespace
}  // namespace mixq::kernels::x86
