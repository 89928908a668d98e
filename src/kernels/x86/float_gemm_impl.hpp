#pragma once
// The float GEMM cores (layout and decoding:
// float_gemm.hpp) over a vector type V (simd_traits.hpp), compiled once per
// target by float_gemm.avx2.cpp and float_gemm.avx512.cpp on the same panels.
// A 16-column panel row is 16 / kLanes vectors (one zmm or two ymm).
//
// Cores:
//  - fma: any panel type, f32 activations; each panel row is decoded to f32 in
//    registers (FloatIo, float_io_impl.hpp) and `vfmadd231ps` adds one k at a time, so every
//    output is the FMA chain in k order;
//  - dot (AVX-512 only): FP8 panels read two rows (a k-pair) at a time,
//    widened to bf16 and interleaved into the columns' [k, k+1] pairs in
//    registers (FloatIo::fp8_pairs), and `vdpbf16ps` against bf16 activation
//    pairs.
//
// Blocking: a thread owns a contiguous range of panels. K is walked in chunks
// of kStepChunk steps (a panel chunk stays in L1/L2; packed panels under MR
// rows: kFewRowsStepChunk, all of K, each panel streamed and prefetched front
// to back), rows in chunks of
// kRowChunk (their activations stay in L2; the dot core's kDotRowChunk is
// longer, float_tile.hpp), and the register tile is MR rows ×
// J panels (FloatTile, per target). Rows left over at the end of a chunk run
// smaller tiles, each with its own J (M = 1 still walks several panels side
// by side: independent FMA chains and read streams). With at least
// kDecodedRows rows in a chunk, the FMA core decodes each K chunk of a tile's
// panels to f32 once (decode_chunk) and runs the f32 micro-kernel on it, the
// next tile's output lines prefetched (prefetch_tile). Partial sums of earlier
// K chunks live in y, so every output accumulates in k order; alpha and bias
// are applied once after the last chunk (mul, then add, as the reference:
// see rounded()). MXFP8 multiplies each decoded row by its columns' block
// scales, NVFP4 by its E4M3 block scales (kept in a small buffer per block,
// read as memory operands); MXFP8 with scaled activations (float_scaled_x.hpp)
// instead rescales the sums once per block.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/stream_prefetch.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "kernels/x86/float_io_impl.hpp"
#include "kernels/x86/float_pack_simd.hpp"
#include "kernels/x86/float_scaled_x.hpp"
#include "kernels/x86/float_tile.hpp"
#include "kernels/x86/simd_traits.hpp"
#include "mixq/error.hpp"
#include "util/parallel.hpp"

namespace mixq::kernels::x86 {
namespace {

enum class Core { fma, dot };

// The K chunk (in steps) of core C from kMR rows on, and its row chunk.
template <class Tune, Core C>
constexpr int64_t step_chunk() {
  if constexpr (C == Core::dot) return Tune::kDotStepChunk;
  else return Tune::kStepChunk;
}
template <class Tune, Core C>
constexpr int64_t row_chunk() {
  if constexpr (C == Core::dot) return Tune::kDotRowChunk;
  else return Tune::kRowChunk;
}
// Rows from which a row chunk of core C decodes its panels once.
template <class Tune, Core C>
constexpr int64_t decoded_rows() {
  if constexpr (C == Core::dot) return Tune::kDotDecodedRows;
  else return Tune::kDecodedRows;
}

struct Job {
  const void* a;  // fma: float; dot: uint32_t bf16 pairs
  int64_t lda;    // values per activation row
  const FloatPanels* w;
  float alpha;
  const float* bias;
  float* y;
  // The core's steps over K and the bytes of panel rows one step reads: the
  // FMA core k steps of one row, the dot core k-pair steps of two rows
  // (panel rows 2t and 2t + 1, interleaved in registers: fp8_pairs).
  int64_t steps = 0, row = 0;
  // In place (FloatPanels::in_place): the thread's packed chunk, panels
  // chunk_p0.. with chunk_steps steps each from step chunk_s0 (pack_group).
  const uint8_t* chunk = nullptr;
  int64_t chunk_p0 = 0, chunk_s0 = 0, chunk_steps = 0;
  std::vector<int64_t>* nan_columns = nullptr;  // in place: the thread's finds (pack_panel_steps)
  // In place, e5m2 with scaled activations (float_scaled_x.hpp): the
  // thread's panels that hold an inf or NaN code (null: not looked for).
  std::vector<int64_t>* nonfinite_panels = nullptr;
  // Many rows (decoded_rows()): the current K chunk of panels decoded_p0..
  // decoded to f32 rows of 16 values (block scales applied), decoded_steps
  // rows each; the micro-kernels then run as for f32 panels.
  const float* decoded = nullptr;
  int64_t decoded_p0 = 0, decoded_steps = 0;
};

// Panel p's row of step s0 (K chunk [s0, ..)): in the packed panels, or in
// the thread's chunk.
inline const uint8_t* panel_from(const Job& job, int64_t p, int64_t s0) {
  const FloatPanels& w = *job.w;
  if (job.decoded) return reinterpret_cast<const uint8_t*>(job.decoded + (p - job.decoded_p0) * job.decoded_steps * 16);
  if (job.chunk) return job.chunk + ((p - job.chunk_p0) * job.chunk_steps + s0 - job.chunk_s0) * job.row;
  return w.data.data() + p * w.steps * w.row_bytes() + s0 * job.row;
}

// One panel row of type T at p as kVP f32 vectors; ScaledX: FP8 codes as
// value·2^-120 (E4M3: e4m3, mxfp8) or value·2^-112 (e5m2) for activations
// scaled by 2^112 (WithScaledX; MXFP8's block scales then go to the sums:
// micro()).
template <class V, PanelType T, bool ScaledX = false>
inline void decode_row(const uint8_t* p, typename V::F* out) {
  using Io = FloatIo<V>;
  if constexpr (ScaledX && is_fp8(T)) Io::template fp8_by_exponent<T != PanelType::e5m2>(p, out);
  else if constexpr (T == PanelType::f32) Io::f32(p, out);
  else if constexpr (T == PanelType::bf16) Io::bf16(p, out);
  else if constexpr (T == PanelType::f16) Io::f16(p, out);
  else if constexpr (T == PanelType::nvfp4) Io::template fp8_bytes<false>(e2m1_f16_high(p), out);
  else Io::template fp8<T != PanelType::e5m2>(p, out);
}

// The 16 block scales at e (one panel row's columns) as kVP f32 vectors:
// E8M0 for MXFP8, E4M3 as S·2^-8 for NVFP4 (the 2^8 is in alpha).
template <class V, PanelType T>
inline void block_scales(const uint8_t* e, typename V::F* out) {
  if constexpr (T == PanelType::nvfp4) FloatIo<V>::template fp8<true>(e, out);
  else FloatIo<V>::e8m0(e, out);
}

// The few-row FMA loop (more panel vectors than rows) widens two steps of a
// one-byte FP8 panel at once on AVX-512 (FloatIo::fp8_two): at M = 1 the
// widening, not the FMA, is most of the vector work, and its zmm form does
// 32 codes for about the price of 16. Both steps lie in one MXFP8 block
// ([sb, se) below), so they share its scales.
template <class V, class Tune, PanelType T>
constexpr bool kTwoSteps =
    Tune::kTwoSteps && V::kLanes == 16 && is_fp8(T);

// The 16 E8M0 block scales at e (one panel's columns) as 32 f32, each
// column's twice: the lanes of a k-pair row ([k, k+1] per column).
inline void e8m0_pair_scales(const uint8_t* e, float* out) {
  for (int c = 0; c < 16; ++c) out[2 * c] = out[2 * c + 1] = std::bit_cast<float>(static_cast<uint32_t>(e[c]) << 23);
}

// An E8M0 byte of scale 1 for each of 16 columns: where the sums of a call's
// first MXFP8 block come from (rescaled sums, micro()).
constexpr uint8_t kScaleOne[16] = {127, 127, 127, 127, 127, 127, 127, 127,
                                   127, 127, 127, 127, 127, 127, 127, 127};

// Rows [m0, m0+MR) × panels [p, p+J) over steps [s0, s1).
template <class V, class Tune, Core C, PanelType T, int MR, int J>
void micro(const Job& job, int64_t m0, int64_t p, int64_t s0, int64_t s1, bool first, bool last) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  constexpr int VP = 16 / L;  // vectors per panel row
  constexpr int NV = J * VP;  // accumulators per row
  static_assert(!(Tune::kScaledX && kTwoSteps<V, Tune, T>), "the two-step widening has no scaled-x decode");
  // Block-scaled types: MXFP8 (E8M0 per 32 k) and NVFP4 (E4M3 per 16 k).
  constexpr bool kMx = T == PanelType::mxfp8 || T == PanelType::nvfp4;
  // MXFP8 with scaled activations (WithScaledX, where mxfp8_sums_rescale
  // holds): no multiply per weight. Each sum is kept divided by its column's
  // scale of the current block, and multiplied by the ratio of two blocks'
  // scales where a block starts (by the last block's scale after the loop):
  // one multiply per 32 k instead of 32, and the same bits.
  constexpr bool kRescaled = Tune::kScaledX && T == PanelType::mxfp8;
  const FloatPanels& w = *job.w;
  const int64_t n = w.n, lda = job.lda;
  // f32: w's own or decoded rows; the dot core's bf16: decoded k-pair rows (decode_pair_chunk).
  constexpr bool kDecodedRow = T == PanelType::f32 || (C == Core::dot && T == PanelType::bf16);
  const int64_t row = kDecodedRow ? 64 : job.row;
  F acc[MR][NV];
  typename V::M mask[NV];
  MIXQ_UNROLL
  for (int h = 0; h < NV; ++h) mask[h] = V::mask(n - p * 16 - h * L);
  // Masked loads (and stores: store_first) only at the last panel: AVX2's
  // vmaskmovps store is microcoded on AMD (1.1x at M = 4096 on Zen 2).
  const bool whole = (p + J) * 16 <= n;
  MIXQ_UNROLL
  for (int i = 0; i < MR; ++i)
    MIXQ_UNROLL
    for (int h = 0; h < NV; ++h) {
      const float* out = job.y + (m0 + i) * n + p * 16 + h * L;
      acc[i][h] = first ? V::zero() : whole ? V::load(out) : V::loadz(mask[h], out);
    }
  const uint8_t* b[J];
  MIXQ_UNROLL
  for (int j = 0; j < J; ++j) b[j] = panel_from(job, p + j, s0);
  // kRescaled: every row's sums of panel j times r (its columns' factors).
  [[maybe_unused]] auto scale_sums = [&](int j, const F* r) __attribute__((always_inline)) {
    MIXQ_UNROLL
    for (int q = 0; q < VP; ++q)
      MIXQ_UNROLL
      for (int i = 0; i < MR; ++i) acc[i][j * VP + q] = V::mul(acc[i][j * VP + q], r[q]);
  };  // step s at b[j] + (s - s0)·row
  // MXFP8: the block scales of the current 32-block, per column (dot: per
  // element of a k-pair row).
  [[maybe_unused]] alignas(64) float sc[kMx ? J * 16 * (C == Core::dot ? 2 : 1) : 1];
  constexpr int64_t kBlockK = T == PanelType::nvfp4 ? 16 : 32;
  constexpr int64_t kBlockSteps = C == Core::dot ? kBlockK / 2 : kBlockK;
  for (int64_t sb = s0; sb < s1;) {
    int64_t se = s1;
    if constexpr (kRescaled) {
      const int64_t blk = sb / kBlockSteps;
      se = std::min(s1, (blk + 1) * kBlockSteps);
      MIXQ_UNROLL
      for (int j = 0; j < J; ++j) {
        const uint8_t* e = w.scales.data() + ((p + j) * w.blocks + blk) * 16;
        F r[VP];
        FloatIo<V>::e8m0_ratio(sb == s0 ? kScaleOne : e - 16, e, r);
        scale_sums(j, r);
      }
    } else if constexpr (kMx) {
      const int64_t blk = sb / kBlockSteps;
      se = std::min(s1, (blk + 1) * kBlockSteps);
      for (int j = 0; j < J; ++j) {
        const uint8_t* e = w.scales.data() + ((p + j) * w.blocks + blk) * 16;
        if constexpr (C == Core::dot) {
          e8m0_pair_scales(e, sc + j * 32);
        } else {
          F sv[VP];
          block_scales<V, T>(e, sv);
          for (int h = 0; h < VP; ++h) V::store(sc + j * 16 + h * L, sv[h]);
        }
      }
    }
    if constexpr (C == Core::fma) {
      const float* a = static_cast<const float*>(job.a) + m0 * lda;
      [[maybe_unused]] const bool stream = Tune::kStreamPrefetchBytes > 0 && !job.chunk && !job.decoded;
      for (int64_t s = sb; s < se; ++s) {
        // Register use decides the order: weights first needs NV vectors
        // next to the accumulators, rows first MR (each row's broadcast kept).
        if constexpr (NV <= MR) {
          F wv[NV];
          MIXQ_UNROLL
          for (int j = 0; j < J; ++j) decode_row<V, T, Tune::kScaledX>(b[j] + (s - s0) * row, wv + j * VP);
          if constexpr (kMx && !kRescaled) {
            MIXQ_UNROLL
            for (int h = 0; h < NV; ++h) wv[h] = V::mul(wv[h], V::load(sc + h * L));
          }
          MIXQ_UNROLL
          for (int i = 0; i < MR; ++i) {
            const F av = V::set1(a[i * lda + s]);
            MIXQ_UNROLL
            for (int h = 0; h < NV; ++h) acc[i][h] = V::fmadd(av, wv[h], acc[i][h]);
          }
        } else {
          if constexpr (Tune::kStreamPrefetchBytes > 0) {
            if (stream)
              MIXQ_UNROLL
              for (int j = 0; j < J; ++j)
                _mm_prefetch(reinterpret_cast<const char*>(b[j] + (s - s0) * row + Tune::kStreamPrefetchBytes),
                             Tune::kStreamPrefetchHint);
          }
          if constexpr (kTwoSteps<V, Tune, T>) {
            if (s + 1 < se) {  // steps s and s + 1 of each panel in one widening (fp8_two)
              F av[2][MR];
              MIXQ_UNROLL
              for (int i = 0; i < MR; ++i) {
                av[0][i] = V::set1(a[i * lda + s]);
                av[1][i] = V::set1(a[i * lda + s + 1]);
              }
              MIXQ_UNROLL
              for (int j = 0; j < J; ++j) {
                F wv[2];
                FloatIo<V>::template fp8_two<T != PanelType::e5m2>(b[j] + (s - s0) * row, wv);
                MIXQ_UNROLL
                for (int t = 0; t < 2; ++t) {  // s first: every output's FMA chain stays in k order
                  if constexpr (kMx) wv[t] = V::mul(wv[t], V::load(sc + j * L));
                  MIXQ_UNROLL
                  for (int i = 0; i < MR; ++i) acc[i][j] = V::fmadd(av[t][i], wv[t], acc[i][j]);
                }
              }
              ++s;
              continue;
            }
          }
          F av[MR];
          MIXQ_UNROLL
          for (int i = 0; i < MR; ++i) av[i] = V::set1(a[i * lda + s]);
          MIXQ_UNROLL
          for (int j = 0; j < J; ++j) {
            F wv[VP];
            decode_row<V, T, Tune::kScaledX>(b[j] + (s - s0) * row, wv);
            MIXQ_UNROLL
            for (int q = 0; q < VP; ++q) {
              if constexpr (kMx && !kRescaled) wv[q] = V::mul(wv[q], V::load(sc + (j * VP + q) * L));
              MIXQ_UNROLL
              for (int i = 0; i < MR; ++i) acc[i][j * VP + q] = V::fmadd(av[i], wv[q], acc[i][j * VP + q]);
            }
          }
        }
      }
    } else {
      static_assert(VP == 1, "the vdpbf16ps core is AVX-512's");
      const uint32_t* a = static_cast<const uint32_t*>(job.a) + m0 * lda;
      for (int64_t s = sb; s < se; ++s) {
        __m512i wv[J];
        MIXQ_UNROLL
        for (int j = 0; j < J; ++j) {
          if constexpr (T == PanelType::bf16) {
            wv[j] = _mm512_loadu_si512(b[j] + (s - s0) * row);
          } else {
            const float* scale = nullptr;
            if constexpr (kMx) scale = sc + j * 32;
            wv[j] = FloatIo<V>::template fp8_pairs<T != PanelType::e5m2>(b[j] + (s - s0) * row, scale);
          }
        }
        MIXQ_UNROLL
        for (int i = 0; i < MR; ++i)
          MIXQ_UNROLL
          for (int j = 0; j < J; ++j) acc[i][j] = FloatIo<V>::dot(acc[i][j], a + i * lda + s, wv[j]);
      }
    }
    sb = se;
  }
  if constexpr (kRescaled) {
    if (s1 > s0) {
      MIXQ_UNROLL
      for (int j = 0; j < J; ++j) {
        F r[VP];
        FloatIo<V>::e8m0(w.scales.data() + ((p + j) * w.blocks + (s1 - 1) / kBlockSteps) * 16, r);
        scale_sums(j, r);
      }
    }
  }
  const F alpha = V::set1(job.alpha);
  MIXQ_UNROLL
  for (int h = 0; h < NV; ++h) {
    const int64_t n0 = p * 16 + h * L;
    if (n0 >= n) break;
    F bias = V::zero();
    if (last && job.bias) bias = V::loadz(mask[h], job.bias + n0);
    MIXQ_UNROLL
    for (int i = 0; i < MR; ++i) {
      F out = acc[i][h];
      if (last) {
        out = rounded(V::mul(out, alpha));
        if (job.bias) out = V::add(out, bias);
      }
      V::store_first(job.y + (m0 + i) * n + n0, n - n0, out);
    }
  }
}

// `rows` (< the full tile) rows from m0 against panels [p0, p1): the largest
// compiled tile first, each with its own J.
template <class V, class Tune, Core C, PanelType T, int MR>
void tail_rows(const Job& job, int64_t m0, int64_t rows, int64_t p0, int64_t p1, int64_t s0, int64_t s1,
               bool first, bool last) {
  if constexpr (MR >= 1) {
    if (rows >= MR && Tune::tile_ok(MR)) {
      constexpr int J = Tune::panels_for(MR);
      int64_t p = p0;
      for (; p + J <= p1; p += J) micro<V, Tune, C, T, MR, J>(job, m0, p, s0, s1, first, last);
      for (; p < p1; ++p) micro<V, Tune, C, T, MR, 1>(job, m0, p, s0, s1, first, last);
      m0 += MR;
      rows -= MR;
    }
    tail_rows<V, Tune, C, T, MR - 1>(job, m0, rows, p0, p1, s0, s1, first, last);
  }
}

// Asks for the output lines of rows [r, r + rows) × panels [p, p + j): the
// next tile's partial sums (y holds them between K chunks; at M = 4096 they
// come from DRAM) arrive while the current tile computes.
inline void prefetch_tile(const Job& job, int64_t r, int rows, int64_t p, int j) {
  const int64_t n = job.w->n;
  for (int i = 0; i < rows; ++i)
    for (int c = 0; c < j; ++c)
      _mm_prefetch(reinterpret_cast<const char*>(job.y + (r + i) * n + (p + c) * 16), _MM_HINT_T0);
}

// Rows [r0, r1) against panels [p0, p1) over steps [s0, s1): full tiles of
// J panels, then single panels, then the rows left over.
template <class V, class Tune, Core C, PanelType T>
void row_block(const Job& job, int64_t r0, int64_t r1, int64_t p0, int64_t p1, int64_t s0, int64_t s1, bool first,
               bool last) {
  constexpr int MR = Tune::kMR;
  constexpr int J = Tune::panels_for(MR);
  const int64_t full = r0 + (r1 - r0) / MR * MR;
  int64_t p = p0;
  for (; p + J <= p1; p += J)
    for (int64_t r = r0; r < full; r += MR) {
      if (r + 2 * MR <= full) prefetch_tile(job, r + MR, MR, p, J);
      micro<V, Tune, C, T, MR, J>(job, r, p, s0, s1, first, last);
    }
  for (; p < p1; ++p)
    for (int64_t r = r0; r < full; r += MR) micro<V, Tune, C, T, MR, 1>(job, r, p, s0, s1, first, last);
  tail_rows<V, Tune, C, T, MR - 1>(job, full, r1 - full, p0, p1, s0, s1, first, last);
}

// Panels [p0, p1) of steps [s0, s1) as f32 rows of 16 values into out (panel
// by panel), block scales applied: the values micro() computes in registers
// for the FMA core, by the same operations, so the sums keep their bits.
template <class V, PanelType T>
void decode_chunk(const Job& job, int64_t p0, int64_t p1, int64_t s0, int64_t s1, float* out) {
  using F = typename V::F;
  constexpr int L = V::kLanes, VP = 16 / L;
  constexpr bool kMx = T == PanelType::mxfp8 || T == PanelType::nvfp4;
  constexpr int64_t kBlockK = T == PanelType::nvfp4 ? 16 : 32;
  const FloatPanels& w = *job.w;
  const int64_t row = job.row;
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* b = panel_from(job, p, s0);
    F sc[VP] = {};
    for (int64_t s = s0; s < s1; ++s) {
      if (kMx && (s == s0 || s % kBlockK == 0))
        block_scales<V, T>(w.scales.data() + (p * w.blocks + s / kBlockK) * 16, sc);
      F v[VP];
      decode_row<V, T>(b + (s - s0) * row, v);
      MIXQ_UNROLL
      for (int h = 0; h < VP; ++h) V::store(out + h * L, kMx ? V::mul(v[h], sc[h]) : v[h]);
      out += 16;
    }
  }
}

// The dot core's counterpart: panels [p0, p1) of k-pair FP8 steps [s0, s1)
// as rows of 32 bf16 (64 bytes, the size of a decoded f32 row), block scales
// applied, by the operations micro() runs in registers (fp8_pairs), so the
// sums keep their bits.
template <class V, PanelType T>
void decode_pair_chunk(const Job& job, int64_t p0, int64_t p1, int64_t s0, int64_t s1, float* out) {
  constexpr bool kMx = T == PanelType::mxfp8;
  constexpr int64_t kBlockSteps = 16;  // an E8M0 block of 32 k is 16 k-pair steps
  const FloatPanels& w = *job.w;
  const int64_t row = job.row;
  alignas(64) float sc[32];
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* b = panel_from(job, p, s0);
    for (int64_t s = s0; s < s1; ++s) {
      if (kMx && (s == s0 || s % kBlockSteps == 0)) {
        e8m0_pair_scales(w.scales.data() + (p * w.blocks + s / kBlockSteps) * 16, sc);
      }
      _mm512_storeu_si512(out, FloatIo<V>::template fp8_pairs<T != PanelType::e5m2>(b + (s - s0) * row,
                                                                                       kMx ? sc : nullptr));
      out += 16;
    }
  }
}

// At least `floats` f32 of a per-thread scratch, 64-byte aligned: each
// decoded 16-value row one cache line (rows split over two cost loads).
inline float* aligned_rows(std::vector<float>& scratch, size_t floats) {
  if (scratch.size() < floats + 16) scratch.resize(floats + 16);
  return scratch.data() + (16 - reinterpret_cast<uintptr_t>(scratch.data()) % 64 / 4) % 16;
}

// Rows [r0, r1) against panels [p, end) over steps [s0, s1) (one K
// chunk): given a `buffer`, the chunk of panels decoded once into it
// (FMA core: to f32, decode_chunk; dot core: to bf16 pairs,
// decode_pair_chunk) and the micro-kernels run on it, as on f32 panels.
template <class V, class Tune, Core C, PanelType T>
void panel_chunk(const Job& job, int64_t r0, int64_t r1, int64_t p, int64_t end, int64_t s0, int64_t s1, bool first,
                 bool last, float* buffer) {
  if (!buffer) {
    row_block<V, Tune, C, T>(job, r0, r1, p, end, s0, s1, first, last);
    return;
  }
  if constexpr (C == Core::fma)
    decode_chunk<V, T>(job, p, end, s0, s1, buffer);
  else
    decode_pair_chunk<V, T>(job, p, end, s0, s1, buffer);
  Job d = job;
  d.decoded = buffer;
  d.decoded_steps = s1 - s0;
  d.decoded_p0 = p;
  constexpr PanelType kDecoded = C == Core::fma ? PanelType::f32 : PanelType::bf16;
  row_block<V, Tune, C, kDecoded>(d, r0, r1, p, end, s0, s1, first, last);
}

// The decode buffer of a row chunk of `rows` rows over K chunks of `steps`
// steps: a per-thread scratch of J panels' chunks (48 / 96 KiB on AVX-512,
// 64 KiB on AVX2), or null where the chunk runs on the panels as they are
// (f32 panels, or fewer rows than decoded_rows()).
template <class Tune, Core C, PanelType T>
float* decode_buffer(int64_t rows, int64_t steps) {
  constexpr PanelType kDecoded = C == Core::fma ? PanelType::f32 : PanelType::bf16;
  if (T == kDecoded || rows < decoded_rows<Tune, C>() || Tune::kScaledX) return nullptr;
  constexpr int J = Tune::panels_for(Tune::kMR);
  thread_local std::vector<float> decoded;
  return aligned_rows(decoded, static_cast<size_t>(J * steps * 16));
}

// Every row against panels [p0, p1) over steps [s0, s1) (one K chunk), in
// row chunks, each decoded once per tile of panels where decode_buffer says
// so, instead of once per MR rows: the core then spends its vector ports on
// FMAs / dots (decoding FP8 in registers took about a third of them at M =
// 4096, bench_linear_float). FP8 on AVX-512 (mixq bench, alternating runs):
// M = 24 1.14x faster decoded (K = 3072 and 12288), M = 16 7 % slower (the
// FMA core; the dot core's threshold: float_tile.hpp).
template <class V, class Tune, Core C, PanelType T>
void row_chunks(const Job& job, int64_t m, int64_t p0, int64_t p1, int64_t s0, int64_t s1, bool first, bool last) {
  constexpr int J = Tune::panels_for(Tune::kMR);
  for (int64_t mc = 0; mc < m; mc += row_chunk<Tune, C>()) {
    const int64_t mend = std::min(m, mc + row_chunk<Tune, C>());
    float* const buffer = decode_buffer<Tune, C, T>(mend - mc, s1 - s0);
    if (!buffer) {  // all the panels at once: tiles of fewer rows take their own (wider) J
      row_block<V, Tune, C, T>(job, mc, mend, p0, p1, s0, s1, first, last);
      continue;
    }
    for (int64_t p = p0; p < p1; p += J)
      panel_chunk<V, Tune, C, T>(job, mc, mend, p, std::min(p1, p + J), s0, s1, first, last, buffer);
  }
}

// The same over every K chunk of packed panels (k_chunks), with the K
// chunks innermost (Tune::kKChunksInside): a row chunk's tile of J panels
// runs all of K before the next tile, so its partial sums (row chunk x 16·J
// outputs: 16 KiB on AVX2) stay in cache between K chunks, where with the K
// chunks outermost y (50 MB at M = 4096, N = 3072) went through memory once
// per chunk.
template <class V, class Tune, Core C, PanelType T, class KChunks>
void row_chunks_k_inside(const Job& job, int64_t m, int64_t p0, int64_t p1, KChunks&& k_chunks) {
  constexpr int J = Tune::panels_for(Tune::kMR);
  for (int64_t mc = 0; mc < m; mc += row_chunk<Tune, C>()) {
    const int64_t mend = std::min(m, mc + row_chunk<Tune, C>());
    float* const buffer = decode_buffer<Tune, C, T>(mend - mc, std::min(job.steps, step_chunk<Tune, C>()));
    for (int64_t p = p0; p < p1; p += J)
      k_chunks(step_chunk<Tune, C>(), [&](int64_t s0, int64_t s1, bool first, bool last) {
        panel_chunk<V, Tune, C, T>(job, mc, mend, p, std::min(p1, p + J), s0, s1, first, last, buffer);
      });
  }
}

// FP8 (E4M3, E5M2, MXFP8) read in place with few rows: the thread's panels
// whose 16 columns lie inside n, transposed and decoded in registers
// (fp8_rows_in_place_avx512vbmi; on AVX2 with scaled activations,
// fp8_rows_in_place_avx2); returns the first panel left to the packing path
// (p0 where this one does not apply).
template <class V, class Tune, Core C, PanelType T>
int64_t rows_in_place(const Job& job, int64_t m, int64_t p0, int64_t p1) {
  constexpr bool kAvx512 = V::kLanes == 16, kScaledAvx2 = V::kLanes == 8 && Tune::kScaledX;
  if constexpr (C == Core::fma && is_fp8(T) && (kAvx512 || kScaledAvx2) && Tune::kInPlaceRegisterRows > 0) {
    if (m > Tune::kInPlaceRegisterRows || (kAvx512 && !fp8_table_decode_supported())) return p0;
    const int64_t full = std::max(p0, std::min(p1, job.w->n / 16));
    const Fp8RowsInPlace how{Tune::kInPlaceSideBySide(m), Tune::kInPlaceRowPrefetchBytes,
                             row_prefetch_hint(Tune::kInPlaceRowPrefetchTo), Tune::kInPlaceStageAliasedRows};
    const float* a = static_cast<const float*>(job.a);
    if constexpr (kAvx512)
      fp8_rows_in_place_avx512vbmi(a, job.lda, m, *job.w, p0, full, how, job.alpha, job.bias, job.y,
                                   *job.nan_columns);
    else
      fp8_rows_in_place_avx2(a, job.lda, m, *job.w, p0, full, how, job.alpha, job.bias, job.y, *job.nan_columns,
                             *job.nonfinite_panels);
    return full;
  }
  (void)job, (void)m, (void)p1;
  return p0;
}

// Packed FP8 (E4M3, E5M2, MXFP8) with few rows: the thread's panels whose
// 16 columns lie inside n, decoded by table lookups (fp8_panels_avx512vbmi);
// returns the first panel left to the FMA core's loop (p0 where this one
// does not apply).
template <class V, class Tune, Core C, PanelType T>
int64_t packed_by_tables(const Job& job, int64_t m, int64_t p0, int64_t p1) {
  if constexpr (C == Core::fma && is_fp8(T) && V::kLanes == 16 && Tune::kPackedTableRows > 0) {
    if (m > Tune::kPackedTableRows || !fp8_table_decode_supported()) return p0;
    const int64_t full = std::max(p0, std::min(p1, job.w->n / 16));
    fp8_panels_avx512vbmi(static_cast<const float*>(job.a), job.lda, m, *job.w, p0, full,
                          Tune::kPackedTableSideBySide, Tune::kPackedTablePrefetchBytes, job.alpha, job.bias, job.y);
    return full;
  }
  (void)job, (void)m, (void)p1;
  return p0;
}

// Read in place: packs steps [s0, s1) of panels [p, end) into `buffer`
// (each panel's steps one after the other; an odd K's pad row zero, as in
// packed panels) and points job's chunk there; the columns whose codes hold
// a NaN go to job.nan_columns (E4M3 codes), the panels whose codes hold an
// inf or NaN to job.nonfinite_panels where it is set (E5M2).
template <class V, Core C>
void pack_group(Job& job, uint8_t* buffer, int64_t p, int64_t end, int64_t s0, int64_t s1, int64_t ahead) {
  constexpr int64_t kRowsPerStep = C == Core::dot ? 2 : 1;  // the dot core's steps are two panel rows
  const FloatPanels& w = *job.w;
  const int64_t r0 = kRowsPerStep * s0, r1 = kRowsPerStep * s1;
  job.chunk = buffer;
  job.chunk_p0 = p;
  job.chunk_s0 = s0;
  job.chunk_steps = s1 - s0;
  for (int64_t q = p; q < end; ++q) {
    uint8_t* dst = buffer + (q - p) * (s1 - s0) * job.row;
    const uint32_t nonfinite_rows = pack_steps<V>(w, q, r0, r1, dst, ahead);
    if (r1 > w.k) std::memset(dst + (w.k - r0) * 16, 0, 16);
    if (nonfinite_rows == 0) continue;
    if (w.type != PanelType::e5m2) {
      for (int j = 0; j < 16; ++j)
        if (nonfinite_rows >> j & 1u) job.nan_columns->push_back(q * 16 + j);
    } else if (job.nonfinite_panels) {
      job.nonfinite_panels->push_back(q);
    }
  }
}

// A thread's panels [p0, p1) over K chunks of step_chunk() steps, in k order
// for every output. In place, each K chunk of panels is packed into a
// per-thread buffer first (pack_steps: on AVX-512 64 k per zmm transpose):
// with at most one row chunk, one M = 1 tile's panels at a time, walking
// their rows' K chunks in order (each row read front to back, packed, then
// used from L1); with more rows, the thread's panels in groups of at most
// kInPlaceGroupBytes per K chunk (float_tile.hpp), each K chunk of a group
// packed once, then the row chunks; where the K chunks run innermost
// (Tune::kKChunksInside), all of K of each group, then the row chunks.
template <class V, class Tune, Core C, PanelType T>
void run(const Job& job, int64_t m, int64_t p0, int64_t p1) {
  const FloatPanels& w = *job.w;
  const int64_t steps = job.steps;
  auto k_chunks = [&](int64_t step_chunk, auto&& body) {
    for (int64_t s0 = 0; s0 < steps || s0 == 0; s0 += step_chunk) {
      const int64_t s1 = std::min(steps, s0 + step_chunk);
      body(s0, s1, s0 == 0, s1 == steps);
      if (steps == 0) break;
    }
  };
  if (!w.in_place()) {
    p0 = packed_by_tables<V, Tune, C, T>(job, m, p0, p1);
    if (p0 == p1) return;
    // Under decoded_rows() the tiles read the panels in registers and the
    // partial sums are a few rows: the K chunks stay outermost, so that
    // row_chunks gives the leftover rows' tiles every panel (their wider J).
    if (m >= decoded_rows<Tune, C>() && Tune::kKChunksInside) {
      row_chunks_k_inside<V, Tune, C, T>(job, m, p0, p1, k_chunks);
      return;
    }
    const int64_t steps_per_chunk = m < Tune::kMR ? Tune::kFewRowsStepChunk : step_chunk<Tune, C>();
    k_chunks(steps_per_chunk, [&](int64_t s0, int64_t s1, bool first, bool last) {
      row_chunks<V, Tune, C, T>(job, m, p0, p1, s0, s1, first, last);
    });
    return;
  }
  p0 = rows_in_place<V, Tune, C, T>(job, m, p0, p1);
  if (p0 == p1) return;
  constexpr int64_t J = Tune::panels_for(Tune::kMR);
  // Many rows with the K chunks innermost: all of K of a group packed at
  // once, so that every K chunk of it is there for each row chunk.
  const bool whole_k = Tune::kKChunksInside && m > Tune::kRowChunk;
  const int64_t chunk_bytes = (whole_k ? steps : std::min(steps, step_chunk<Tune, C>())) * job.row;
  const int64_t fits = std::max<int64_t>(J, kInPlaceGroupBytes / std::max<int64_t>(1, chunk_bytes) / J * J);
  const int64_t group = m <= Tune::kRowChunk ? Tune::kInPlaceGroup : std::min(p1 - p0, fits);
  const int64_t ahead = m < Tune::kMR ? Tune::kFewRowsPackAhead : Tune::kPackAhead;  // K chunks the packer fetches
  thread_local std::vector<uint8_t> chunk;
  if (chunk.size() < static_cast<size_t>(group * chunk_bytes)) chunk.resize(static_cast<size_t>(group * chunk_bytes));
  Job local = job;
  for (int64_t p = p0; p < p1; p += group) {
    const int64_t end = std::min(p1, p + group);
    if (whole_k) {
      pack_group<V, C>(local, chunk.data(), p, end, 0, steps, ahead);
      row_chunks_k_inside<V, Tune, C, T>(local, m, p, end, k_chunks);
      continue;
    }
    k_chunks(step_chunk<Tune, C>(), [&](int64_t s0, int64_t s1, bool first, bool last) {
      pack_group<V, C>(local, chunk.data(), p, end, s0, s1, ahead);
      row_chunks<V, Tune, C, T>(local, m, p, end, s0, s1, first, last);
    });
  }
}

template <class V, Core C, class Tune = FloatTile<V::kLanes>>
void gemm(const void* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha, const float* bias, float* y) {
  if (m <= 0 || w.n <= 0) return;
  if (C == Core::fma && lda < w.k)
    fail("float gemm: activation rows hold {} values, the weight needs {}", lda, w.k);
  if (C == Core::dot && (!is_fp8(w.type) || lda < w.pair_steps()))
    fail("float gemm: the bf16 core needs FP8 panels and {} activation pairs a row (has {})", w.pair_steps(), lda);
  // E4M3 codes (and NVFP4's E4M3 block scales) decode to value·2^-8
  // (float_gemm.hpp): the 2^8 goes to alpha.
  const bool scaled = w.type == PanelType::e4m3 || w.type == PanelType::mxfp8 || w.type == PanelType::nvfp4;
  Job shared{a, lda, &w, scaled ? alpha * 256.0f : alpha, bias, y};
  shared.steps = C == Core::dot ? w.pair_steps() : w.k;
  shared.row = C == Core::dot ? 2 * w.row_bytes() : w.row_bytes();
  ThreadLists found;      // in place: NaN columns found by each thread
  ThreadLists nonfinite;  // e5m2 with scaled activations, in place: each thread's inf / NaN panels
  thread_local std::vector<float> scaled_rows;
  const float* x_scaled = nullptr;
  if constexpr (C == Core::fma && Tune::kScaledXRows > 0)
    x_scaled = scaled_x<Tune>(static_cast<const float*>(a), lda, m, w, scaled_rows);
  util::parallel_for(
      w.panels, Tune::kGrain,
      [&](int chunks) {
        found.reset(chunks);
        nonfinite.reset(chunks);
      },
      [&](int64_t p0, int64_t p1, int thread) {
        Job job = shared;
        job.nan_columns = &found.of(thread);
        if constexpr (C == Core::fma && Tune::kScaledXRows > 0) {
          if (x_scaled && !denormals_are_zero()) {  // each thread's own MXCSR
            job.a = x_scaled;
            job.lda = w.k;
            job.nonfinite_panels = &nonfinite.of(thread);
            switch (w.type) {
              case PanelType::e4m3: run<V, WithScaledX<Tune>, C, PanelType::e4m3>(job, m, p0, p1); break;
              case PanelType::e5m2: run<V, WithScaledX<Tune>, C, PanelType::e5m2>(job, m, p0, p1); break;
              default: run<V, WithScaledX<Tune>, C, PanelType::mxfp8>(job, m, p0, p1); break;
            }
            return;
          }
        }
        if constexpr (C == Core::dot) {
          switch (w.type) {
            case PanelType::e4m3: run<V, Tune, C, PanelType::e4m3>(job, m, p0, p1); break;
            case PanelType::e5m2: run<V, Tune, C, PanelType::e5m2>(job, m, p0, p1); break;
            default: run<V, Tune, C, PanelType::mxfp8>(job, m, p0, p1); break;
          }
        } else {
          switch (w.type) {
            case PanelType::f32: run<V, Tune, C, PanelType::f32>(job, m, p0, p1); break;
            case PanelType::bf16: run<V, Tune, C, PanelType::bf16>(job, m, p0, p1); break;
            case PanelType::f16: run<V, Tune, C, PanelType::f16>(job, m, p0, p1); break;
            case PanelType::e4m3: run<V, Tune, C, PanelType::e4m3>(job, m, p0, p1); break;
            case PanelType::e5m2: run<V, Tune, C, PanelType::e5m2>(job, m, p0, p1); break;
            case PanelType::mxfp8: run<V, Tune, C, PanelType::mxfp8>(job, m, p0, p1); break;
            case PanelType::nvfp4: run<V, Tune, C, PanelType::nvfp4>(job, m, p0, p1); break;
          }
        }
      });
  // E5M2 inf and NaN codes, which the decode by exponent made finite: their
  // panels (packed: listed; in place: found) again on the f16 widening, the
  // bits every other panel kept.
  if constexpr (C == Core::fma && Tune::kScaledXRows > 0) {
    if (x_scaled && w.type == PanelType::e5m2) {
      Job job = shared;
      job.nan_columns = &found.of(0);  // unused: E5M2 has no NaN columns
      for (const int64_t p : nonfinite.merged(w.nonfinite_panels)) run<V, Tune, C, PanelType::e5m2>(job, m, p, p + 1);
    }
  }
  // A NaN weight code makes its whole output column NaN.
  for (const int64_t c : found.merged(w.nan_columns))
    for (int64_t r = 0; r < m; ++r) y[r * w.n + c] = std::numeric_limits<float>::quiet_NaN();
}

}  // namespace
}  // namespace mixq::kernels::x86
