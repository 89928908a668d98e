#pragma once
// NVFP4 W4A4 activation quantization and GEMM (layout and arithmetic:
// nvfp4_w4a4.hpp) over a vector type V (simd_traits.hpp), compiled once per
// target by nvfp4_w4a4.avx2.cpp, .avxvnni.cpp and .avx512vbmi.cpp on the same packed
// weights. A 16-row panel is 16 / kLanes vectors: one zmm, or two ymm
// "halves" (bytes [32h, 32h+32) and [64+32h, ...) of a packed block hold half
// h's k-octets, bytes [128+8h, 136+8h) its scales).
//
// Decode: a nibble becomes the unsigned byte 12 + 2·e2m1 by a 16-entry table
// lookup (vpermb on AVX-512 VBMI, vpshufb on AVX2), the unsigned operand of
// the block dot; the doubled activation code (-12..12) is the signed one.
//
// Small M (< kLargeM rows): weights are streamed once, decoded in registers
// and used for every row; each thread takes a contiguous range of panels and
// walks J panels side by side (J independent read streams). Large M: per
// chunk of kRowChunk rows (activations stay in L2), each group of J panels is
// decoded once into a small per-thread buffer (L2) and then reused by every
// MR-row micro-kernel call.
//
// Exactness: block dots are exact int32; every block adds
// fma(float(dot4 + comp), S_w·S_x, acc) in block order and the result is
// (acc·0.25)·(g_x·g_w) + bias, which equals the reference bit for bit
// (dot4 = 4·dot and acc carries the same factor 4 exactly).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "util/parallel.hpp"
#include "kernels/x86/nvfp4_w4a4.hpp"
#include "kernels/x86/simd_traits.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "numeric/swizzle.hpp"
#include "mixq/threads.hpp"

namespace mixq::kernels::x86 {
namespace {

constexpr int64_t kNvfp4LargeM = 32;
constexpr int64_t kNvfp4RowChunk = 128;
// Small M streams the raw panels once from DRAM; the hardware prefetchers
// alone left the M = 1 stream well below the read bandwidth (bench_linear_more
// re-measures it).
constexpr int64_t kNvfp4StreamPrefetchBytes = 2048;

// Register tiles per target (rows MR × panels J) for M = 1, M = 2, 3 <= M <
// kLargeM and large M; whether decoded panels are loaded up front (all J
// panels' parts, then the rows); and how many column vectors share one pass
// over the 4 weight parts (kDotGroup, 0 = the whole tile: each activation
// broadcast serves all of them). AVX-512: 32 zmm hold 6 × 2 panels with both
// decoded panels loaded, one panel per pass; AVX2's 16 ymm hold 2 × 1 or 1 × 2
// panels (2 halves each) in one pass. g++ 12 keeps every accumulator in a
// register with these (objdump). Chosen by timing M = 1, 2, 16 and 4096
// (bench_linear_more on AVX-512, `mixq bench --format nvfp4` on AVX2).
template <int Lanes>
struct Nvfp4Tile;
template <>
struct Nvfp4Tile<16> {
  static constexpr int kJ1 = 4, kMR2 = 2, kJ2 = 4, kMidMR = 4, kMidJ = 2, kLargeMR = 6, kLargeJ = 2;
  static constexpr bool kPreloadDecoded = true;
  static constexpr int kDotGroup = 1;
};
template <>
struct Nvfp4Tile<8> {
  static constexpr int kJ1 = 2, kMR2 = 2, kJ2 = 1, kMidMR = 2, kMidJ = 1, kLargeMR = 2, kLargeJ = 1;
  static constexpr bool kPreloadDecoded = false;
  static constexpr int kDotGroup = 0;
};

// RNE of t in [0, 448] to the E4M3 grid, as f32 (what f32_to_e4m3 then
// e4m3_to_f32 give): subnormals on the 2^-9 grid, normals to 3 mantissa bits.
inline float e4m3_round(float t) {
  if (t < 0x1p-6f) return std::nearbyint(t * 512.0f) * (1.0f / 512.0f);
  uint32_t u = std::bit_cast<uint32_t>(t);
  u += 0x7FFFFu + ((u >> 20) & 1u);
  return std::bit_cast<float>(u & 0xFFF00000u);
}

// |x| maxima ignoring NaN (vmaxps returns its second operand on NaN).
template <class V>
inline typename V::F max_abs(typename V::F v, typename V::F acc) {
  return V::max(V::abs(v), acc);
}

// x[k0, k0+kLanes) (times pre_quant_scale) with zeros past k.
template <class V>
inline typename V::F load_scaled(const float* row, const float* pqs, int64_t k0, int64_t k) {
  const typename V::M mask = V::mask(k - k0);
  typename V::F v = V::loadz(mask, row + k0);
  if (pqs) v = V::mul(v, V::loadz(mask, pqs + k0));
  return v;
}

// Doubled E2M1 code (RNE on the E2M1 grid, saturating at ±6, NaN -> 0) of
// v = x / T as int32 in [-12, 12]. Steps: 0.5 below 2, 1 below 4, 2 above;
// rounding a·(1/step) to an integer (ties even) is the E2M1 tie rule.
template <class V>
inline typename V::I doubled_e2m1(typename V::F v) {
  typename V::F a = V::max(V::abs(v), V::zero());  // NaN -> 0
  a = V::min(a, V::set1(6.0f));
  const typename V::MF below2 = V::lt(a, V::set1(2.0f));
  const typename V::MF below4 = V::lt(a, V::set1(4.0f));
  typename V::F up = V::select(below4, V::set1(1.0f), V::set1(0.5f));
  typename V::F back = V::select(below4, V::set1(2.0f), V::set1(4.0f));
  up = V::select(below2, V::set1(2.0f), up);
  back = V::select(below2, V::set1(1.0f), back);
  const typename V::F r = V::round(V::mul(a, up));
  return V::negate_if_negative(V::cvtr(V::mul(r, back)), v);
}

template <class V>
float global_amax(const float* x, int64_t m, int64_t k, const float* pqs) {
  std::vector<float> part(static_cast<size_t>(std::max(1, num_threads())), 0.0f);
  util::parallel_for(m, 1, [&](int64_t begin, int64_t end, int thread) {
    typename V::F acc = V::zero();
    for (int64_t r = begin; r < end; ++r)
      for (int64_t k0 = 0; k0 < k; k0 += V::kLanes) acc = max_abs<V>(load_scaled<V>(x + r * k, pqs, k0, k), acc);
    part[static_cast<size_t>(thread)] = V::reduce_max(acc);
  });
  float a = 0.0f;
  for (float p : part) a = std::max(a, p);
  return a;
}

template <class V>
__attribute__((always_inline)) inline void nvfp4_quantize(const float* x, int64_t m, int64_t k, int64_t blocks,
                                                          const float* pqs, std::optional<float> input_scale,
                                                          Nvfp4Activation& out) {
  constexpr int L = V::kLanes, H = 16 / L;
  if (!nvfp4_start_activation(m, k, blocks, input_scale, [&] { return global_amax<V>(x, m, k, pqs); }, out)) return;
  const float g = out.global;
  util::parallel_for(m, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = x + r * k;
      for (int64_t b = 0; b < blocks; ++b) {
        typename V::F v[H];
        typename V::F amax = V::zero();
        for (int h = 0; h < H; ++h) {
          v[h] = load_scaled<V>(row, pqs, b * 16 + h * L, k);
          amax = max_abs<V>(v[h], amax);
        }
        const float a = V::reduce_max(amax);
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
        const typename V::F vb = V::set1(block);
        typename V::I d[H];
        for (int h = 0; h < H; ++h) d[h] = doubled_e2m1<V>(V::div(v[h], vb));
        V::store_i8x16(q, d);
        typename V::I sum = d[0];
        for (int h = 1; h < H; ++h) sum = V::addi(sum, d[h]);
        out.comp[at] = -12 * V::reduce_add(sum);
      }
    }
  });
}

// ---- GEMM ----

// Nibble code -> 12 + 2·e2m1(code).
constexpr int8_t kWeightTable[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};

// Decoded copy of a packed block, per vector h of columns: the 4 weight parts
// (kLanes·4 bytes each) then kLanes f32 scales; 320 bytes per block.
template <class V>
struct Decoded {
  static constexpr int64_t kVecBytes = 5 * 4 * V::kLanes;  // decode_panel_in_place repeats these
  static constexpr int64_t kBlockBytes = 320;
};

// Weight part q (k = 16b + 4q .. +3 per row lane) of vector h (rows
// kLanes·h ..) of a packed 144-byte block: parts 0/1 are the low and high
// nibbles of bytes [0, 64), parts 2/3 those of [64, 128).
template <class V>
inline typename V::I raw_part(const uint8_t* block, int h, int q, typename V::I table) {
  const typename V::I v = V::loadi(block + (q / 2) * 64 + 4 * V::kLanes * h);
  return V::lookup16(table, q % 2 == 0 ? v : V::template srli16<4>(v));
}

// kLanes E4M3 codes -> f32, exact for every non-NaN code (NaN codes are refused
// at pack time): the 7 magnitude bits land in an f32 exponent/mantissa
// (denormal for E = 0) and a multiply by 2^120 rebiases. The fields are cut out
// with shifts, not masks, to keep registers free.
template <class V>
inline typename V::F raw_scales(const uint8_t* block, int h) {
  const typename V::I c = V::load_u8(block + 128 + V::kLanes * h);
  const typename V::I mag = V::template srli<5>(V::template slli<25>(c));   // bits 0-6 -> 20-26
  const typename V::I sign = V::template slli<31>(V::template srli<7>(c));  // bit 7 -> 31
  return V::mul(V::as_float(V::ori(mag, sign)), V::set1(0x1p120f));
}

struct Nvfp4Job {
  const Nvfp4Activation* act;
  const float* bias;
  float* y;
  int64_t n;
  float alpha;
};

// acc[MR][U] (row × vector of columns, U = J·16/kLanes) over all blocks.
// src[j] points at panel j's first block: raw 144-byte blocks, or decoded
// ones. A block dot of row i and column vector u is dot_begin(comp), four
// dot_step (one per weight part q) and dot_end, then one FMA:
//   acc += float(dot4 + comp)·(S_w·S_x), the reference's block order.
// Loop orders (chosen from objdump so that g++ 12 keeps every accumulator in
// a register): decoded panels on AVX-512 are loaded up front (all U vectors'
// parts and scales) and rows walk them; otherwise groups of kDotGroup column
// vectors: per weight part q, each row's 4 activation bytes are broadcast
// once, and each vector's part is decoded (or loaded) once and goes through
// every row, so only the MR·G dot accumulators, MR broadcasts and one weight
// vector are live.
template <class V, int MR, int J, bool Dec>
void micro(const Nvfp4Job& job, int64_t m0, const uint8_t* const* src, int64_t panel0) {
  using F = typename V::F;
  using I = typename V::I;
  constexpr int L = V::kLanes, H = 16 / L, U = J * H;
  const Nvfp4Activation& a = *job.act;
  const int64_t blocks = a.blocks;
  F acc[MR][U];
  MIXQ_UNROLL
  for (int i = 0; i < MR; ++i)
    MIXQ_UNROLL
    for (int u = 0; u < U; ++u) acc[i][u] = V::zero();
  const I table = V::table16(kWeightTable);
  auto row_of = [&](int i, int64_t b) { return static_cast<size_t>((m0 + i) * blocks + b); };
  auto finish = [&](int i, int64_t b, I d, F s, F& acc_iu) {
    const F sx = V::set1(a.scale[row_of(i, b)]);
    acc_iu = V::fmadd(V::cvt(V::dot_end(d, a.comp[row_of(i, b)])), V::mul(s, sx), acc_iu);
  };
  auto part = [&](const uint8_t* blk, int h, int q) {
    if constexpr (Dec) return V::loadi_a(blk + h * Decoded<V>::kVecBytes + 4 * L * q);
    else return raw_part<V>(blk, h, q, table);
  };
  auto scales = [&](const uint8_t* blk, int h) {
    if constexpr (Dec) return V::load_a(reinterpret_cast<const float*>(blk + h * Decoded<V>::kVecBytes + 16 * L));
    else return raw_scales<V>(blk, h);
  };
  constexpr int64_t kBlockBytes = Dec ? Decoded<V>::kBlockBytes : kNvfp4PanelBlockBytes;
  for (int64_t b = 0; b < blocks; ++b) {
    if constexpr (Dec && Nvfp4Tile<V::kLanes>::kPreloadDecoded) {
      I w[U][4];
      F s[U];
      MIXQ_UNROLL
      for (int u = 0; u < U; ++u) {
        const uint8_t* blk = src[u / H] + b * kBlockBytes;
        for (int q = 0; q < 4; ++q) w[u][q] = part(blk, u % H, q);
        s[u] = scales(blk, u % H);
      }
      MIXQ_UNROLL
      for (int i = 0; i < MR; ++i)
        MIXQ_UNROLL
        for (int u = 0; u < U; ++u) {
          const int8_t* x = a.q.data() + row_of(i, b) * 16;
          I d = V::dot_begin(a.comp[row_of(i, b)]);
          for (int q = 0; q < 4; ++q) d = V::dot_step(d, w[u][q], V::bcast4(x + 4 * q));
          finish(i, b, d, s[u], acc[i][u]);
        }
    } else {
      constexpr int G = Nvfp4Tile<V::kLanes>::kDotGroup == 0 ? U : Nvfp4Tile<V::kLanes>::kDotGroup;
      MIXQ_UNROLL
      for (int u0 = 0; u0 < U; u0 += G) {
        if (!Dec) {
          // Raw panels stream from DRAM: prefetch every line of the block
          // (a 144-byte block spans up to 3) kNvfp4StreamPrefetchBytes ahead.
          MIXQ_UNROLL
          for (int u = u0; u < u0 + G; u += H) {
            const char* ahead = reinterpret_cast<const char*>(src[u / H] + b * kBlockBytes) + kNvfp4StreamPrefetchBytes;
            _mm_prefetch(ahead, _MM_HINT_T0);
            _mm_prefetch(ahead + 64, _MM_HINT_T0);
            _mm_prefetch(ahead + 128, _MM_HINT_T0);
          }
        }
        I d[MR][G];
        MIXQ_UNROLL
        for (int i = 0; i < MR; ++i)
          MIXQ_UNROLL
          for (int g = 0; g < G; ++g) d[i][g] = V::dot_begin(a.comp[row_of(i, b)]);
        MIXQ_UNROLL
        for (int q = 0; q < 4; ++q) {
          I x[MR];
          MIXQ_UNROLL
          for (int i = 0; i < MR; ++i) x[i] = V::bcast4(a.q.data() + row_of(i, b) * 16 + 4 * q);
          MIXQ_UNROLL
          for (int g = 0; g < G; ++g) {
            const I w = part(src[(u0 + g) / H] + b * kBlockBytes, (u0 + g) % H, q);
            MIXQ_UNROLL
            for (int i = 0; i < MR; ++i) d[i][g] = V::dot_step(d[i][g], w, x[i]);
          }
        }
        MIXQ_UNROLL
        for (int g = 0; g < G; ++g) {
          const F s = scales(src[(u0 + g) / H] + b * kBlockBytes, (u0 + g) % H);
          MIXQ_UNROLL
          for (int i = 0; i < MR; ++i) finish(i, b, d[i][g], s, acc[i][u0 + g]);
        }
      }
    }
  }
  const F quarter = V::set1(0.25f), alpha = V::set1(job.alpha);
  MIXQ_UNROLL
  for (int u = 0; u < U; ++u) {
    const int64_t n0 = panel0 * 16 + u * L;
    if (n0 >= job.n) break;
    const typename V::M mask = V::mask(job.n - n0);
    const F bias = job.bias ? V::loadz(mask, job.bias + n0) : V::zero();
    MIXQ_UNROLL
    for (int i = 0; i < MR; ++i) {
      F out = rounded(V::mul(V::mul(acc[i][u], quarter), alpha));
      if (job.bias) out = V::add(out, bias);
      V::store(job.y + (m0 + i) * job.n + n0, mask, out);
    }
  }
}

// Rows [m0, m1) against J panels, in MR-row steps with smaller tails.
template <class V, int MR, int J, bool Dec>
void rows(const Nvfp4Job& job, int64_t m0, int64_t m1, const uint8_t* const* src, int64_t panel0) {
  int64_t m = m0;
  for (; m + MR <= m1; m += MR) micro<V, MR, J, Dec>(job, m, src, panel0);
  if constexpr (MR > 1) {
    if (m < m1) rows<V, MR - 1, J, Dec>(job, m, m1, src, panel0);
  }
}

// Panels [p0, p1) in groups of J (the last group may be narrower), raw decode.
template <class V, int MR, int J>
void small_m(const Nvfp4Job& job, const Nvfp4Weights& w, int64_t p0, int64_t p1) {
  const int64_t stride = w.blocks * kNvfp4PanelBlockBytes;
  int64_t p = p0;
  for (; p + J <= p1; p += J) {
    const uint8_t* src[J];
    for (int j = 0; j < J; ++j) src[j] = w.data.data() + (p + j) * stride;
    rows<V, MR, J, false>(job, 0, job.act->m, src, p);
  }
  for (; p < p1; ++p) {
    const uint8_t* src[1] = {w.data.data() + p * stride};
    rows<V, MR, 1, false>(job, 0, job.act->m, src, p);
  }
}

// Decodes panel `p` (all blocks) into dst (Decoded<V> layout).
template <class V>
void decode_panel(const Nvfp4Weights& w, int64_t p, uint8_t* dst) {
  constexpr int L = V::kLanes, H = 16 / L;
  const typename V::I table = V::table16(kWeightTable);
  const uint8_t* src = w.data.data() + p * w.blocks * kNvfp4PanelBlockBytes;
  for (int64_t b = 0; b < w.blocks; ++b)
    for (int h = 0; h < H; ++h) {
      const uint8_t* block = src + b * kNvfp4PanelBlockBytes;
      uint8_t* out = dst + b * Decoded<V>::kBlockBytes + h * Decoded<V>::kVecBytes;
      for (int q = 0; q < 4; ++q) V::storei_a(out + 4 * L * q, raw_part<V>(block, h, q, table));
      V::store_a(reinterpret_cast<float*>(out + 16 * L), raw_scales<V>(block, h));
    }
}

// ---- in place (Nvfp4Weights::in_place) ----

// The k-lane GEMV for M <= kNvfp4InPlaceGemvM. A weight row's 4 blocks (32
// code bytes, one ymm c) decode into two ymm: the low nibbles (odd k) and
// the high nibbles (even k), each as bytes 12 + 2·e2m1 with 128-bit lane l
// holding blocks b + 2l, b + 2l + 1 (8 bytes each). The activation is
// reordered once per call to match (gemv_activation). The two 4-product
// dots give a row 8 int32: 2 partial sums of each of the 4 blocks; for 8
// rows, sum_blocks moves them into one vector per block with a row per lane,
// and the epilogue is the packed kernels' own (the same FMA per block, in
// block order), so the result has the same bits.
// Σ over 4-byte lanes of odd·x_odd + even·x_even (u8 · s8), exact: on AVX2
// and AVX-512 targets two vpmaddubsw (pair sums <= 2·24·12 = 576 each, so
// <= 1152 after the i16 add) and one vpmaddwd; with AVX-VNNI two vpdpbusd.
template <class V>
struct GemvDot {
  static __m256i dot(__m256i odd, __m256i x_odd, __m256i even, __m256i x_even) {
    const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(odd, x_odd), _mm256_maddubs_epi16(even, x_even));
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  }
};
template <>
struct GemvDot<Avx2Vnni> {
  static __m256i dot(__m256i odd, __m256i x_odd, __m256i even, __m256i x_even) {
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), odd, x_odd), even, x_even);
  }
};

constexpr int64_t kGemvGroupBytes = 64;  // activation bytes per 4 blocks
constexpr int64_t kGemvScaleAhead = 4;   // groups of 4 blocks the scale prefetch runs ahead

// The activation as the GEMV reads it, made once per call: `codes` holds each
// 4 blocks (zero-padded to whole groups of 4) as the codes at odd k of the 4
// blocks (8 each, 32 bytes), then those at even k; `scale256` is S_x · 256
// per (row, block), exact (S_x is an E4M3 value), the factor gemv_scales
// leaves out of S_w.
struct GemvActivation {
  std::vector<int8_t> codes;
  std::vector<float> scale256;
};

inline GemvActivation gemv_activation(const Nvfp4Activation& a) {
  const int64_t groups = (a.blocks + 3) / 4;
  GemvActivation out;
  out.codes.assign(static_cast<size_t>(a.m * groups * kGemvGroupBytes), 0);
  out.scale256.resize(a.scale.size());
  for (size_t i = 0; i < a.scale.size(); ++i) out.scale256[i] = a.scale[i] * 256.0f;
  const __m128i order = _mm_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14);
  for (int64_t r = 0; r < a.m; ++r)
    for (int64_t b = 0; b < a.blocks; ++b) {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.q.data() + (r * a.blocks + b) * 16));
      const __m128i v = _mm_shuffle_epi8(q, order);
      int8_t* dst = out.codes.data() + (r * groups + b / 4) * kGemvGroupBytes + (b % 4) * 8;
      _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), v);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + 32), _mm_unpackhi_epi64(v, v));
    }
  return out;
}

// Rows P0..P3 (int32 lanes: 2 partial sums of blocks b, b + 1 | b + 2, b + 3)
// -> even: [Σ b of rows 0-3 | Σ b + 2], odd: [Σ b + 1 | Σ b + 3].
inline void sum_blocks(__m256i p0, __m256i p1, __m256i p2, __m256i p3, __m256i& even, __m256i& odd) {
  const __m256i lo01 = _mm256_unpacklo_epi32(p0, p1), hi01 = _mm256_unpackhi_epi32(p0, p1);
  const __m256i lo23 = _mm256_unpacklo_epi32(p2, p3), hi23 = _mm256_unpackhi_epi32(p2, p3);
  even = _mm256_add_epi32(_mm256_unpacklo_epi64(lo01, lo23), _mm256_unpackhi_epi64(lo01, lo23));
  odd = _mm256_add_epi32(_mm256_unpacklo_epi64(hi01, hi23), _mm256_unpackhi_epi64(hi01, hi23));
}

// s[j] = the 8 rows' scales of block 4g + j (quad: gemv_scale_quad, lanes
// rows 0, 2, 4, 6 | 1, 3, 5, 7) as f32, each exactly 1/256 of the E4M3
// value: E4M3's sign, 4 exponent and 3 mantissa bits are an FP16's sign, low
// 4 exponent bits and top 3 mantissa bits (FP16's bias is 15, not 7), for
// subnormals too. So the code in a u16's high byte, shifted right by 1
// (arithmetic) with bit 14 cleared, is the FP16 of value / 256; vcvtph2ps
// widens it exactly.
inline void gemv_scales(__m256i quad, __m256* s) {
  // u16 slot i of a 128-bit lane: block j0 + i / 4 of the lane's row i % 4.
  const __m256i blocks01 = _mm256_setr_epi8(-128, 0, -128, 4, -128, 8, -128, 12, -128, 1, -128, 5, -128, 9, -128, 13,
                                            -128, 0, -128, 4, -128, 8, -128, 12, -128, 1, -128, 5, -128, 9, -128, 13);
  const __m256i blocks23 = _mm256_setr_epi8(-128, 2, -128, 6, -128, 10, -128, 14, -128, 3, -128, 7, -128, 11, -128, 15,
                                            -128, 2, -128, 6, -128, 10, -128, 14, -128, 3, -128, 7, -128, 11, -128, 15);
  const __m256i clear14 = _mm256_set1_epi16(static_cast<int16_t>(0xBFFF));
  auto halves = [&](__m256i ctl) {  // low 128 bits: block j0's 8 FP16s, high: j0 + 1's
    const __m256i h = _mm256_and_si256(_mm256_srai_epi16(_mm256_shuffle_epi8(quad, ctl), 1), clear14);
    return _mm256_permute4x64_epi64(h, 0xD8);
  };
  const __m256i h01 = halves(blocks01), h23 = halves(blocks23);
  s[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(h01));
  s[1] = _mm256_cvtph_ps(_mm256_extracti128_si256(h01, 1));
  s[2] = _mm256_cvtph_ps(_mm256_castsi256_si128(h23));
  s[3] = _mm256_cvtph_ps(_mm256_extracti128_si256(h23, 1));
}

// The scales of 8 rows for a group of 4 blocks. The swizzled layout
// (docs/FORMATS.md §3.2) keeps rows r0 .. r0 + 7 (r0 % 8 == 0) in one
// 128-byte span, row t's 16 bytes at 16·t holding the 4 scales of 4 rows
// 32 apart (one u32 each); `pick` moves this band's u32 of each 16 bytes
// into place. Lanes: rows 0, 2, 4, 6 | 1, 3, 5, 7 (each 32-byte load holds
// two rows, one per 128-bit lane). Reads only the 128 bytes.
inline __m256i gemv_scale_quad(const uint8_t* span, const __m256i* pick) {
  __m256i quad = _mm256_setzero_si256();
  MIXQ_UNROLL
  for (int j = 0; j < 4; ++j)
    quad = _mm256_or_si256(
        quad, _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(span + 32 * j)), pick[j]));
  return quad;
}

// pick[j] for gemv_scale_quad: in each 128-bit lane, bytes 4·band .. +3 to
// u32 j, every other byte zeroed.
struct GemvScalePicks {
  __m256i v[4];
};
inline const GemvScalePicks& gemv_scale_picks(int band) {
  static const auto picks = [] {
    std::array<GemvScalePicks, 4> all;
    for (int b = 0; b < 4; ++b)
      for (int j = 0; j < 4; ++j) {
        alignas(32) int8_t bytes[32];
        for (int i = 0; i < 32; ++i) bytes[i] = (i % 16) / 4 == j ? static_cast<int8_t>(4 * b + i % 4) : -128;
        all[static_cast<size_t>(b)].v[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(bytes));
      }
    return all;
  }();
  return picks[static_cast<size_t>(band)];
}

// Weight rows [r0, r0 + 8), row t at rows + t·stride, against activation row
// `i`. `scales`: the 128-byte span of the rows' swizzled scales of blocks
// 0-3 (gemv_scale_quad); those of blocks 4g.. are 512·g further.
template <class D>
void gemv_group(const Nvfp4Job& job, const Nvfp4Weights& w, const GemvActivation& xo, int64_t i, int64_t r0,
                const uint8_t* rows, int64_t stride, const uint8_t* scales, const __m256i* pick) {
  const Nvfp4Activation& a = *job.act;
  const int64_t blocks = w.blocks, groups = (blocks + 3) / 4;
  const __m256i table = Avx2::table16(kWeightTable), nibble = _mm256_set1_epi8(0x0F);
  const int8_t* x = xo.codes.data() + i * groups * kGemvGroupBytes;
  __m256 acc = _mm256_setzero_ps();
  // (S_w / 256)·(S_x·256) is S_w·S_x rounded once, as the packed kernels' S_w·S_x.
  auto finish = [&](int64_t b, __m256i d, __m256 sw) {
    const size_t at = static_cast<size_t>(i * blocks + b);
    const __m256 dot = _mm256_cvtepi32_ps(_mm256_add_epi32(d, _mm256_set1_epi32(a.comp[at])));
    acc = _mm256_fmadd_ps(dot, _mm256_mul_ps(sw, _mm256_set1_ps(xo.scale256[at])), acc);
  };
  // Blocks 4g .. 4g + count - 1; `load(p)` reads a row's code bytes there.
  auto group = [&](int64_t g, int count, auto load) {
    const __m256i x_odd = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + g * kGemvGroupBytes));
    const __m256i x_even = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + g * kGemvGroupBytes + 32));
    __m256i d[8];
    MIXQ_UNROLL
    for (int t = 0; t < 8; ++t) {
      const __m256i c = load(rows + t * stride + 32 * g);
      const __m256i odd = _mm256_shuffle_epi8(table, _mm256_and_si256(c, nibble));
      const __m256i even = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(c, 4), nibble));
      d[t] = D::dot(odd, x_odd, even, x_even);
    }
    const __m256i quad = gemv_scale_quad(scales + g * 512, pick);
    __m256i even_lo, odd_lo, even_hi, odd_hi;  // lanes: rows 0, 2, 4, 6 | 1, 3, 5, 7 (as quad)
    sum_blocks(d[0], d[2], d[4], d[6], even_lo, odd_lo);
    sum_blocks(d[1], d[3], d[5], d[7], even_hi, odd_hi);
    __m256 sw[4];
    gemv_scales(quad, sw);
    const int64_t b = 4 * g;
    finish(b, _mm256_permute2x128_si256(even_lo, even_hi, 0x20), sw[0]);
    if (count > 1) finish(b + 1, _mm256_permute2x128_si256(odd_lo, odd_hi, 0x20), sw[1]);
    if (count > 2) finish(b + 2, _mm256_permute2x128_si256(even_lo, even_hi, 0x31), sw[2]);
    if (count > 3) finish(b + 3, _mm256_permute2x128_si256(odd_lo, odd_hi, 0x31), sw[3]);
  };
  // The next group's rows follow these in memory: fetch 256 of its bytes per
  // step (8 rows x 32), so they are in cache when it starts.
  const char* next = reinterpret_cast<const char*>(rows + 8 * stride);
  const int64_t whole = blocks / 4;
  for (int64_t g = 0; g < whole; ++g, next += 256) {
    for (int l = 0; l < 4; ++l) _mm_prefetch(next + 64 * l, _MM_HINT_T0);
    // The 8 rows' scales of a group of 4 blocks are 128 bytes, 512 apart
    // from one group to the next: a strided walk the hardware does not
    // prefetch, and that stalled the loop (half the speed without this).
    const char* scales_ahead = reinterpret_cast<const char*>(scales + (g + kGemvScaleAhead) * 512);
    _mm_prefetch(scales_ahead, _MM_HINT_T0);
    _mm_prefetch(scales_ahead + 64, _MM_HINT_T0);
    group(g, 4, [](const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); });
  }
  if (const int left = static_cast<int>(blocks - 4 * whole)) {  // 1-3 blocks: 8 bytes each, never read past
    const __m256i mask = Avx2::mask(2 * left);
    group(whole, left, [&](const uint8_t* p) { return _mm256_maskload_epi32(reinterpret_cast<const int*>(p), mask); });
  }
  const int64_t valid = std::min<int64_t>(8, job.n - r0);
  const __m256i mask = Avx2::mask(valid);
  acc = _mm256_permutevar8x32_ps(acc, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));  // rows in order
  __m256 out = rounded(_mm256_mul_ps(_mm256_mul_ps(acc, _mm256_set1_ps(0.25f)), _mm256_set1_ps(job.alpha)));
  if (job.bias) out = _mm256_add_ps(out, _mm256_maskload_ps(job.bias + r0, mask));
  _mm256_maskstore_ps(job.y + i * job.n + r0, mask, out);
}

// Each group of 8 weight rows is read from DRAM once; a second activation row
// reuses it from cache (decoding it again). A last group of fewer than 8
// rows is copied (zero-padded) so that no read passes the tensor's end.
template <class V>
void gemv_in_place(const Nvfp4Job& job, const Nvfp4Weights& w) {
  using D = GemvDot<V>;
  const GemvActivation xo = gemv_activation(*job.act);
  const int64_t m = job.act->m;
  util::parallel_for((w.n + 7) / 8, 4, [&](int64_t g0, int64_t g1, int) {
    std::vector<uint8_t> tail;
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t r0 = g * 8;
      const uint8_t* rows = w.codes + r0 * w.row_bytes;
      if (r0 + 8 > w.n) {
        tail.assign(static_cast<size_t>(8 * w.row_bytes), 0);
        std::memcpy(tail.data(), rows, static_cast<size_t>((w.n - r0) * w.row_bytes));
        rows = tail.data();
      }
      const uint8_t* scales = w.scales + swizzled_offset(r0, 0, w.blocks);
      const int band = static_cast<int>(r0 % 128 / 32);
      const GemvScalePicks& pick = gemv_scale_picks(band);
      for (int64_t i = 0; i < m; ++i)
        gemv_group<D>(job, w, xo, i, r0, rows, w.row_bytes, scales - 4 * band, pick.v);
    }
  });
}

// decode_panel's result (Decoded<V>) read from the checkpoint's rows.
// Codes: two blocks of a row decode into one ymm (block b in the low 128-bit
// lane, b + 1 in the high, 16 bytes 12 + 2·e2m1 in k order each); four
// rows' vectors are one 4×4 transpose of 4-byte parts away from the layout
// (part q of lane j = k 16b + 4q .. of row j). Scales: gemv_scale_quad per 8
// rows and 4 blocks, put back in row order. Rows past n repeat row n - 1
// (codes) or read the scale tile's padding; their outputs are never stored.
// L: the target's lanes (V::kLanes); only AVX2 instructions either way, so
// nvfp4_decode_panel_in_place can test the AVX-512 layout on any AVX2 CPU.
template <int L>
void decode_panel_in_place(const Nvfp4Weights& w, int64_t p, uint8_t* dst) {
  constexpr int64_t kVec = 20 * L, kBlock = 320;  // Decoded<V>'s sizes
  const __m256i table = Avx2::table16(kWeightTable), nibble = _mm256_set1_epi8(0x0F);
  auto decode = [&](__m256i c) {  // c: the row's code bytes of blocks b, b + 1 in both lanes
    const __m256i hi = _mm256_srli_epi16(c, 4);
    const __m256i k_order = _mm256_blend_epi32(_mm256_unpacklo_epi8(hi, c), _mm256_unpackhi_epi8(hi, c), 0xF0);
    return _mm256_shuffle_epi8(table, _mm256_and_si256(k_order, nibble));
  };
  for (int j0 = 0; j0 < 16; j0 += 4) {
    const uint8_t* row[4];
    for (int t = 0; t < 4; ++t) row[t] = w.codes + std::min<int64_t>(p * 16 + j0 + t, w.n - 1) * w.row_bytes;
    uint8_t* out = dst + (j0 / L) * kVec + 4 * (j0 % L);
    for (int64_t b = 0; b < w.blocks; b += 2, out += 2 * kBlock) {
      const bool pair = b + 1 < w.blocks;  // else one block: 8 bytes, never read past the row
      __m256i v[4];
      for (int t = 0; t < 4; ++t) {
        const __m128i c = pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[t] + 8 * b))
                               : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row[t] + 8 * b));
        v[t] = decode(_mm256_broadcastsi128_si256(c));
      }
      const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
      const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
      const __m256i part[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                               _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
      for (int q = 0; q < 4; ++q) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + q * 4 * L), _mm256_castsi256_si128(part[q]));
        if (pair) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + kBlock + q * 4 * L), _mm256_extracti128_si256(part[q], 1));
      }
    }
  }
  const __m256i row_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int j0 = 0; j0 < 16; j0 += 8) {
    const int64_t r0 = p * 16 + j0;
    const int band = static_cast<int>(r0 % 128 / 32);
    const uint8_t* span = w.scales + swizzled_offset(r0, 0, w.blocks) - 4 * band;
    const GemvScalePicks& pick = gemv_scale_picks(band);
    uint8_t* out = dst + (j0 / L) * kVec + 16 * L + 4 * (j0 % L);
    for (int64_t b = 0; b < w.blocks; b += 4, span += 512) {
      const __m256i quad = _mm256_permutevar8x32_epi32(gemv_scale_quad(span, pick.v), row_order);
      __m256 sw[4];  // S_w / 256
      gemv_scales(quad, sw);
      for (int64_t j = 0; j < std::min<int64_t>(4, w.blocks - b); ++j)
        _mm256_storeu_ps(reinterpret_cast<float*>(out + (b + j) * kBlock), _mm256_mul_ps(sw[j], _mm256_set1_ps(256.0f)));
    }
  }
}

template <class V>
void large_m(const Nvfp4Job& job, const Nvfp4Weights& w, int64_t p0, int64_t p1) {
  using T = Nvfp4Tile<V::kLanes>;
  constexpr int J = T::kLargeJ;
  constexpr uintptr_t kAlign = 4 * V::kLanes;  // aligned vector loads
  const size_t panel_bytes = static_cast<size_t>(w.blocks * Decoded<V>::kBlockBytes);
  thread_local std::vector<uint8_t> buffer;
  if (buffer.size() < J * panel_bytes + kAlign) buffer.resize(J * panel_bytes + kAlign);
  uint8_t* base =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buffer.data()) + kAlign - 1) & ~(kAlign - 1));
  const int64_t m = job.act->m;
  for (int64_t mc = 0; mc < m; mc += kNvfp4RowChunk) {
    const int64_t mend = std::min(m, mc + kNvfp4RowChunk);
    for (int64_t p = p0; p < p1; p += J) {
      const int width = static_cast<int>(std::min<int64_t>(J, p1 - p));
      const uint8_t* src[J];
      for (int j = 0; j < width; ++j) {
        if (w.in_place()) decode_panel_in_place<V::kLanes>(w, p + j, base + j * panel_bytes);
        else decode_panel<V>(w, p + j, base + j * panel_bytes);
        src[j] = base + j * panel_bytes;
      }
      if (width == J)
        rows<V, T::kLargeMR, J, true>(job, mc, mend, src, p);
      else if constexpr (J > 1)
        rows<V, T::kLargeMR, 1, true>(job, mc, mend, src, p);
    }
  }
}

template <class V>
__attribute__((always_inline)) inline void nvfp4_gemm(const Nvfp4Activation& act, const Nvfp4Weights& w,
                                                      const float* bias, float* y) {
  using T = Nvfp4Tile<V::kLanes>;
  if (act.blocks != w.blocks) fail("nvfp4: activation has {} blocks, weight {}", act.blocks, w.blocks);
  const Nvfp4Job job{&act, bias, y, w.n, act.global * w.global};
  const int64_t m = act.m;
  if (m <= 0 || w.n <= 0) return;
  if (w.in_place() && m <= kNvfp4InPlaceGemvM) {
    gemv_in_place<V>(job, w);
  } else if (m >= kNvfp4LargeM || w.in_place()) {
    util::parallel_for(w.panels, T::kLargeJ, [&](int64_t p0, int64_t p1, int) { large_m<V>(job, w, p0, p1); });
  } else if (m == 1) {
    util::parallel_for(w.panels, T::kJ1, [&](int64_t p0, int64_t p1, int) { small_m<V, 1, T::kJ1>(job, w, p0, p1); });
  } else if (m == 2) {
    util::parallel_for(w.panels, T::kJ2, [&](int64_t p0, int64_t p1, int) { small_m<V, T::kMR2, T::kJ2>(job, w, p0, p1); });
  } else {
    util::parallel_for(w.panels, T::kMidJ,
                 [&](int64_t p0, int64_t p1, int) { small_m<V, T::kMidMR, T::kMidJ>(job, w, p0, p1); });
  }
}

}  // namespace
}  // namespace mixq::kernels::x86
