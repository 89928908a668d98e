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
// Small M (< the tiles' kLargeM rows): weights are streamed once, decoded in registers
// and used for every row; each thread takes a contiguous range of panels and
// walks J panels side by side (J independent read streams). Large M: per
// chunk of kRowChunk rows (activations stay in L2), each group of J panels is
// decoded once into a small per-thread buffer (L2) and then reused by every
// MR-row micro-kernel call.
//
// Weights read in place (Nvfp4Weights::in_place): nvfp4_in_place_impl.hpp,
// called from nvfp4_gemm and large_m below.
//
// Exactness: block dots are exact int32; every block adds
// fma(float(dot4 + comp), S_w·S_x, acc) in block order and the result is
// (acc·0.25)·(g_x·g_w) + bias, which equals the reference bit for bit
// (dot4 = 4·dot and acc carries the same factor 4 exactly).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "util/parallel.hpp"
#include "kernels/stream_prefetch.hpp"
#include "kernels/x86/nvfp4_in_place_impl.hpp"
#include "kernels/x86/nvfp4_w4a4.hpp"
#include "kernels/x86/nvfp4_w4a4_parts.hpp"
#include "kernels/x86/simd_traits.hpp"
#if defined(__AVX512VBMI__)
#include "kernels/x86/nvfp4_gemv16_impl.hpp"
#endif
#include "mixq/error.hpp"
#include "mixq/threads.hpp"

namespace mixq::kernels::x86 {
namespace {

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
// panels (2 halves each) in one pass, 4 × 1 under kLargeM rows and 3 × 1
// at large M. g++ 12 keeps every accumulator in a register with these
// (objdump), except AVX2's 4-row tiles, whose block dots spill (still the
// fastest measured there). Chosen by timing
// (bench_nvfp4_tunings; before it, M = 1, 2, 16 and 4096 with
// bench_linear_more on AVX-512 and `mixq bench --format nvfp4` on AVX2). On
// Zen 3, large M (1024 and 4096 rows, K = N = 3072, 2 threads and 1): 3 rows
// × 1 panel 1.01-1.20x the speed of 2 × 1 in 20 of 22 runs (three rows share
// each decoded weight part); 4 × 1 (its f32 accumulators spilled) as fast
// as 3 (0.94-1.12x its time), 6 × 1 slower, 2 × 2 no faster (BENCHMARKS.md,
// "Issue 14 on Zen 3, sixteenth session"). kLargeM: packed weights from
// this many rows take the large-M path (weights read in place from 9). On
// Zen 3, 3 to 15 rows ran 4 × 1 panel tiles 1.01-1.37x faster than 2 × 1
// (10 of 10 runs at 3 to 9 rows), and from 16 rows the large-M path was as
// fast as those or faster (1.09-1.14x at 24 rows).
template <int Lanes>
struct Nvfp4Tile;
template <>
struct Nvfp4Tile<16> {
  static constexpr int kJ1 = 4, kMR2 = 2, kJ2 = 4, kMidMR = 4, kMidJ = 2, kLargeMR = 6, kLargeJ = 2;
  static constexpr int64_t kLargeM = 32;
  static constexpr bool kPreloadDecoded = true;
  static constexpr int kDotGroup = 1;
};
template <>
struct Nvfp4Tile<8> {
  static constexpr int kJ1 = 2, kMR2 = 2, kJ2 = 1, kMidMR = 4, kMidJ = 1, kLargeMR = 3, kLargeJ = 1;
  static constexpr int64_t kLargeM = 16;
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
  typename V::F v = V::load_first(row + k0, k - k0);
  if (pqs) v = V::mul(v, V::load_first(pqs + k0, k - k0));
  return v;
}

// Doubled E2M1 code (RNE on the E2M1 grid, saturating at ±6, NaN -> 0) of
// v = x / T as int32 in [-12, 12]. The doubled grid steps by 1 below 4, by 2
// below 8 and by 4 above: d = 2|v| (clamped to 12) rounds to its step as
// (d + M) - M, M = 2^23, 2^24 or 2^25 (whose float step is 1, 2 or 4; ties go
// to the even multiple of the step, the E2M1 tie rule), M's exponent taken
// from d's (at least that of 2). Integer and float adds in place of the
// range compares and selects.
template <class V>
inline typename V::I doubled_e2m1(typename V::F v) {
  using I = typename V::I;
  typename V::F d = V::max(V::abs(v), V::zero());  // NaN -> 0
  d = V::min(V::add(d, d), V::set1(12.0f));
  const I exponent = V::maxi(V::andi(V::as_int(d), V::set1i(0x7F800000)), V::set1i(0x40000000));  // >= 2.0's
  const typename V::F m = V::as_float(V::addi(exponent, V::set1i(22 << 23)));  // 2^(e + 22): step 2^(e - 1)
  return V::negate_if_negative(V::cvtt(V::sub(V::add(d, m), m)), v);
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

// e4m3_round per lane (t in [0, 448], or NaN as the scalar takes it).
template <class V>
inline typename V::F e4m3_round_each(typename V::F t) {
  using I = typename V::I;
  const typename V::F subnormal = V::mul(V::round(V::mul(t, V::set1(512.0f))), V::set1(1.0f / 512.0f));
  I u = V::as_int(t);
  u = V::addi(u, V::addi(V::set1i(0x7FFFF), V::andi(V::template srli<20>(u), V::set1i(1))));
  const typename V::F normal = V::as_float(V::andi(u, V::set1i(static_cast<int32_t>(0xFFF00000u))));
  return V::select(V::lt(t, V::set1(0x1p-6f)), subnormal, normal);
}

// Codes of one block of 16 (row[16b ..]) given block = g·s: doubled E2M1 of
// x / block, or zeros where block is 0; returns their sum as a vector.
template <class V>
inline typename V::I quantize_block(const float* row, const float* pqs, int64_t k, int64_t b, float block,
                                    int8_t* q) {
  constexpr int L = V::kLanes, H = 16 / L;
  typename V::I d[H];
  for (int h = 0; h < H; ++h) d[h] = V::zeroi();
  if (block != 0.0f) {
    const typename V::F vb = V::set1(block);
    for (int h = 0; h < H; ++h) d[h] = doubled_e2m1<V>(V::div(load_scaled<V>(row, pqs, b * 16 + h * L, k), vb));
  }
  V::store_i8x16(q, d);
  typename V::I sum = d[0];
  for (int h = 1; h < H; ++h) sum = V::addi(sum, d[h]);
  return sum;
}

// kLanes blocks from b0 at once: their maxima as one vector (max_each),
// so the scales' arithmetic runs per lane, the same fp32 operations as one
// block's: a = max |x| (NaN ignored), t = (a / 6) / g, s = E4M3(min(t, 448)),
// block = g·s; the compensations -12·Σ codes likewise (sum_each). One
// block at a time, each block's horizontal maximum, scalar scale and
// horizontal sum were a chain of dependent steps (BENCHMARKS.md, "Issue 14
// on Zen 5, seventh session").
template <class V>
inline void quantize_block_group(const float* row, const float* pqs, int64_t k, float g, int64_t b0, int8_t* q,
                                 float* scale, int32_t* comp) {
  constexpr int L = V::kLanes, H = 16 / L;
  typename V::F amax[L];
  for (int j = 0; j < L; ++j) {
    amax[j] = V::zero();
    prefetch_activations_ahead(row + (b0 + j) * 16);
    for (int h = 0; h < H; ++h) amax[j] = max_abs<V>(load_scaled<V>(row, pqs, (b0 + j) * 16 + h * L, k), amax[j]);
  }
  const typename V::F t = V::div(V::div(max_each<V>(amax), V::set1(6.0f)), V::set1(g));
  const typename V::F s = e4m3_round_each<V>(V::min(V::set1(448.0f), t));  // std::min(t, 448): t where NaN
  V::store(scale, s);
  alignas(64) float block[L];
  V::store(block, V::mul(V::set1(g), s));
  typename V::I sums[L];
  for (int j = 0; j < L; ++j) sums[j] = quantize_block<V>(row, pqs, k, b0 + j, block[j], q + 16 * j);
  V::storei(comp, V::mullo(sum_each<V>(sums), V::set1i(-12)));
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
      const size_t at0 = static_cast<size_t>(r * blocks);
      int8_t* q = out.q.data() + at0 * 16;
      int64_t b = 0;
      for (; b + L <= blocks; b += L)
        quantize_block_group<V>(row, pqs, k, g, b, q + b * 16, out.scale.data() + at0 + b, out.comp.data() + at0 + b);
      for (; b < blocks; ++b) {
        typename V::F amax = V::zero();
        for (int h = 0; h < H; ++h) amax = max_abs<V>(load_scaled<V>(row, pqs, b * 16 + h * L, k), amax);
        const float t = (V::reduce_max(amax) / 6.0f) / g;
        const float s = e4m3_round(std::min(t, 448.0f));
        const typename V::I sum = quantize_block<V>(row, pqs, k, b, g * s, q + b * 16);
        out.scale[at0 + static_cast<size_t>(b)] = s;
        out.comp[at0 + static_cast<size_t>(b)] = -12 * V::reduce_add(sum);
      }
    }
  });
}

// ---- GEMM ----

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
template <class V, class T, int MR, int J, bool Dec>
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
    if constexpr (Dec && T::kPreloadDecoded) {
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
      constexpr int G = T::kDotGroup == 0 ? U : T::kDotGroup;
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
      V::store_first(job.y + (m0 + i) * job.n + n0, job.n - n0, out);
    }
  }
}

// Rows [m0, m1) against J panels, in MR-row steps with smaller tails.
template <class V, class T, int MR, int J, bool Dec>
void rows(const Nvfp4Job& job, int64_t m0, int64_t m1, const uint8_t* const* src, int64_t panel0) {
  int64_t m = m0;
  for (; m + MR <= m1; m += MR) micro<V, T, MR, J, Dec>(job, m, src, panel0);
  if constexpr (MR > 1) {
    if (m < m1) rows<V, T, MR - 1, J, Dec>(job, m, m1, src, panel0);
  }
}

// Panels [p0, p1) in groups of J (the last group may be narrower), raw decode.
template <class V, class T, int MR, int J>
void small_m(const Nvfp4Job& job, const Nvfp4Weights& w, int64_t p0, int64_t p1) {
  const int64_t stride = w.blocks * kNvfp4PanelBlockBytes;
  int64_t p = p0;
  for (; p + J <= p1; p += J) {
    const uint8_t* src[J];
    for (int j = 0; j < J; ++j) src[j] = w.data.data() + (p + j) * stride;
    rows<V, T, MR, J, false>(job, 0, job.act->m, src, p);
  }
  for (; p < p1; ++p) {
    const uint8_t* src[1] = {w.data.data() + p * stride};
    rows<V, T, MR, 1, false>(job, 0, job.act->m, src, p);
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

template <class V, class T>
void large_m(const Nvfp4Job& job, const Nvfp4Weights& w, int64_t p0, int64_t p1) {
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
        rows<V, T, T::kLargeMR, J, true>(job, mc, mend, src, p);
      else if constexpr (J > 1)
        rows<V, T, T::kLargeMR, 1, true>(job, mc, mend, src, p);
    }
  }
}

// The GEMM under the target's tiles T (a bench may pass others: the members
// of Nvfp4Tile; bench/bench_nvfp4_tunings).
template <class V, class T = Nvfp4Tile<V::kLanes>>
__attribute__((always_inline)) inline void nvfp4_gemm(const Nvfp4Activation& act, const Nvfp4Weights& w,
                                                      const float* bias, float* y) {
  if (act.blocks != w.blocks) fail("nvfp4: activation has {} blocks, weight {}", act.blocks, w.blocks);
  const Nvfp4Job job{&act, bias, y, w.n, act.global * w.global};
  const int64_t m = act.m;
  if (m <= 0 || w.n <= 0) return;
#if defined(__AVX512VBMI__)
  if constexpr (V::kLanes == 16)  // 16 rows a zmm (nvfp4_gemv16_impl.hpp)
    if (w.in_place() && m >= kGemv16MinRows && m <= kNvfp4InPlaceGemv16M) return gemv16_in_place(job, w);
#endif
  if (w.in_place() && m <= kNvfp4InPlaceGemvM) {
    gemv_in_place<V>(job, w);
  } else if (m >= T::kLargeM || w.in_place()) {
    util::parallel_for(w.panels, T::kLargeJ, [&](int64_t p0, int64_t p1, int) { large_m<V, T>(job, w, p0, p1); });
  } else if (m == 1) {
    util::parallel_for(w.panels, T::kJ1, [&](int64_t p0, int64_t p1, int) { small_m<V, T, 1, T::kJ1>(job, w, p0, p1); });
  } else if (m == 2) {
    util::parallel_for(w.panels, T::kJ2, [&](int64_t p0, int64_t p1, int) { small_m<V, T, T::kMR2, T::kJ2>(job, w, p0, p1); });
  } else {
    util::parallel_for(w.panels, T::kMidJ,
                 [&](int64_t p0, int64_t p1, int) { small_m<V, T, T::kMidMR, T::kMidJ>(job, w, p0, p1); });
  }
}

}  // namespace
}  // namespace mixq::kernels::x86
