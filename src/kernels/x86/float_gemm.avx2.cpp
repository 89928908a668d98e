// AVX2 + FMA float GEMM core and f32 activation preparation (float_gemm.hpp).
//
// Layout: the same 16-column panels as the AVX-512 core (pack_panels), read as
// two ymm per panel row. AVX2 has no bf16 dot, so a bf16 panel row (16
// columns × a k-pair, bf16 words lo = even k, hi = odd k) is widened in
// registers: even k = word << 16, odd k = (word >> 16) << 16 (shifts need no
// mask register). We keep bf16 panels rather than decoding to f32 once
// because small M (decode) streams the weights from memory: bf16 halves the
// bytes, and at large M the few shifts per 24 FMAs do not compete with the
// FMA ports. Activations stay f32 (what the quantizer produced, or x
// itself for full-precision layers), so the FP8 products e4m3·e4m3 / e5m2·e5m2
// are exact in fp32 and the FMA chain in k order gives the reference's sum
// bit for bit.
//
// Blocking: a thread owns a contiguous range of panels. K is walked in chunks
// of kStepChunk steps (a 16 KiB panel chunk stays in L1), rows in chunks of
// kRowChunk (their activations stay in L2), and the register tile is MR = 6
// rows × 1 panel (2 ymm): 12 accumulators + 2 weight vectors + 1 broadcast.
// Fewer rows (M < 6 or the tail of a chunk) walk J panels side by side
// (1×4, 2×3, 4×1, 3×1) so M = 1 still has 8 independent FMA chains and 4 read
// streams. Partial sums of earlier K chunks live in y, so every output
// accumulates in k order; alpha and bias are applied once after the last
// chunk (mul, then add, as the reference).
// objdump (g++ 12, -O2 and -O3): the step loop of every micro<T, MR, J> keeps
// all accumulators in ymm registers, no stack access inside it.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/parallel.hpp"
#include "kernels/x86/avx2_util.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "mixq/error.hpp"

namespace mixq::kernels::x86 {
namespace {

constexpr int64_t kStepChunk = 256;
constexpr int64_t kRowChunk = 128;
constexpr int kMR = 6;

// Panels walked side by side for an MR-row tile (<= 12 accumulators).
// 3×2 and 5×1 are left out: g++ 12 spilled accumulators of their bf16 loops
// (objdump), so 3 rows run 3×1 and 5 rows as 4×1 + 1×4.
constexpr int panels_for(int mr) { return mr == 1 ? 4 : mr == 2 ? 3 : 1; }

// Lane mask for `count` valid floats of an 8-lane vector (count may be <= 0).
inline __m256i lane_mask(int64_t count) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int c = static_cast<int>(std::clamp<int64_t>(count, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), idx);
}

struct Job {
  const float* a;
  int64_t lda;
  const FloatPanels* w;
  float alpha;
  const float* bias;
  float* y;
};

// Rows [m0, m0+MR) × panels [p, p+J) over steps [s0, s1).
template <GemmType T, int MR, int J>
void micro(const Job& job, int64_t m0, int64_t p, int64_t s0, int64_t s1, bool first, bool last) {
  const FloatPanels& w = *job.w;
  const int64_t n = w.n;
  __m256 acc[MR][2 * J];
  __m256i mask[2 * J];
  MIXQ_UNROLL
  for (int h = 0; h < 2 * J; ++h) mask[h] = lane_mask(n - p * 16 - h * 8);
  MIXQ_UNROLL
  for (int i = 0; i < MR; ++i)
    MIXQ_UNROLL
    for (int h = 0; h < 2 * J; ++h)
      acc[i][h] = first ? _mm256_setzero_ps()
                        : _mm256_maskload_ps(job.y + (m0 + i) * n + p * 16 + h * 8, mask[h]);
  const uint32_t* b[J];
  MIXQ_UNROLL
  for (int j = 0; j < J; ++j) b[j] = w.data.data() + (p + j) * w.steps * 16;
  const float* a = job.a + m0 * job.lda;
  const int64_t lda = job.lda;
  // One k: acc[i][h] += a[i][kk]·wv[h] for weight vectors made by load(h).
  // Register use decides the order: weights first needs 2J + 1 vectors next
  // to the accumulators, rows first MR + 1 (each row's broadcast is kept).
  auto step = [&](int64_t kk, auto load) {
    if constexpr (2 * J <= MR) {
      __m256 wv[2 * J];
      MIXQ_UNROLL
      for (int h = 0; h < 2 * J; ++h) wv[h] = load(h);
      MIXQ_UNROLL
      for (int i = 0; i < MR; ++i) {
        const __m256 av = _mm256_broadcast_ss(a + i * lda + kk);
        MIXQ_UNROLL
        for (int h = 0; h < 2 * J; ++h) acc[i][h] = _mm256_fmadd_ps(av, wv[h], acc[i][h]);
      }
    } else {
      __m256 av[MR];
      MIXQ_UNROLL
      for (int i = 0; i < MR; ++i) av[i] = _mm256_broadcast_ss(a + i * lda + kk);
      MIXQ_UNROLL
      for (int h = 0; h < 2 * J; ++h) {
        const __m256 wv = load(h);
        MIXQ_UNROLL
        for (int i = 0; i < MR; ++i) acc[i][h] = _mm256_fmadd_ps(av[i], wv, acc[i][h]);
      }
    }
  };
  auto word = [&](int h, int64_t s) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[h / 2] + s * 16 + (h % 2) * 8));
  };
  for (int64_t s = s0; s < s1; ++s) {
    if constexpr (T == GemmType::f32) {
      step(s, [&](int h) { return _mm256_castsi256_ps(word(h, s)); });
    } else {
      // even k: the low bf16 of each word, shifted up
      step(2 * s, [&](int h) { return _mm256_castsi256_ps(_mm256_slli_epi32(word(h, s), 16)); });
      // odd k: the high bf16 with the low half cleared by two shifts (an AND
      // would hold its mask in one more register)
      step(2 * s + 1, [&](int h) {
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(word(h, s), 16), 16));
      });
    }
  }
  const __m256 alpha = _mm256_set1_ps(job.alpha);
  MIXQ_UNROLL
  for (int h = 0; h < 2 * J; ++h) {
    const int64_t n0 = p * 16 + h * 8;
    if (n0 >= n) break;
    __m256 bias = _mm256_setzero_ps();
    if (last && job.bias) bias = _mm256_maskload_ps(job.bias + n0, mask[h]);
    MIXQ_UNROLL
    for (int i = 0; i < MR; ++i) {
      __m256 out = acc[i][h];
      if (last) {
        out = rounded(_mm256_mul_ps(out, alpha));
        if (job.bias) out = _mm256_add_ps(out, bias);
      }
      _mm256_maskstore_ps(job.y + (m0 + i) * n + n0, mask[h], out);
    }
  }
}

// The last MR (< kMR) rows of a chunk against panels [p0, p1), J at a time.
template <GemmType T, int MR>
void tail_rows(const Job& job, int64_t m0, int64_t p0, int64_t p1, int64_t s0, int64_t s1, bool first,
               bool last) {
  constexpr int J = panels_for(MR);
  int64_t p = p0;
  for (; p + J <= p1; p += J) micro<T, MR, J>(job, m0, p, s0, s1, first, last);
  for (; p < p1; ++p) micro<T, MR, 1>(job, m0, p, s0, s1, first, last);
}

template <GemmType T>
void run(const Job& job, int64_t m, int64_t p0, int64_t p1) {
  const int64_t steps = job.w->steps;
  for (int64_t s0 = 0; s0 < steps || s0 == 0; s0 += kStepChunk) {
    const int64_t s1 = std::min(steps, s0 + kStepChunk);
    const bool first = s0 == 0, last = s1 == steps;
    for (int64_t mc = 0; mc < m; mc += kRowChunk) {
      const int64_t mend = std::min(m, mc + kRowChunk);
      const int64_t full = mc + (mend - mc) / kMR * kMR;
      for (int64_t p = p0; p < p1; ++p)
        for (int64_t r = mc; r < full; r += kMR) micro<T, kMR, 1>(job, r, p, s0, s1, first, last);
      switch (mend - full) {
        case 1: tail_rows<T, 1>(job, full, p0, p1, s0, s1, first, last); break;
        case 2: tail_rows<T, 2>(job, full, p0, p1, s0, s1, first, last); break;
        case 3: tail_rows<T, 3>(job, full, p0, p1, s0, s1, first, last); break;
        case 4: tail_rows<T, 4>(job, full, p0, p1, s0, s1, first, last); break;
        case 5:
          tail_rows<T, 4>(job, full, p0, p1, s0, s1, first, last);
          tail_rows<T, 1>(job, full + 4, p0, p1, s0, s1, first, last);
          break;
        default: break;
      }
    }
    if (steps == 0) break;
  }
}

}  // namespace

void float_gemm_avx2(const float* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha,
                     const float* bias, float* y) {
  if (m <= 0 || w.n <= 0) return;
  const int64_t need = w.type == GemmType::bf16 ? 2 * w.steps : w.steps;
  if (lda < need) fail("float gemm: activation rows hold {} values, the weight needs {}", lda, need);
  const Job job{a, lda, &w, alpha, bias, y};
  // Grain 4 panels: whole J = 4 groups for M = 1 on each thread.
  util::parallel_for(w.panels, 4, [&](int64_t p0, int64_t p1, int) {
    if (w.type == GemmType::bf16)
      run<GemmType::bf16>(job, m, p0, p1);
    else
      run<GemmType::f32>(job, m, p0, p1);
  });
}

namespace {

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// RNE of |v| (finite or NaN, already clamped) to a minifloat grid kept in f32,
// as the AVX-512 version: normals keep `Mant` mantissa bits, subnormals sit on
// the grid `sub_step`; the sign is put back afterwards.
template <int Mant>
inline __m256 round_minifloat(__m256 v, float min_normal, float sub_step) {
  const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
  const __m256 a = abs_ps(v);
  const __m256i u = _mm256_castps_si256(a);
  constexpr int drop = 23 - Mant;
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, drop), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32((1 << (drop - 1)) - 1), odd));
  r = _mm256_and_si256(r, _mm256_set1_epi32(static_cast<int>(~((1u << drop) - 1u))));
  const __m256 sub = _mm256_mul_ps(
      _mm256_round_ps(_mm256_mul_ps(a, _mm256_set1_ps(1.0f / sub_step)),
                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
      _mm256_set1_ps(sub_step));
  const __m256 is_sub = _mm256_cmp_ps(a, _mm256_set1_ps(min_normal), _CMP_LT_OQ);
  const __m256 mag = _mm256_blendv_ps(_mm256_castsi256_ps(r), sub, is_sub);
  return _mm256_or_ps(mag, sign);
}

// clamp(v, -hi, hi) keeping NaN (vmaxps/vminps return the second operand on NaN).
inline __m256 clamp_keep_nan(__m256 v, float hi) {
  v = _mm256_max_ps(_mm256_set1_ps(-hi), v);
  return _mm256_min_ps(_mm256_set1_ps(hi), v);
}

inline __m256 fp8_value(__m256 v, ActPrep prep) {
  if (prep == ActPrep::e5m2) return round_minifloat<2>(clamp_keep_nan(v, 57344.0f), 0x1p-14f, 0x1p-16f);
  return round_minifloat<3>(clamp_keep_nan(v, 448.0f), 0x1p-6f, 0x1p-9f);
}

// x[k0, k0+8) with zeros past k.
inline __m256 load_row(const float* row, int64_t k0, int64_t k) {
  return _mm256_maskload_ps(row + k0, lane_mask(k - k0));
}

inline float hmax(__m256 v) {  // NaN-free input (max_ps dropped them)
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

int ceil_log2(float r) {
  int exponent = 0;
  const float mantissa = std::frexp(r, &exponent);
  return mantissa == 0.5f ? exponent - 1 : exponent;
}

// One MXFP8 32-block (§3.3), as prepare_bf16_avx512: a = max|x| (NaN ignored),
// e = clamp(ceil(log2(max(a/448, 2^-127))) + 127, 0, 254), value =
// e4m3(clamp(x / 2^(e-127), ±448))·e8m0(e) with e8m0(0) = 0.
inline void mxfp8_block(__m256* v) {
  __m256 amax = _mm256_setzero_ps();
  for (int q = 0; q < 4; ++q) amax = _mm256_max_ps(abs_ps(v[q]), amax);
  const float a = hmax(amax);
  if (a == 0.0f) {
    for (int q = 0; q < 4; ++q) v[q] = _mm256_setzero_ps();
    return;
  }
  const float ratio = a / 448.0f;
  const int e = std::isfinite(ratio) ? std::clamp(ceil_log2(std::max(ratio, 0x1p-127f)) + 127, 0, 254) : 254;
  const __m256 div = _mm256_set1_ps(std::ldexp(1.0f, e - 127));
  const __m256 back = _mm256_set1_ps(e == 0 ? 0.0f : std::ldexp(1.0f, e - 127));
  for (int q = 0; q < 4; ++q)
    v[q] = _mm256_mul_ps(fp8_value(_mm256_div_ps(v[q], div), ActPrep::e4m3), back);
}

void prepare_row(const float* row, int64_t k, int64_t cols, ActPrep prep, float inv, float* out) {
  const int64_t width = prep == ActPrep::mxfp8 ? 32 : 8;
  for (int64_t k0 = 0; k0 < cols; k0 += width) {
    __m256 v[4];
    const int count = static_cast<int>(width / 8);
    for (int q = 0; q < count; ++q) v[q] = load_row(row, k0 + 8 * q, k);
    if (prep == ActPrep::e4m3 || prep == ActPrep::e5m2) {
      v[0] = fp8_value(_mm256_mul_ps(v[0], _mm256_set1_ps(inv)), prep);
    } else if (prep == ActPrep::mxfp8) {
      mxfp8_block(v);
    }
    for (int q = 0; q < count; ++q)
      _mm256_maskstore_ps(out + k0 + 8 * q, lane_mask(cols - k0 - 8 * q), v[q]);
  }
}

}  // namespace

void prepare_f32_avx2(const float* x, int64_t m, int64_t k, int64_t cols, ActPrep prep, float inv_scale,
                      float* out) {
  if (k > cols) fail("float gemm: activation has {} columns, the weight only {}", k, cols);
  if (prep == ActPrep::round) fail("float gemm: the AVX2 path computes in f32; bf16 rounding is avx512's");
  if (prep == ActPrep::mxfp8 && cols % 32 != 0) fail("float gemm: MXFP8 needs 32-blocks, {} columns", cols);
  util::parallel_for(m, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) prepare_row(x + r * k, k, cols, prep, inv_scale, out + r * cols);
  });
}

}  // namespace mixq::kernels::x86
