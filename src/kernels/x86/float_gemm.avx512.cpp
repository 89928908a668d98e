// AVX-512 float GEMM cores and activation preparation (float_gemm.hpp).
//
// Three cores share one blocking:
//  - dot:  bf16 panels × bf16 pair activations, `vdpbf16ps` (2 k per lane);
//  - f32:  f32 panels × f32 activations, `vfmadd231ps` (unquantized layers);
//  - wide: bf16 panels widened in registers (even k = word << 16, odd k =
//          word & 0xFFFF0000) × f32 activations, `vfmadd231ps` one k at a
//          time, so each output is the FMA chain in k order.
// Each thread owns a contiguous range of 16-column panels. The K dimension is
// walked in chunks of kStepChunk steps (a panel chunk is 16 KiB, J = 3 of them
// stay in L1/L2), rows in chunks of kRowChunk (their activation chunk stays in
// L2), and the register block is MR = 8 rows × J = 3 panels (24 accumulators
// + 3 weight vectors; the wide core's broadcasts are FMA memory operands
// {1to16} and its widening shifts/ands read the panel row from memory).
// objdump (g++ 12, -O3): the step loops of micro<Core, MR, J> keep all
// accumulators in zmm registers (no zmm load/store to the stack). The wide
// 8 × 3 loop reloads a few activation row pointers from the stack (16
// broadcast addresses do not fit in the general registers); repacking the
// activations so one pointer serves them was measured no faster (~220
// GFLOPS either way, 2 threads, M = 4096, K = N = 3072), so it is not done.
// Partial sums of earlier K chunks live in y, so each output still
// accumulates in k order in fp32; alpha and bias are applied once after the
// last chunk (mul, then add, as the reference: see rounded()).
// GCC 12 reports false -Wmaybe-uninitialized inside its own AVX-512 headers
// (the _mm512_undefined_* idiom of _mm512_slli_epi32); nothing of ours is.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/parallel.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "mixq/error.hpp"

namespace mixq::kernels::x86 {
namespace {

// Complete unrolling of the constant MR / J loops keeps the accumulator
// arrays in registers (as in the AVX2 core).
#define MIXQ_UNROLL _Pragma("GCC unroll 16")

constexpr int64_t kStepChunk = 256;
constexpr int64_t kRowChunk = 128;
constexpr int kMR = 8;
constexpr int kJ = 3;

enum class Core { dot, f32, wide };

inline __mmask16 tail_mask(int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1u);
}

// g++ contracts a vmulps feeding a vaddps into one FMA (intrinsics are vector
// operators to it, -ffp-contract=fast); the reference rounds the product
// first, so the epilogue passes it through this empty asm barrier.
inline __m512 rounded(__m512 v) {
  __asm__("" : "+v"(v));
  return v;
}

struct Job {
  const void* a;  // dot: uint32_t bf16 pairs; f32 / wide: float
  int64_t lda;    // 32-bit values per activation row
  const FloatPanels* w;
  float alpha;
  const float* bias;
  float* y;
};

// Rows [m0, m0+MR) × panels [p, p+J) over steps [s0, s1).
template <Core C, int MR, int J>
void micro(const Job& job, int64_t m0, int64_t p, int64_t s0, int64_t s1, bool first, bool last) {
  const FloatPanels& w = *job.w;
  const int64_t n = w.n;
  const int64_t lda = job.lda;
  __m512 acc[MR][J];
  __mmask16 mask[J];
  MIXQ_UNROLL
  for (int j = 0; j < J; ++j) mask[j] = tail_mask(n - (p + j) * 16);
  MIXQ_UNROLL
  for (int i = 0; i < MR; ++i)
    MIXQ_UNROLL
    for (int j = 0; j < J; ++j)
      acc[i][j] = first ? _mm512_setzero_ps()
                        : _mm512_maskz_loadu_ps(mask[j], job.y + (m0 + i) * n + (p + j) * 16);
  const uint32_t* b[J];
  MIXQ_UNROLL
  for (int j = 0; j < J; ++j) b[j] = w.data.data() + (p + j) * w.steps * 16;
  if constexpr (C == Core::wide) {
    const float* a = static_cast<const float*>(job.a) + m0 * lda;
    const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    for (int64_t s = s0; s < s1; ++s) {
      // even k: the low bf16 of each word, shifted up
      __m512 wv[J];
      MIXQ_UNROLL
      for (int j = 0; j < J; ++j) wv[j] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_loadu_si512(b[j] + s * 16), 16));
      MIXQ_UNROLL
      for (int i = 0; i < MR; ++i) {
        const __m512 av = _mm512_set1_ps(a[i * lda + 2 * s]);
        MIXQ_UNROLL
        for (int j = 0; j < J; ++j) acc[i][j] = _mm512_fmadd_ps(av, wv[j], acc[i][j]);
      }
      // odd k: the high bf16 with the low half cleared
      MIXQ_UNROLL
      for (int j = 0; j < J; ++j) wv[j] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_loadu_si512(b[j] + s * 16), hi));
      MIXQ_UNROLL
      for (int i = 0; i < MR; ++i) {
        const __m512 av = _mm512_set1_ps(a[i * lda + 2 * s + 1]);
        MIXQ_UNROLL
        for (int j = 0; j < J; ++j) acc[i][j] = _mm512_fmadd_ps(av, wv[j], acc[i][j]);
      }
    }
  } else {
    const uint32_t* a = static_cast<const uint32_t*>(job.a) + m0 * lda;
    for (int64_t s = s0; s < s1; ++s) {
      __m512i wv[J];
      MIXQ_UNROLL
      for (int j = 0; j < J; ++j) wv[j] = _mm512_loadu_si512(b[j] + s * 16);
      MIXQ_UNROLL
      for (int i = 0; i < MR; ++i) {
        int32_t word;  // f32 activations are read as bits (memcpy: no aliasing)
        std::memcpy(&word, a + i * lda + s, 4);
        const __m512i av = _mm512_set1_epi32(word);
        MIXQ_UNROLL
        for (int j = 0; j < J; ++j) {
          if constexpr (C == Core::dot)
            acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)av, (__m512bh)wv[j]);
          else
            acc[i][j] = _mm512_fmadd_ps(_mm512_castsi512_ps(av), _mm512_castsi512_ps(wv[j]), acc[i][j]);
        }
      }
    }
  }
  const __m512 alpha = _mm512_set1_ps(job.alpha);
  MIXQ_UNROLL
  for (int j = 0; j < J; ++j) {
    const int64_t n0 = (p + j) * 16;
    __m512 bias = _mm512_setzero_ps();
    if (last && job.bias) bias = _mm512_maskz_loadu_ps(mask[j], job.bias + n0);
    MIXQ_UNROLL
    for (int i = 0; i < MR; ++i) {
      __m512 out = acc[i][j];
      if (last) {
        out = rounded(_mm512_mul_ps(out, alpha));
        if (job.bias) out = _mm512_add_ps(out, bias);
      }
      _mm512_mask_storeu_ps(job.y + (m0 + i) * n + n0, mask[j], out);
    }
  }
}

template <Core T, int MR, int J>
void rows(const Job& job, int64_t m0, int64_t m1, int64_t p, int64_t s0, int64_t s1, bool first,
          bool last) {
  int64_t m = m0;
  for (; m + MR <= m1; m += MR) micro<T, MR, J>(job, m, p, s0, s1, first, last);
  if constexpr (MR > 1) {
    if (m < m1) rows<T, MR - 1, J>(job, m, m1, p, s0, s1, first, last);
  }
}

template <Core T>
void run(const Job& job, int64_t m, int64_t p0, int64_t p1) {
  const int64_t steps = job.w->steps;
  for (int64_t s0 = 0; s0 < steps || s0 == 0; s0 += kStepChunk) {
    const int64_t s1 = std::min(steps, s0 + kStepChunk);
    const bool first = s0 == 0, last = s1 == steps;
    for (int64_t mc = 0; mc < m; mc += kRowChunk) {
      const int64_t mend = std::min(m, mc + kRowChunk);
      int64_t p = p0;
      for (; p + kJ <= p1; p += kJ) rows<T, kMR, kJ>(job, mc, mend, p, s0, s1, first, last);
      for (; p < p1; ++p) rows<T, kMR, 1>(job, mc, mend, p, s0, s1, first, last);
    }
    if (steps == 0) break;
  }
}

}  // namespace

void float_gemm_avx512(const uint32_t* a, int64_t m, const FloatPanels& w, float alpha,
                       const float* bias, float* y) {
  if (m <= 0 || w.n <= 0) return;
  const Job job{a, w.steps, &w, alpha, bias, y};
  util::parallel_for(w.panels, kJ, [&](int64_t p0, int64_t p1, int) {
    if (w.type == GemmType::bf16)
      run<Core::dot>(job, m, p0, p1);
    else
      run<Core::f32>(job, m, p0, p1);
  });
}

void float_gemm_avx512_fma(const float* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha,
                           const float* bias, float* y) {
  if (m <= 0 || w.n <= 0) return;
  const int64_t need = w.type == GemmType::bf16 ? 2 * w.steps : w.steps;
  if (lda < need) fail("float gemm: activation rows hold {} values, the weight needs {}", lda, need);
  const Job job{a, lda, &w, alpha, bias, y};
  util::parallel_for(w.panels, kJ, [&](int64_t p0, int64_t p1, int) {
    if (w.type == GemmType::bf16)
      run<Core::wide>(job, m, p0, p1);
    else
      run<Core::f32>(job, m, p0, p1);
  });
}

namespace {

// RNE of |v| (finite or NaN, already clamped) to a minifloat grid kept in f32:
// normals (>= min_normal) keep `mant` mantissa bits, subnormals sit on the grid
// `sub_step`. NaN stays NaN (its payload only grows toward the kept bits).
template <int Mant>
inline __m512 round_minifloat(__m512 v, float min_normal, float sub_step) {
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN));
  const __m512 a = _mm512_abs_ps(v);
  const __m512i u = _mm512_castps_si512(a);
  constexpr int drop = 23 - Mant;
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, drop), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32((1 << (drop - 1)) - 1), odd));
  r = _mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(~((1u << drop) - 1u))));
  const __m512 sub = _mm512_mul_ps(
      _mm512_roundscale_ps(_mm512_mul_ps(a, _mm512_set1_ps(1.0f / sub_step)),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
      _mm512_set1_ps(sub_step));
  const __mmask16 is_sub = _mm512_cmp_ps_mask(a, _mm512_set1_ps(min_normal), _CMP_LT_OQ);
  const __m512 mag = _mm512_mask_mov_ps(_mm512_castsi512_ps(r), is_sub, sub);
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(mag), sign));
}

// clamp(v, -hi, hi) keeping NaN (vmaxps/vminps return the second operand on NaN).
inline __m512 clamp_keep_nan(__m512 v, float hi) {
  v = _mm512_max_ps(_mm512_set1_ps(-hi), v);
  return _mm512_min_ps(_mm512_set1_ps(hi), v);
}

inline __m512 fp8_value(__m512 v, ActPrep prep) {
  if (prep == ActPrep::e5m2) return round_minifloat<2>(clamp_keep_nan(v, 57344.0f), 0x1p-14f, 0x1p-16f);
  return round_minifloat<3>(clamp_keep_nan(v, 448.0f), 0x1p-6f, 0x1p-9f);
}

inline __m512 load_row(const float* row, int64_t k0, int64_t k) {
  return _mm512_maskz_loadu_ps(k0 >= k ? __mmask16(0) : tail_mask(k - k0), row + k0);
}

// Stores 32 f32 (lo: k0..k0+15, hi: k0+16..k0+31) as 16 bf16 pairs.
inline void store_pairs(uint32_t* dst, int64_t pairs, __m512 lo, __m512 hi) {
  const __m512i packed = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
  _mm512_mask_storeu_epi32(dst, tail_mask(pairs), packed);
  if (pairs > 16)
    _mm512_mask_storeu_epi32(dst + 16, tail_mask(pairs - 16), _mm512_shuffle_i64x2(packed, packed, 0xEE));
}

int ceil_log2(float r) {
  int exponent = 0;
  const float mantissa = std::frexp(r, &exponent);
  return mantissa == 0.5f ? exponent - 1 : exponent;
}

// x[k0, k0+32) of one row (zeros past k) as the prepared values lo (k0..+15)
// and hi (k0+16..+31); `round` and `none` leave x as is (the bf16 store rounds).
inline void prepare_values(const float* row, int64_t k, int64_t k0, ActPrep prep, float inv, __m512& lo,
                           __m512& hi) {
  lo = load_row(row, k0, k);
  hi = load_row(row, k0 + 16, k);
  if (prep == ActPrep::e4m3 || prep == ActPrep::e5m2) {
    const __m512 s = _mm512_set1_ps(inv);
    lo = fp8_value(_mm512_mul_ps(lo, s), prep);
    hi = fp8_value(_mm512_mul_ps(hi, s), prep);
  } else if (prep == ActPrep::mxfp8) {
    // §3.3: a = max|x| (NaN ignored), e = clamp(ceil(log2(max(a/448, 2^-127))) + 127, 0, 254),
    // codes = e4m3(clamp(x / 2^(e-127), ±448)); the GEMM uses code·e8m0(e), e8m0(0) = 0.
    const __m512 amax = _mm512_max_ps(_mm512_abs_ps(hi), _mm512_max_ps(_mm512_abs_ps(lo), _mm512_setzero_ps()));
    const float a = _mm512_reduce_max_ps(amax);
    if (a == 0.0f) {
      lo = hi = _mm512_setzero_ps();
    } else {
      const float ratio = a / 448.0f;
      const int e = std::isfinite(ratio)
                        ? std::clamp(ceil_log2(std::max(ratio, 0x1p-127f)) + 127, 0, 254)
                        : 254;
      const __m512 div = _mm512_set1_ps(std::ldexp(1.0f, e - 127));
      const __m512 back = _mm512_set1_ps(e == 0 ? 0.0f : std::ldexp(1.0f, e - 127));
      lo = _mm512_mul_ps(fp8_value(_mm512_div_ps(lo, div), ActPrep::e4m3), back);
      hi = _mm512_mul_ps(fp8_value(_mm512_div_ps(hi, div), ActPrep::e4m3), back);
    }
  }
}

void prepare_row(const float* row, int64_t k, int64_t steps, ActPrep prep, float inv, uint32_t* out) {
  for (int64_t k0 = 0; k0 < 2 * steps; k0 += 32) {
    __m512 lo, hi;
    prepare_values(row, k, k0, prep, inv, lo, hi);
    store_pairs(out + k0 / 2, steps - k0 / 2, lo, hi);
  }
}

// RNE of x to bf16, the value kept in f32 (as vcvtne2ps2bf16 rounds).
inline __m512 bf16_value(__m512 v) {
  const __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

void prepare_row_f32(const float* row, int64_t k, int64_t cols, ActPrep prep, float inv, float* out) {
  for (int64_t k0 = 0; k0 < cols; k0 += 32) {
    __m512 lo, hi;
    prepare_values(row, k, k0, prep, inv, lo, hi);
    if (prep == ActPrep::round) {
      lo = bf16_value(lo);
      hi = bf16_value(hi);
    }
    _mm512_mask_storeu_ps(out + k0, tail_mask(cols - k0), lo);
    if (cols - k0 > 16) _mm512_mask_storeu_ps(out + k0 + 16, tail_mask(cols - k0 - 16), hi);
  }
}

}  // namespace

void prepare_bf16_avx512(const float* x, int64_t m, int64_t k, int64_t steps, ActPrep prep,
                         float inv_scale, uint32_t* out) {
  if (k > 2 * steps) fail("float gemm: activation has {} columns, the weight only {}", k, 2 * steps);
  util::parallel_for(m, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) prepare_row(x + r * k, k, steps, prep, inv_scale, out + r * steps);
  });
}

void prepare_f32_avx512(const float* x, int64_t m, int64_t k, int64_t cols, ActPrep prep, float inv_scale,
                        float* out) {
  if (k > cols) fail("float gemm: activation has {} columns, the weight only {}", k, cols);
  if (prep == ActPrep::mxfp8 && cols % 32 != 0) fail("float gemm: MXFP8 needs 32-blocks, {} columns", cols);
  util::parallel_for(m, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) prepare_row_f32(x + r * k, k, cols, prep, inv_scale, out + r * cols);
  });
}

}  // namespace mixq::kernels::x86
