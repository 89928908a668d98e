#pragma once
// The f32-FMA core of the AWQ W4A16 linear (awq_w4a16.hpp) over a vector type
// V (simd_traits.hpp): awq_avx2 and awq_avx512_fma, compiled by
// awq_w4a16.avx2.cpp and awq_w4a16.avx512.cpp on the same packed weights.
//
// Arithmetic (the same on every target, so every target gives the same bits):
// each 16-byte code row (16 columns, low nibble k = 2j, high nibble 2j + 1) is
// decoded in registers to f32 weights
//   w = q·s + z'  with  z' = z − 8·s  (q ∈ 0..15 exact; one FMA each)
// and multiplied with the fp32 activations (x is not rounded): one FMA chain
// per (row, column) over all of K in k order, bias added last.
//
// Blocking: a register tile is R rows × CB panels of 16 columns (16 / kLanes
// vectors per panel). Activations are read in place (row-major) or, where
// the target has the registers for tall tiles, repacked into blocks of kBlock
// rows as [k][kBlock] (one pointer, constant offsets for the broadcasts).
// Small M (<= kSmallM): the panels are split over the threads, each thread
// streams its panels once (weights from DRAM), kChunkPanels at a time under
// every row tile, with software prefetch of the codes kStreamPrefetchBytes
// ahead and of the per-group scale / zero rows kParamGroupsAhead groups ahead
// (those rows are N·4 bytes apart: the hardware prefetchers do not follow
// them, and every FMA of a group waits for z'). Large M: rows go in chunks of
// kChunk (their activations stay in L2) with every group of kChunkPanels
// panels passing by (its codes stay in L1 over the row blocks); on targets
// with kDecodeLargeM (AVX2), awq_decoded instead.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/stream_prefetch.hpp"
#include "kernels/x86/awq_w4a16.hpp"
#include "kernels/x86/float_gemm_impl.hpp"
#include "kernels/x86/simd_traits.hpp"
#include "util/parallel.hpp"
#include "util/phase_timer.hpp"

namespace mixq::kernels::x86 {
namespace {

// Per-target tuning and the nibble -> f32 decode, which the two targets do
// with different instructions (AVX-512: vpermps of a 0..15 table, which
// reads only the low 4 index bits, off the FMA ports; AVX2: and / shift +
// vcvtdq2ps). Chosen by timing M = 1, 64 and 4096 (`mixq bench --format
// awq_w4a16` on AVX2, bench_linear_more on AVX-512).
template <class V>
struct AwqTarget;

#if defined(__AVX2__)
// 16 ymm: 4 rows × 1 panel (8 accumulators, a panel's 2 scales and 2
// offsets, 2 decoded weights, 1 broadcast) for M > 1; M = 1 takes 1 row × 2
// panels (4 independent chains, 2 FMAs each per k pair: their latency
// matches the FMA throughput of the 16 FMAs per k pair; 1 × 4 panels spilled
// accumulators to the stack, objdump). Activations stay row-major (repacking
// them into [k][4] blocks was 5-7 % slower at M = 64). Past kSmallM rows:
// awq_decoded (Zen 2, mixq bench alternating with the row-chunk tiles it
// replaces: M = 4096 and 64 at K = N = 3072 2.0-2.1x, M = 32 at N = 12288
// 3.4x, where one 32-row chunk had run on one thread).
template <>
struct AwqTarget<Avx2> {
  static constexpr bool kPack = false;
  static constexpr bool kDecodeLargeM = true;
  static constexpr int64_t kBlock = 4, kStreamPanels = 4, kSmallM = 16, kPanelGrain = 1;
  static constexpr int64_t kStreamPrefetchBytes = kernels::kStreamPrefetchBytes, kParamGroupsAhead = 2;
  static constexpr int panels_for(int rows) { return rows == 1 ? 2 : 1; }
  struct Decode {
    __m256i low = _mm256_set1_epi32(0x0F);
    __m256 lo(__m256i v) const { return _mm256_cvtepi32_ps(_mm256_and_si256(v, low)); }
    __m256 hi(__m256i v) const { return _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)); }
  };
};
#endif

#if defined(__AVX512F__)
// g++ 12's -Wmaybe-uninitialized inside its AVX-512 headers (the pass-through
// operand of unmasked intrinsics), as around the wrappers of simd_traits.hpp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// 32 zmm: blocks of 16 rows, tiles 16 or 8 rows × 1 panel and 4 / 2 / 1 rows
// × 4 panels (>= 4 independent chains for M = 1); objdump (g++ 12): the k
// loops keep the accumulators in zmm (4 × 4 reads its group's z' as FMA
// memory operands); 8 × 2 spilled accumulators, hence 8 × 1. Fewer than
// kPackMinM rows read x in place (a 16-row block of one row would be 16×
// the activation bytes, rewritten every call).
template <>
struct AwqTarget<Avx512> {
  static constexpr bool kPack = true;
  static constexpr bool kDecodeLargeM = false;  // 16-row blocks (not measured against awq_decoded)
  static constexpr int64_t kPackMinM = 5;
  static constexpr int64_t kBlock = 16, kChunk = 128, kChunkPanels = 4, kStreamPanels = 4, kSmallM = 16,
                           kPanelGrain = 4;
  static constexpr int64_t kStreamPrefetchBytes = kernels::kStreamPrefetchBytes, kParamGroupsAhead = 2;
  static constexpr int panels_for(int rows) { return rows >= 8 ? 1 : 4; }
  struct Decode {
    __m512 table = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 lo(__m512i v) const { return _mm512_permutexvar_ps(v, table); }
    __m512 hi(__m512i v) const { return _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), table); }
  };
};
#pragma GCC diagnostic pop
#endif

// Where the activations of a tile are: `x` points at its first row's k = 0
// value; (r, k) is x[k·B + r] in a packed block (B = kBlock) and x[r·K + k]
// in place.
template <bool Packed, int64_t B>
inline const float* x_at(const float* x, int64_t r, int64_t kk, int64_t k) {
  return Packed ? x + kk * B + r : x + r * k + kk;
}

inline void prefetch_lines(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(c + off, _MM_HINT_T0);
  _mm_prefetch(c + bytes - 1, _MM_HINT_T0);  // the last line when p is not line-aligned
}

// Rows [0, R) of the tile at x (see x_at) against panels [p, p + CB); output
// rows start at y (row stride N).
template <class V, class T, int R, int CB, bool Packed, bool Stream>
void awq_tile(const AwqPacked& w, const float* x, int64_t p, float* y) {
  using F = typename V::F;
  constexpr int L = V::kLanes, H = 16 / L, U = CB * H;
  constexpr int64_t B = T::kBlock;
  const int64_t half = w.k / 2, np = w.panels * 16, steps = w.group / 2, groups = w.k / w.group;
  const typename T::Decode decode;
  const F minus8 = V::set1(-8.0f);
  F acc[R][U];
  MIXQ_UNROLL
  for (int r = 0; r < R; ++r)
    MIXQ_UNROLL
    for (int u = 0; u < U; ++u) acc[r][u] = V::zero();
  const uint8_t* codes = w.codes.data() + p * half * 16;
  // Scale and zero at their stored width PW (compiled per width: no branch
  // here), widened exactly on load.
  constexpr FloatWidth PW = T::kParamWidth;
  constexpr int64_t elem = PW == FloatWidth::f32 ? 4 : 2;
  const StoredView scale(w.scale), zeros(w.zeros);
  for (int64_t g = 0; g < groups; ++g) {
    if constexpr (Stream && T::kParamGroupsAhead > 0) {
      if (g + T::kParamGroupsAhead < groups) {
        const int64_t at = (g + T::kParamGroupsAhead) * np + p * 16;
        prefetch_lines(scale.at(at), CB * 16 * elem);
        prefetch_lines(zeros.at(at), CB * 16 * elem);
      }
    }
    F s[U], z[U];
    MIXQ_UNROLL
    for (int u = 0; u < U; ++u) {
      const int64_t col = p * 16 + u * L;
      s[u] = load_width<V, PW>(scale.base, g * np + col);
      z[u] = V::fmadd(minus8, s[u], load_width<V, PW>(zeros.base, g * np + col));  // z − 8s, one rounding
    }
    for (int64_t j = g * steps; j < (g + 1) * steps; ++j) {
      if constexpr (Stream && T::kStreamPrefetchBytes > 0) {
        if ((j & 3) == 0) {  // one prefetch per 64-byte line of each panel's stream
          MIXQ_UNROLL
          for (int c = 0; c < CB; ++c)
            _mm_prefetch(reinterpret_cast<const char*>(codes + (c * half + j) * 16 + T::kStreamPrefetchBytes),
                         _MM_HINT_T0);
        }
      }
      MIXQ_UNROLL
      for (int u = 0; u < U; ++u) {
        // Bytes of columns 16p + 16c + kLanes·h ..: low nibble = k 2j, high nibble = k 2j+1.
        const typename V::I v = V::load_u8(codes + ((u / H) * half + j) * 16 + L * (u % H));
        const F w0 = V::fmadd(decode.lo(v), s[u], z[u]);
        const F w1 = V::fmadd(decode.hi(v), s[u], z[u]);
        MIXQ_UNROLL
        for (int r = 0; r < R; ++r) {
          const float* xr = x_at<Packed, B>(x, r, 2 * j, w.k);
          acc[r][u] = V::fmadd(V::set1(xr[0]), w0, acc[r][u]);
          acc[r][u] = V::fmadd(V::set1(xr[Packed ? B : 1]), w1, acc[r][u]);
        }
      }
    }
  }
  MIXQ_UNROLL
  for (int u = 0; u < U; ++u) {
    const int64_t col = p * 16 + u * L;
    if (col >= w.n) break;
    const F bias = w.bias.empty() ? V::zero() : V::loadz(V::mask(w.n - col), w.bias.data() + col);
    MIXQ_UNROLL
    for (int r = 0; r < R; ++r) {
      F v = acc[r][u];
      if (!w.bias.empty()) v = V::add(v, bias);
      V::store_first(y + r * w.n + col, w.n - col, v);
    }
  }
}

// R rows against panels [p_begin, p_end): CB at a time, then 1.
template <class V, class T, int R, bool Packed, bool Stream>
void awq_rows(const AwqPacked& w, const float* x, int64_t p_begin, int64_t p_end, float* y) {
  constexpr int CB = T::panels_for(R);
  int64_t p = p_begin;
  for (; p + CB <= p_end; p += CB) awq_tile<V, T, R, CB, Packed, Stream>(w, x, p, y);
  if constexpr (CB > 1) {
    for (; p < p_end; ++p) awq_tile<V, T, R, 1, Packed, Stream>(w, x, p, y);
  }
}

// `rows` (1..kBlock) rows starting at x (see x_at) and output row y, against
// panels [p_begin, p_end): the widest tiles first.
template <class V, class T, bool Packed, bool Stream>
void awq_block(const AwqPacked& w, const float* x, int64_t rows, int64_t p_begin, int64_t p_end, float* y) {
  constexpr int64_t B = T::kBlock;
  auto at = [&](int64_t r) { return x_at<Packed, B>(x, r, 0, w.k); };
  if (rows == B) return awq_rows<V, T, B, Packed, Stream>(w, x, p_begin, p_end, y);
  int64_t r0 = 0;
  if constexpr (B > 8) {
    if (rows & 8) awq_rows<V, T, 8, Packed, Stream>(w, at(r0), p_begin, p_end, y + r0 * w.n), r0 += 8;
  }
  if constexpr (B > 4) {
    if (rows & 4) awq_rows<V, T, 4, Packed, Stream>(w, at(r0), p_begin, p_end, y + r0 * w.n), r0 += 4;
  }
  if (rows & 2) awq_rows<V, T, 2, Packed, Stream>(w, at(r0), p_begin, p_end, y + r0 * w.n), r0 += 2;
  if (rows & 1) awq_rows<V, T, 1, Packed, Stream>(w, at(r0), p_begin, p_end, y + r0 * w.n);
}

// Rows [0, m) over blocks of kBlock rows at block_x(b), panels [p_begin,
// p_end) in groups of kStreamPanels (Stream) or kChunkPanels (each group's
// codes stay in L1 while the row blocks pass).
template <class V, class T, bool Packed, bool Stream, class BlockX>
void awq_panels(const AwqPacked& w, BlockX block_x, int64_t b0, int64_t b1, int64_t m, int64_t p_begin,
                int64_t p_end, float* y) {
  constexpr int64_t step = [] {
    if constexpr (Stream) return T::kStreamPanels;
    else return T::kChunkPanels;  // only targets without kDecodeLargeM have it
  }();
  for (int64_t p = p_begin; p < p_end; p += step) {
    const int64_t p1 = std::min(p_end, p + step);
    for (int64_t b = b0; b < b1; ++b)
      awq_block<V, T, Packed, Stream>(w, block_x(b), std::min(T::kBlock, m - b * T::kBlock), p, p1,
                                      y + b * T::kBlock * w.n);
  }
}

// Panels [p0, p1) of steps [s0, s1) (s0 even) as f32 rows of 16 values into
// out, panel by panel: the weights awq_tile decodes in registers, by the
// same FMA (q·s + z'), so the sums keep their bits.
template <class V, class T>
void awq_decode_chunk(const AwqPacked& w, int64_t p0, int64_t p1, int64_t s0, int64_t s1, float* out) {
  using F = typename V::F;
  constexpr int L = V::kLanes, H = 16 / L;
  constexpr FloatWidth PW = T::kParamWidth;
  const int64_t half = w.k / 2, np = w.panels * 16, steps = w.group / 2;
  const typename T::Decode decode;
  const F minus8 = V::set1(-8.0f);
  const StoredView scale(w.scale), zeros(w.zeros);
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* codes = w.codes.data() + p * half * 16;
    F s[H] = {}, z[H] = {};  // set at the first step (j == s0 / 2)
    for (int64_t j = s0 / 2; j < s1 / 2; ++j) {
      if (j == s0 / 2 || j % steps == 0) {
        const int64_t g = j / steps;
        MIXQ_UNROLL
        for (int h = 0; h < H; ++h) {
          const int64_t col = p * 16 + h * L;
          s[h] = load_width<V, PW>(scale.base, g * np + col);
          z[h] = V::fmadd(minus8, s[h], load_width<V, PW>(zeros.base, g * np + col));
        }
      }
      MIXQ_UNROLL
      for (int h = 0; h < H; ++h) {
        const typename V::I v = V::load_u8(codes + j * 16 + L * h);
        V::store(out + h * L, V::fmadd(decode.lo(v), s[h], z[h]));
        V::store(out + 16 + h * L, V::fmadd(decode.hi(v), s[h], z[h]));
      }
      out += 32;
    }
  }
}

// Large M (kDecodeLargeM, where the target's register tile is
// too small to pay for decoding in registers: AVX2's 4 rows × 1 panel spent
// two decode FMAs on every eight of the rows'): the float GEMM's f32 FMA
// core (float_gemm_impl.hpp), its blocking and tiles, on panels decoded
// once per K chunk and row chunk (awq_decode_chunk). Every output is still
// one FMA chain in k order (earlier K chunks' partial sums in y), alpha 1
// (exact), the bias added last: awq_tile's bits.
template <class V, class T>
void awq_decoded(const AwqPacked& w, const float* x, int64_t m, float* y) {
  using Tune = FloatTile<V::kLanes>;
  constexpr int J = Tune::panels_for(Tune::kMR);
  FloatPanels shape;  // n and K for the micro-kernels; the data is the decoded chunk
  shape.n = w.n;
  shape.k = w.k;
  shape.steps = w.k;
  shape.panels = w.panels;
  Job job{x, w.k, &shape, 1.0f, w.bias.empty() ? nullptr : w.bias.data(), y};
  job.steps = w.k;
  job.row = 64;
  const int64_t chunk = Tune::kStepChunk / 2 * 2;  // even: a code byte holds k 2j and 2j + 1
  util::parallel_for(w.panels, Tune::kGrain, [&](int64_t p0, int64_t p1, int) {
    thread_local std::vector<float> decoded;
    float* const buffer = aligned_rows(decoded, static_cast<size_t>(J * std::min(w.k, chunk) * 16));
    Job d = job;
    d.decoded = buffer;
    for (int64_t s0 = 0; s0 < w.k; s0 += chunk) {
      const int64_t s1 = std::min(w.k, s0 + chunk);
      d.decoded_steps = s1 - s0;
      for (int64_t mc = 0; mc < m; mc += Tune::kRowChunk) {
        const int64_t mend = std::min(m, mc + Tune::kRowChunk);
        for (int64_t p = p0; p < p1; p += J) {
          const int64_t end = std::min(p1, p + J);
          awq_decode_chunk<V, T>(w, p, end, s0, s1, buffer);
          d.decoded_p0 = p;
          row_block<V, Tune, Core::fma, PanelType::f32>(d, mc, mend, p, end, s0, s1, s0 == 0, s1 == w.k);
        }
      }
    }
  });
}

template <class V, class T, bool Packed>
void awq_fma_with(const AwqPacked& w, const float* x, int64_t m, float* y) {
  constexpr int64_t B = T::kBlock;
  const int64_t blocks = (m + B - 1) / B;
  std::vector<float> xp;
  if constexpr (Packed) {
    util::PhaseScope phase("pack activations");
    xp.resize(static_cast<size_t>(blocks * w.k * B));
    util::parallel_for(blocks, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t b = begin; b < end; ++b) {
        float* dst = xp.data() + b * w.k * B;
        for (int64_t r = 0; r < B; ++r) {
          const int64_t row = b * B + r;
          if (row >= m) {
            for (int64_t i = 0; i < w.k; ++i) dst[i * B + r] = 0.0f;
            continue;
          }
          const float* src = x + row * w.k;
          for (int64_t i = 0; i < w.k; ++i) dst[i * B + r] = src[i];
        }
      }
    });
  }
  auto block_x = [&](int64_t b) { return Packed ? xp.data() + b * w.k * B : x + b * B * w.k; };
  util::PhaseScope phase("W4A16 GEMM (codes decoded in the kernel)");
  if (m <= T::kSmallM) {
    util::parallel_for(w.panels, T::kPanelGrain, [&](int64_t begin, int64_t end, int) {
      awq_panels<V, T, Packed, true>(w, block_x, 0, blocks, m, begin, end, y);
    });
    return;
  }
  if constexpr (T::kDecodeLargeM) {
    awq_decoded<V, T>(w, x, m, y);
  } else {
    // Chunks of at most kChunk rows (whole B-row blocks), as many per thread
    // (whole chunks of kChunk rows left M = 17..128 on one thread).
    util::parallel_for_row_blocks(m, T::kChunk, B, [&](int64_t r0, int64_t r1) {
      awq_panels<V, T, Packed, false>(w, block_x, r0 / B, (r1 + B - 1) / B, m, 0, w.panels, y);
    });
  }
}

// Tuning T with the stored width of scale / zeros fixed.
template <class T, FloatWidth W>
struct WithParamWidth : T {
  static constexpr FloatWidth kParamWidth = W;
};

template <class V, class T>
inline void awq_fma_width(const AwqPacked& w, const float* x, int64_t m, float* y) {
  if constexpr (T::kPack) {
    if (m >= T::kPackMinM) return awq_fma_with<V, T, true>(w, x, m, y);
  }
  awq_fma_with<V, T, false>(w, x, m, y);
}

// The kernel with the target's tuning T (a bench may pass other tunings: the
// members of AwqTarget), compiled for each stored width of scale / zeros
// (awq_pack gives both one width).
template <class V, class T = AwqTarget<V>>
__attribute__((always_inline)) inline void awq_fma(const AwqPacked& w, const float* x, int64_t m, float* y) {
  if (m <= 0) return;
  switch (w.scale.width()) {
    case FloatWidth::f16: return awq_fma_width<V, WithParamWidth<T, FloatWidth::f16>>(w, x, m, y);
    case FloatWidth::bf16: return awq_fma_width<V, WithParamWidth<T, FloatWidth::bf16>>(w, x, m, y);
    default: return awq_fma_width<V, WithParamWidth<T, FloatWidth::f32>>(w, x, m, y);
  }
}

}  // namespace
}  // namespace mixq::kernels::x86
