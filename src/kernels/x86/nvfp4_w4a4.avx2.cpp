// NVFP4 W4A4 with AVX2 (arithmetic: nvfp4_w4a4.hpp). Same packed weights as
// the AVX-512 kernel (nvfp4_pack): a 16-row panel block is read as two ymm
// halves of 8 rows (bytes [32h, 32h+32) and [64+32h, ...) hold half h's
// k-octets, bytes [128+8h, 136+8h) its scales), so no second repack exists.
//
// Decode: there is no vpermb on AVX2; vpshufb looks up a 16-entry table in
// each 128-bit lane, and its index is the nibble masked with 0x0F (bit 7 of
// the index would zero the byte). The table gives 12 + 2·e2m1, the unsigned
// operand; the doubled activation code (-12..12) is the signed one.
// Block dot (int32, exact):
//  - AVX-VNNI: four `vpdpbusd ymm` per block, as the AVX-512 kernel;
//  - without it: four `vpmaddubsw` (each i16 lane = two products, |.| <= 2·24·12
//    = 576), summed in i16 (|.| <= 2304, no saturation), then one `vpmaddwd`
//    by ones into int32. Exact, and 9 instructions instead of 12.
// Epilogue: acc = fma(float(dot4), S_x·S_w, acc) in block order, then
// (acc·0.25)·(g_x·g_w) + bias: the AVX-512 kernel's order, which equals the
// reference bit for bit (dot4 = 4·dot, acc carries the factor 4 exactly).
//
// Small M (< kLargeM): weights streamed once and decoded in registers for
// every row (tiles: 1 row × 2 panels for M = 1, 2 rows × 1 panel otherwise).
// Large M: per chunk of kRowChunk rows each panel is decoded once into a
// per-thread buffer (L1/L2) and reused by every 2-row × 1-panel tile.
// objdump (g++ 12, -O2 and -O3): the block loop of every micro<> keeps its
// accumulators in ymm registers, no stack access inside it.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "util/parallel.hpp"
#include "kernels/x86/avx2_util.hpp"
#include "kernels/x86/nvfp4_w4a4.hpp"
#include "mixq/error.hpp"
#include "mixq/threads.hpp"

namespace mixq::kernels::x86 {
namespace {

constexpr int64_t kLargeM = 32;
constexpr int64_t kRowChunk = 128;
constexpr int64_t kDecodedHalfBytes = 160;  // 4 × 32 B u8 weights + 8 f32 scales
constexpr int64_t kDecodedBlockBytes = 2 * kDecodedHalfBytes;

// RNE of t in [0, 448] to the E4M3 grid, as f32 (see nvfp4_w4a4.avx512.cpp).
inline float e4m3_round(float t) {
  if (t < 0x1p-6f) return std::nearbyint(t * 512.0f) * (1.0f / 512.0f);
  uint32_t u = std::bit_cast<uint32_t>(t);
  u += 0x7FFFFu + ((u >> 20) & 1u);
  return std::bit_cast<float>(u & 0xFFF00000u);
}

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// |x| maxima ignoring NaN (vmaxps returns its second operand on NaN).
inline __m256 max_abs(__m256 v, __m256 acc) { return _mm256_max_ps(abs_ps(v), acc); }

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

inline __m256i lane_mask(int64_t count) {
  const int c = static_cast<int>(std::clamp<int64_t>(count, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// x[k0, k0+8) (times pre_quant_scale) with zeros past k.
inline __m256 load_scaled(const float* row, const float* pqs, int64_t k0, int64_t k) {
  const __m256i mask = lane_mask(k - k0);
  __m256 v = _mm256_maskload_ps(row + k0, mask);
  if (pqs) v = _mm256_mul_ps(v, _mm256_maskload_ps(pqs + k0, mask));
  return v;
}

// Doubled E2M1 code of v (RNE on the E2M1 grid, saturating at ±6, NaN -> 0)
// as int32 in [-12, 12]; the steps and tie rule of the AVX-512 version.
inline __m256i doubled_e2m1(__m256 v) {
  __m256 a = _mm256_max_ps(abs_ps(v), _mm256_setzero_ps());  // NaN -> 0
  a = _mm256_min_ps(a, _mm256_set1_ps(6.0f));
  const __m256 below2 = _mm256_cmp_ps(a, _mm256_set1_ps(2.0f), _CMP_LT_OQ);
  const __m256 below4 = _mm256_cmp_ps(a, _mm256_set1_ps(4.0f), _CMP_LT_OQ);
  __m256 up = _mm256_blendv_ps(_mm256_set1_ps(0.5f), _mm256_set1_ps(1.0f), below4);
  __m256 back = _mm256_blendv_ps(_mm256_set1_ps(4.0f), _mm256_set1_ps(2.0f), below4);
  up = _mm256_blendv_ps(up, _mm256_set1_ps(2.0f), below2);
  back = _mm256_blendv_ps(back, _mm256_set1_ps(1.0f), below2);
  const __m256 r = _mm256_round_ps(_mm256_mul_ps(a, up), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256i d = _mm256_cvtps_epi32(_mm256_mul_ps(r, back));
  // vpsignd negates where v's bits are negative (sign set) and zeroes where
  // they are 0 (+0.0, where d is 0 anyway).
  return _mm256_sign_epi32(d, _mm256_castps_si256(v));
}

float global_amax(const float* x, int64_t m, int64_t k, const float* pqs) {
  std::vector<float> part(static_cast<size_t>(std::max(1, num_threads())), 0.0f);
  util::parallel_for(m, 1, [&](int64_t begin, int64_t end, int thread) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t r = begin; r < end; ++r)
      for (int64_t k0 = 0; k0 < k; k0 += 8) acc = max_abs(load_scaled(x + r * k, pqs, k0, k), acc);
    part[static_cast<size_t>(thread)] = hmax(acc);
  });
  float a = 0.0f;
  for (float p : part) a = std::max(a, p);
  return a;
}

}  // namespace

void nvfp4_quantize_avx2(const float* x, int64_t m, int64_t k, int64_t blocks, const float* pqs,
                         std::optional<float> input_scale, Nvfp4Activation& out) {
  if (!nvfp4_start_activation(m, k, blocks, input_scale, [&] { return global_amax(x, m, k, pqs); }, out)) return;
  const float g = out.global;
  util::parallel_for(m, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = x + r * k;
      for (int64_t b = 0; b < blocks; ++b) {
        const __m256 v0 = load_scaled(row, pqs, b * 16, k), v1 = load_scaled(row, pqs, b * 16 + 8, k);
        const float a = hmax(max_abs(v1, max_abs(v0, _mm256_setzero_ps())));
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
        const __m256 vb = _mm256_set1_ps(block);
        const __m256i d0 = doubled_e2m1(_mm256_div_ps(v0, vb)), d1 = doubled_e2m1(_mm256_div_ps(v1, vb));
        // packs interleaves the 128-bit lanes: [d0 0-3, d1 0-3 | d0 4-7, d1 4-7];
        // vpermq 0xD8 restores k order before the final 16 -> 8 bit pack.
        const __m256i w16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(d0, d1), 0xD8);
        const __m128i w8 = _mm_packs_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q), w8);
        out.comp[at] = -12 * hsum(_mm256_add_epi32(d0, d1));
      }
    }
  });
}

namespace {

// Nibble -> 12 + 2·e2m1(nibble), the same table in both 128-bit lanes.
inline __m256i weight_lut() {
  return _mm256_broadcastsi128_si256(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
}

// 8 E4M3 codes -> f32, exact for every non-NaN code (the AVX-512 bit trick:
// magnitude bits into an f32 exponent/mantissa, times 2^120 to rebias). The
// fields are cut out with shifts, not masks, to keep registers free.
inline __m256 decode_e4m3x8(const uint8_t* p) {
  const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m256i mag = _mm256_srli_epi32(_mm256_slli_epi32(c, 25), 5);   // bits 0-6 -> 20-26
  const __m256i sign = _mm256_slli_epi32(_mm256_srli_epi32(c, 7), 31);  // bit 7 -> 31
  return _mm256_mul_ps(_mm256_castsi256_ps(_mm256_or_si256(mag, sign)), _mm256_set1_ps(0x1p120f));
}

// Weight part q (k = 16b + 4q .. +3 per row lane) of half h (rows 8h..8h+7)
// of a packed 144-byte panel block, as u8 12 + 2·e2m1: parts 0/1 are the low
// and high nibbles of bytes [32h, 32h+32), parts 2/3 those of [64+32h, ...).
inline __m256i raw_part(const uint8_t* block, int h, int q, __m256i lut) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + (q / 2) * 64 + 32 * h));
  const __m256i nib = q % 2 == 0 ? v : _mm256_srli_epi16(v, 4);
  return _mm256_shuffle_epi8(lut, _mm256_and_si256(nib, _mm256_set1_epi8(0x0F)));
}

inline __m256 raw_scales(const uint8_t* block, int h) { return decode_e4m3x8(block + 128 + 8 * h); }

// The decoded copy: per block and half, 4 parts × 32 B then 8 f32 scales.
inline __m256i decoded_part(const uint8_t* block, int h, int q) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(block + h * kDecodedHalfBytes + 32 * q));
}

inline __m256 decoded_scales(const uint8_t* block, int h) {
  return _mm256_load_ps(reinterpret_cast<const float*>(block + h * kDecodedHalfBytes + 128));
}

inline __m256i bcast32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// d += the 4-product dot of one part: int32 with AVX-VNNI; without it i16
// lanes of pair sums (vpmaddubsw), widened by vpmaddwd after the 4th part.
// (The empty asm keeps g++ from reassociating the i16 sums into a tree,
// which kept more products live and spilled accumulators.)
template <bool Vnni>
inline __m256i part_dot(__m256i d, __m256i w, __m256i x) {
  if constexpr (Vnni) {
    return _mm256_dpbusd_avx_epi32(d, w, x);
  } else {
    d = _mm256_add_epi16(d, _mm256_maddubs_epi16(w, x));
    __asm__("" : "+x"(d));
    return d;
  }
}

// Small M streams the raw panels once; the hardware prefetchers alone leave
// the M = 1 stream well below the read bandwidth (see the AVX-512 kernel).
constexpr int64_t kStreamPrefetchBytes = 2048;

struct Job {
  const Nvfp4Activation* act;
  const float* bias;
  float* y;
  int64_t n;
  float alpha;
};

// acc[MR][2J] (row × half-panel) over all blocks. src[j] points at panel j's
// first block: raw 144-byte blocks, or decoded kDecodedBlockBytes blocks.
// Per block the loop is part-major: each row's activation part is broadcast
// once and each weight part decoded once, then used by every (row, half)
// pair, so only MR broadcasts, one weight vector and the 2·MR·2J int/float
// accumulators are live (<= 13 ymm for the tiles used: 1×2 and 2×1 panels).
template <int MR, int J, bool Vnni, bool Decoded>
void micro(const Job& job, int64_t m0, const uint8_t* const* src, int64_t panel0) {
  const Nvfp4Activation& a = *job.act;
  const int64_t blocks = a.blocks;
  constexpr int H = 2 * J;
  __m256 acc[MR][H];
  MIXQ_UNROLL
  for (int i = 0; i < MR; ++i)
    MIXQ_UNROLL
    for (int h = 0; h < H; ++h) acc[i][h] = _mm256_setzero_ps();
  const __m256i lut = weight_lut();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk[J];
    MIXQ_UNROLL
    for (int j = 0; j < J; ++j) {
      blk[j] = src[j] + b * (Decoded ? kDecodedBlockBytes : kNvfp4PanelBlockBytes);
      if constexpr (!Decoded) {
        // Raw panels stream from DRAM: prefetch the block's lines (a 144-byte
        // block spans up to 3) kStreamPrefetchBytes ahead, as the AVX-512 kernel.
        const char* ahead = reinterpret_cast<const char*>(blk[j]) + kStreamPrefetchBytes;
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + 64, _MM_HINT_T0);
        _mm_prefetch(ahead + 128, _MM_HINT_T0);
      }
    }
    const int8_t* xq = a.q.data() + (m0 * blocks + b) * 16;
    const int64_t xstride = blocks * 16;
    __m256i d[MR][H];
    MIXQ_UNROLL
    for (int i = 0; i < MR; ++i)
      MIXQ_UNROLL
      for (int h = 0; h < H; ++h) d[i][h] = _mm256_setzero_si256();
    MIXQ_UNROLL
    for (int q = 0; q < 4; ++q) {
      __m256i x[MR];
      MIXQ_UNROLL
      for (int i = 0; i < MR; ++i) x[i] = bcast32(xq + i * xstride + 4 * q);
      MIXQ_UNROLL
      for (int h = 0; h < H; ++h) {
        const __m256i w = Decoded ? decoded_part(blk[h / 2], h % 2, q) : raw_part(blk[h / 2], h % 2, q, lut);
        MIXQ_UNROLL
        for (int i = 0; i < MR; ++i) d[i][h] = part_dot<Vnni>(d[i][h], w, x[i]);
      }
    }
    // acc += float(dot4 + comp)·(S_w·S_x), the reference's block order.
    MIXQ_UNROLL
    for (int h = 0; h < H; ++h) {
      const __m256 s = Decoded ? decoded_scales(blk[h / 2], h % 2) : raw_scales(blk[h / 2], h % 2);
      MIXQ_UNROLL
      for (int i = 0; i < MR; ++i) {
        const size_t row = static_cast<size_t>((m0 + i) * blocks + b);
        __m256i dot = d[i][h];
        if constexpr (!Vnni) dot = _mm256_madd_epi16(dot, _mm256_set1_epi16(1));
        dot = _mm256_add_epi32(dot, _mm256_set1_epi32(a.comp[row]));
        const __m256 sxw = _mm256_mul_ps(s, _mm256_set1_ps(a.scale[row]));
        acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), sxw, acc[i][h]);
      }
    }
  }
  const __m256 quarter = _mm256_set1_ps(0.25f), alpha = _mm256_set1_ps(job.alpha);
  MIXQ_UNROLL
  for (int h = 0; h < H; ++h) {
    const int64_t n0 = panel0 * 16 + h * 8;
    if (n0 >= job.n) break;
    const __m256i mask = lane_mask(job.n - n0);
    const __m256 bias = job.bias ? _mm256_maskload_ps(job.bias + n0, mask) : _mm256_setzero_ps();
    MIXQ_UNROLL
    for (int i = 0; i < MR; ++i) {
      __m256 out = rounded(_mm256_mul_ps(_mm256_mul_ps(acc[i][h], quarter), alpha));
      if (job.bias) out = _mm256_add_ps(out, bias);
      _mm256_maskstore_ps(job.y + (m0 + i) * job.n + n0, mask, out);
    }
  }
}

// Rows [m0, m1) against J panels, in MR-row steps with smaller tails.
template <int MR, int J, bool Vnni, bool Decoded>
void rows(const Job& job, int64_t m0, int64_t m1, const uint8_t* const* src, int64_t panel0) {
  int64_t m = m0;
  for (; m + MR <= m1; m += MR) micro<MR, J, Vnni, Decoded>(job, m, src, panel0);
  if constexpr (MR > 1) {
    if (m < m1) rows<MR - 1, J, Vnni, Decoded>(job, m, m1, src, panel0);
  }
}

// Panels [p0, p1) in groups of J (the last group may be narrower), raw decode.
template <int MR, int J, bool Vnni>
void small_m(const Job& job, const Nvfp4Packed& w, int64_t p0, int64_t p1) {
  const int64_t stride = w.blocks * kNvfp4PanelBlockBytes;
  int64_t p = p0;
  for (; p + J <= p1; p += J) {
    const uint8_t* src[J];
    for (int j = 0; j < J; ++j) src[j] = w.data.data() + (p + j) * stride;
    rows<MR, J, Vnni, false>(job, 0, job.act->m, src, p);
  }
  for (; p < p1; ++p) {
    const uint8_t* src[1] = {w.data.data() + p * stride};
    rows<MR, 1, Vnni, false>(job, 0, job.act->m, src, p);
  }
}

// Decodes panel `p` (all blocks, both halves) into dst.
void decode_panel(const Nvfp4Packed& w, int64_t p, uint8_t* dst) {
  const __m256i lut = weight_lut();
  const uint8_t* src = w.data.data() + p * w.blocks * kNvfp4PanelBlockBytes;
  for (int64_t b = 0; b < w.blocks; ++b)
    for (int h = 0; h < 2; ++h) {
      const uint8_t* block = src + b * kNvfp4PanelBlockBytes;
      uint8_t* out = dst + b * kDecodedBlockBytes + h * kDecodedHalfBytes;
      for (int q = 0; q < 4; ++q)
        _mm256_store_si256(reinterpret_cast<__m256i*>(out + 32 * q), raw_part(block, h, q, lut));
      _mm256_store_ps(reinterpret_cast<float*>(out + 128), raw_scales(block, h));
    }
}

constexpr int kLargeMR = 2;

template <bool Vnni>
void large_m(const Job& job, const Nvfp4Packed& w, int64_t p0, int64_t p1) {
  const size_t panel_bytes = static_cast<size_t>(w.blocks * kDecodedBlockBytes);
  thread_local std::vector<uint8_t> buffer;
  if (buffer.size() < panel_bytes + 32) buffer.resize(panel_bytes + 32);
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buffer.data()) + 31) & ~uintptr_t{31});
  const int64_t m = job.act->m;
  for (int64_t mc = 0; mc < m; mc += kRowChunk) {
    const int64_t mend = std::min(m, mc + kRowChunk);
    for (int64_t p = p0; p < p1; ++p) {
      decode_panel(w, p, base);
      const uint8_t* src[1] = {base};
      rows<kLargeMR, 1, Vnni, true>(job, mc, mend, src, p);
    }
  }
}

template <bool Vnni>
void gemm(const Job& job, const Nvfp4Packed& w) {
  const int64_t m = job.act->m;
  if (m >= kLargeM) {
    util::parallel_for(w.panels, 1, [&](int64_t p0, int64_t p1, int) { large_m<Vnni>(job, w, p0, p1); });
  } else if (m == 1) {
    util::parallel_for(w.panels, 2, [&](int64_t p0, int64_t p1, int) { small_m<1, 2, Vnni>(job, w, p0, p1); });
  } else {
    util::parallel_for(w.panels, 1, [&](int64_t p0, int64_t p1, int) { small_m<2, 1, Vnni>(job, w, p0, p1); });
  }
}

}  // namespace

void nvfp4_gemm_avx2(const Nvfp4Activation& act, const Nvfp4Packed& w, const float* bias, float* y,
                     bool vnni) {
  if (act.blocks != w.blocks) fail("nvfp4: activation has {} blocks, weight {}", act.blocks, w.blocks);
  if (act.m <= 0 || w.n <= 0) return;
  const Job job{&act, bias, y, w.n, act.global * w.global};
  if (vnni) gemm<true>(job, w);
  else gemm<false>(job, w);
}

}  // namespace mixq::kernels::x86
