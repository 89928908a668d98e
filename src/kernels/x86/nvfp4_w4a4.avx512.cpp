// NVFP4 W4A4 with AVX-512 VNNI (layout and arithmetic: nvfp4_w4a4.hpp).
//
// Small M (< kLargeM rows): weights are streamed once, decoded in registers
// (vpermb LUT) and used for every row; each thread takes a contiguous range
// of panels and walks J panels side by side (J independent read streams).
// Large M: per chunk of kRowChunk rows (activations stay in L2), each group of
// J panels is decoded once into a small per-thread buffer (L2) and then
// reused by every MR-row micro-kernel call.
//
// Exactness: block dots are exact int32; every block adds
// fma(float(dot4), S_x·S_w, acc) in block order and the result is
// (acc·0.25)·(g_x·g_w) + bias, which equals the reference bit for bit
// (dot4 = 4·dot and acc carries the same factor 4 exactly).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "util/parallel.hpp"
#include "kernels/x86/nvfp4_w4a4.hpp"
#include "mixq/error.hpp"
#include "mixq/threads.hpp"

namespace mixq::kernels::x86 {
namespace {

constexpr int64_t kLargeM = 32;
constexpr int64_t kRowChunk = 128;
constexpr int64_t kDecodedBlockBytes = 320;  // 4 × 64 B u8 weights + 16 f32 scales

// RNE of t in [0, 448] to the E4M3 grid, as f32 (what f32_to_e4m3 then
// e4m3_to_f32 give): subnormals on the 2^-9 grid, normals to 3 mantissa bits.
inline float e4m3_round(float t) {
  if (t < 0x1p-6f) return std::nearbyint(t * 512.0f) * (1.0f / 512.0f);
  uint32_t u = std::bit_cast<uint32_t>(t);
  u += 0x7FFFFu + ((u >> 20) & 1u);
  return std::bit_cast<float>(u & 0xFFF00000u);
}

inline float hmax_ignore_nan(__m512 acc) { return _mm512_reduce_max_ps(acc); }

// |x| maxima ignoring NaN (vmaxps returns its second operand on NaN).
inline __m512 max_abs(__m512 v, __m512 acc) { return _mm512_max_ps(_mm512_abs_ps(v), acc); }

inline __mmask16 tail_mask(int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1u);
}

// Loads x[k0, k0+16) (times pre_quant_scale) with zeros past k.
inline __m512 load_scaled(const float* row, const float* pqs, int64_t k0, int64_t k) {
  const __mmask16 mask = k0 >= k ? __mmask16(0) : tail_mask(k - k0);
  __m512 v = _mm512_maskz_loadu_ps(mask, row + k0);
  if (pqs) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(mask, pqs + k0));
  return v;
}

// Doubled E2M1 code (RNE on the E2M1 grid, saturating at ±6, NaN -> 0) of
// v = x / T as int32 in [-12, 12]. Steps: 0.5 below 2, 1 below 4, 2 above;
// rounding a·(1/step) to an integer (ties even) is the E2M1 tie rule of §2.1.
inline __m512i doubled_e2m1(__m512 v) {
  __m512 a = _mm512_max_ps(_mm512_abs_ps(v), _mm512_setzero_ps());  // NaN -> 0
  a = _mm512_min_ps(a, _mm512_set1_ps(6.0f));
  const __mmask16 below2 = _mm512_cmp_ps_mask(a, _mm512_set1_ps(2.0f), _CMP_LT_OQ);
  const __mmask16 below4 = _mm512_cmp_ps_mask(a, _mm512_set1_ps(4.0f), _CMP_LT_OQ);
  __m512 up = _mm512_set1_ps(0.5f), back = _mm512_set1_ps(4.0f);
  up = _mm512_mask_mov_ps(up, below4, _mm512_set1_ps(1.0f));
  back = _mm512_mask_mov_ps(back, below4, _mm512_set1_ps(2.0f));
  up = _mm512_mask_mov_ps(up, below2, _mm512_set1_ps(2.0f));
  back = _mm512_mask_mov_ps(back, below2, _mm512_set1_ps(1.0f));
  const __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(a, up), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512i d = _mm512_cvtps_epi32(_mm512_mul_ps(r, back));
  const __mmask16 negative = _mm512_movepi32_mask(_mm512_castps_si512(v));
  return _mm512_mask_sub_epi32(d, negative, _mm512_setzero_si512(), d);
}

float global_amax(const float* x, int64_t m, int64_t k, const float* pqs) {
  std::vector<float> part(static_cast<size_t>(std::max(1, num_threads())), 0.0f);
  util::parallel_for(m, 1, [&](int64_t begin, int64_t end, int thread) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t r = begin; r < end; ++r)
      for (int64_t k0 = 0; k0 < k; k0 += 16) acc = max_abs(load_scaled(x + r * k, pqs, k0, k), acc);
    part[static_cast<size_t>(thread)] = hmax_ignore_nan(acc);
  });
  float a = 0.0f;
  for (float p : part) a = std::max(a, p);
  return a;
}

}  // namespace

void nvfp4_quantize_avx512(const float* x, int64_t m, int64_t k, int64_t blocks,
                           const float* pqs, std::optional<float> input_scale,
                           Nvfp4Activation& out) {
  if (!nvfp4_start_activation(m, k, blocks, input_scale, [&] { return global_amax(x, m, k, pqs); }, out)) return;
  const float g = out.global;
  util::parallel_for(m, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = x + r * k;
      for (int64_t b = 0; b < blocks; ++b) {
        const __m512 v = load_scaled(row, pqs, b * 16, k);
        const float a = hmax_ignore_nan(max_abs(v, _mm512_setzero_ps()));
        const float t = (a / 6.0f) / g;
        const float s = e4m3_round(std::min(t, 448.0f));
        const float block = g * s;
        const size_t at = static_cast<size_t>(r * blocks + b);
        out.scale[at] = s;
        int8_t* q = out.q.data() + at * 16;
        if (block == 0.0f) {
          std::memset(q, 0, 16);
          out.comp[at] = 0;
          continue;
        }
        const __m512i d = doubled_e2m1(_mm512_div_ps(v, _mm512_set1_ps(block)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtepi32_epi8(d));
        out.comp[at] = -12 * _mm512_reduce_add_epi32(d);
      }
    }
  });
}

namespace {

// Nibble code -> 12 + 2·e2m1(code), as a 64-byte `vpermb` table holding the
// 16 entries four times: vpermb reads index bits 0-5, so bits 4-5 (the other
// nibble, or bits shifted in from the neighbour byte) need no masking.
inline __m512i weight_lut() {
  return _mm512_broadcast_i32x4(
      _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
}

// 16 E4M3 codes -> f32: the 7 magnitude bits land in an f32 exponent/mantissa
// (denormal for E=0) and a multiply by 2^120 rebiases; exact for every
// non-NaN code (NaN codes are refused at pack time).
inline __m512 decode_e4m3x16(const uint8_t* p) {
  const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i mag = _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x7F)), 20);
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24);
  return _mm512_mul_ps(_mm512_castsi512_ps(_mm512_or_si512(mag, sign)), _mm512_set1_ps(0x1p120f));
}

inline void decode_raw(const uint8_t* src, __m512i lut, __m512i* w, __m512* s) {
  const __m512i v0 = _mm512_loadu_si512(src);
  const __m512i v1 = _mm512_loadu_si512(src + 64);
  w[0] = _mm512_permutexvar_epi8(v0, lut);
  w[1] = _mm512_permutexvar_epi8(_mm512_srli_epi16(v0, 4), lut);
  w[2] = _mm512_permutexvar_epi8(v1, lut);
  w[3] = _mm512_permutexvar_epi8(_mm512_srli_epi16(v1, 4), lut);
  *s = decode_e4m3x16(src + 128);
}

inline void load_decoded(const uint8_t* src, __m512i* w, __m512* s) {
  for (int q = 0; q < 4; ++q) w[q] = _mm512_load_si512(src + 64 * q);
  *s = _mm512_load_ps(reinterpret_cast<const float*>(src + 256));
}

inline __m512i bcast32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Small M streams the raw panels once from DRAM; the hardware prefetchers
// alone left M = 1 at 60-72 % of the same-run read bandwidth.
constexpr int64_t kStreamPrefetchBytes = 2048;

struct Job {
  const Nvfp4Activation* act;
  const float* bias;
  float* y;
  int64_t n;
  float alpha;
};

// acc[MR][J] over all blocks; `src[j]` points at panel j's first block (raw
// 144-byte blocks, or decoded 320-byte blocks when Decoded).
template <int MR, int J, bool Decoded>
void micro(const Job& job, int64_t m0, const uint8_t* const* src, int64_t panel0) {
  const Nvfp4Activation& a = *job.act;
  const int64_t blocks = a.blocks;
  __m512 acc[MR][J];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < J; ++j) acc[i][j] = _mm512_setzero_ps();
  const __m512i lut = weight_lut();
  // acc[i][j] += (S_x·S_w)·dot(block b) for row i, panel j.
  auto update = [&](int i, int64_t b, const __m512i* w, __m512 s, __m512& acc_ij) {
    const int64_t row = (m0 + i) * blocks + b;
    const int8_t* xq = a.q.data() + row * 16;
    const __m512 sx = _mm512_set1_ps(a.scale[static_cast<size_t>(row)]);
    __m512i d = _mm512_set1_epi32(a.comp[static_cast<size_t>(row)]);
    d = _mm512_dpbusd_epi32(d, w[0], bcast32(xq));
    d = _mm512_dpbusd_epi32(d, w[1], bcast32(xq + 4));
    d = _mm512_dpbusd_epi32(d, w[2], bcast32(xq + 8));
    d = _mm512_dpbusd_epi32(d, w[3], bcast32(xq + 12));
    acc_ij = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(s, sx), acc_ij);
  };
  // Loop orders chosen from objdump so that g++ 12 keeps every accumulator in
  // a register: decoded panels are loaded up front and rows walk all J panels;
  // raw panels are decoded one at a time (only 4 weight vectors live).
  for (int64_t b = 0; b < blocks; ++b) {
    if constexpr (Decoded) {
      __m512i w[J][4];
      __m512 s[J];
      for (int j = 0; j < J; ++j) load_decoded(src[j] + b * kDecodedBlockBytes, w[j], &s[j]);
      for (int i = 0; i < MR; ++i)
        for (int j = 0; j < J; ++j) update(i, b, w[j], s[j], acc[i][j]);
    } else {
      for (int j = 0; j < J; ++j) {
        __m512i w[4];
        __m512 s;
        // Raw panels stream from DRAM: prefetch every line of the block
        // kStreamPrefetchBytes ahead (a 144-byte block spans up to 3 lines).
        const uint8_t* ahead = src[j] + b * kNvfp4PanelBlockBytes + kStreamPrefetchBytes;
        _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(ahead + 64), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(ahead + 128), _MM_HINT_T0);
        decode_raw(src[j] + b * kNvfp4PanelBlockBytes, lut, w, &s);
        for (int i = 0; i < MR; ++i) update(i, b, w, s, acc[i][j]);
      }
    }
  }
  const __m512 quarter = _mm512_set1_ps(0.25f), alpha = _mm512_set1_ps(job.alpha);
  for (int j = 0; j < J; ++j) {
    const int64_t n0 = (panel0 + j) * 16;
    if (n0 >= job.n) break;
    const __mmask16 mask = tail_mask(job.n - n0);
    const __m512 bias = job.bias ? _mm512_maskz_loadu_ps(mask, job.bias + n0) : _mm512_setzero_ps();
    for (int i = 0; i < MR; ++i) {
      __m512 out = _mm512_mul_ps(_mm512_mul_ps(acc[i][j], quarter), alpha);
      if (job.bias) out = _mm512_add_ps(out, bias);
      _mm512_mask_storeu_ps(job.y + (m0 + i) * job.n + n0, mask, out);
    }
  }
}

// Rows [m0, m1) against J panels, in MR-row steps with smaller tails.
template <int MR, int J, bool Decoded>
void rows(const Job& job, int64_t m0, int64_t m1, const uint8_t* const* src, int64_t panel0) {
  int64_t m = m0;
  for (; m + MR <= m1; m += MR) micro<MR, J, Decoded>(job, m, src, panel0);
  if constexpr (MR > 1) {
    if (m < m1) rows<MR - 1, J, Decoded>(job, m, m1, src, panel0);
  }
}

// Panels [p0, p1) in groups of J (the last group may be narrower).
template <int MR, int J>
void small_m(const Job& job, const Nvfp4Packed& w, int64_t p0, int64_t p1) {
  const int64_t stride = w.blocks * kNvfp4PanelBlockBytes;
  int64_t p = p0;
  for (; p + J <= p1; p += J) {
    const uint8_t* src[J];
    for (int j = 0; j < J; ++j) src[j] = w.data.data() + (p + j) * stride;
    rows<MR, J, false>(job, 0, job.act->m, src, p);
  }
  for (; p < p1; ++p) {
    const uint8_t* src[1] = {w.data.data() + p * stride};
    rows<MR, 1, false>(job, 0, job.act->m, src, p);
  }
}

// Decodes panel `p` (all blocks) into dst (kDecodedBlockBytes per block).
void decode_panel(const Nvfp4Packed& w, int64_t p, uint8_t* dst) {
  const __m512i lut = weight_lut();
  const uint8_t* src = w.data.data() + p * w.blocks * kNvfp4PanelBlockBytes;
  for (int64_t b = 0; b < w.blocks; ++b) {
    __m512i v[4];
    __m512 s;
    decode_raw(src + b * kNvfp4PanelBlockBytes, lut, v, &s);
    uint8_t* out = dst + b * kDecodedBlockBytes;
    for (int q = 0; q < 4; ++q) _mm512_store_si512(out + 64 * q, v[q]);
    _mm512_store_ps(reinterpret_cast<float*>(out + 256), s);
  }
}

constexpr int kLargeJ = 2;
constexpr int kLargeMR = 6;

void large_m(const Job& job, const Nvfp4Packed& w, int64_t p0, int64_t p1) {
  const size_t panel_bytes = static_cast<size_t>(w.blocks * kDecodedBlockBytes);
  thread_local std::vector<uint8_t> buffer;
  if (buffer.size() < kLargeJ * panel_bytes + 64) buffer.resize(kLargeJ * panel_bytes + 64);
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buffer.data()) + 63) & ~uintptr_t{63});
  const int64_t m = job.act->m;
  for (int64_t mc = 0; mc < m; mc += kRowChunk) {
    const int64_t mend = std::min(m, mc + kRowChunk);
    for (int64_t p = p0; p < p1; p += kLargeJ) {
      const int width = static_cast<int>(std::min<int64_t>(kLargeJ, p1 - p));
      const uint8_t* src[kLargeJ];
      for (int j = 0; j < width; ++j) {
        decode_panel(w, p + j, base + j * panel_bytes);
        src[j] = base + j * panel_bytes;
      }
      if (width == kLargeJ)
        rows<kLargeMR, kLargeJ, true>(job, mc, mend, src, p);
      else
        rows<kLargeMR, 1, true>(job, mc, mend, src, p);
    }
  }
}

}  // namespace

void nvfp4_gemm_avx512(const Nvfp4Activation& act, const Nvfp4Packed& w, const float* bias,
                       float* y) {
  if (act.blocks != w.blocks) fail("nvfp4: activation has {} blocks, weight {}", act.blocks, w.blocks);
  const Job job{&act, bias, y, w.n, act.global * w.global};
  const int64_t m = act.m;
  if (m <= 0 || w.n <= 0) return;
  if (m >= kLargeM) {
    util::parallel_for(w.panels, kLargeJ, [&](int64_t p0, int64_t p1, int) { large_m(job, w, p0, p1); });
  } else if (m <= 2) {
    util::parallel_for(w.panels, 4, [&](int64_t p0, int64_t p1, int) {
      if (m == 1) small_m<1, 4>(job, w, p0, p1);
      else small_m<2, 4>(job, w, p0, p1);
    });
  } else {
    util::parallel_for(w.panels, 2, [&](int64_t p0, int64_t p1, int) { small_m<4, 2>(job, w, p0, p1); });
  }
}

}  // namespace mixq::kernels::x86
