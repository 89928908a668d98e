// AVX-512 VNNI integer linear (layouts and roles: int_pack.hpp).
//
// forward(x, m):
//  * small M (<= kGemvRows): quantize all tokens once, then split the weight
//    panels over the threads; each thread streams its panels as 4 independent
//    memory streams (one per register column), so the weights are read from
//    DRAM exactly once per call.
//  * large M: split the tokens into blocks of MC rows (one block per task);
//    a task rotates + quantizes its rows into an L2-resident activation block
//    and runs every weight quad (64 columns, ~K·64 bytes, L2-resident while
//    all of the block's 6-row panels use it) over it. Activations never go to
//    DRAM in quantized form; rotation and quantization are ~2 % of the work.
// The 6x4 register tile (24 zmm accumulators, 4 weight registers, 1
// broadcast) runs a full K per call; its int32 results go through one
// epilogue with the exact operation order of the reference (int_kernel.hpp).
#include <immintrin.h>

// GCC 12 reports its own _mm512_undefined_ps() inside _mm512_cvtepi32_ps as
// "maybe uninitialized" (a false positive in the intrinsic header).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/hadamard_fast.hpp"
#include "util/parallel.hpp"
#include "kernels/x86/int_pack.hpp"
#include "mixq/error.hpp"
#include "mixq/threads.hpp"

namespace mixq::kernels {
namespace x86 {
namespace {

constexpr int64_t kGemvRows = 24;  // up to 4 panels of 6 tokens: memory-bound regime
// Quantized activation rows per large-M block: the block stays in the 2 MiB L2
// next to one weight quad (64·K bytes) while every quad streams over it, so a
// quad fetched from L3 is reused by as many 6-token panels as possible (the
// first pass over each quad runs at L3 speed). 768 KiB measured best among
// 384 / 768 / 1200 KiB at M = 4096, K = N = 3072 (2 threads: 1124 -> 1190 GOPS).
constexpr int64_t kActBlockBytes = 768 * 1024;

struct ActBlock {
  std::vector<int8_t> q;     // panels of kMr tokens, layout in int_pack.hpp
  std::vector<float> scale;  // [rows]
  std::vector<int32_t> sum;  // [rows] Σ_k q
  std::vector<float> tmp;    // one rotated row
};

// Q8row / Q4row of one row (T = f32, docs/FORMATS.md §2.5) written into its panel slot.
// Same operations as quant::q8row / q4row: absmax ignoring NaN, one fp32
// division for the scale, x / s rounded half-to-even, clamped, NaN -> 0.
//
// `low_x16` (int4 weights with int4 activations, see WeightMode::int4_x16):
// the values at k with k % 8 < 4 (they meet the weights' low nibbles) are
// stored times 16 (|16·q| <= 112 fits int8); the row sum stays unscaled.
void quantize_row(const float* x, int64_t k, int64_t kp, ActQuant act, bool low_x16, int8_t* panel, int r,
                  float* scale_out, int32_t* sum_out) {
  __m512 amax = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) amax = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + i)), amax);
  if (i < k) {
    const __mmask16 m = static_cast<__mmask16>((1u << (k - i)) - 1);
    amax = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(m, x + i)), amax);
  }
  const float a = _mm512_reduce_max_ps(amax);
  float s;
  float lo, hi;
  if (act == ActQuant::q8row) {
    s = std::max(a / 127.0f, 1e-30f);
    lo = -128.0f;
    hi = 127.0f;
  } else {
    s = std::max(a, 1e-10f) / 7.0f;
    lo = -7.0f;
    hi = 7.0f;
  }
  *scale_out = s;
  const __m512 vs = _mm512_set1_ps(s), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  __m512i vsum = _mm512_setzero_si512();
  const int64_t steps = kp / 4;
  // Lanes i..i+15 with i % 16 == 0: k % 8 < 4 in lanes 0-3 and 8-11.
  const __m512i x16 = _mm512_setr_epi32(16, 16, 16, 16, 1, 1, 1, 1, 16, 16, 16, 16, 1, 1, 1, 1);
  for (i = 0; i < kp; i += 16) {
    const int64_t left = k - i;
    __m512 v;
    if (left >= 16) v = _mm512_loadu_ps(x + i);
    else if (left > 0) v = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << left) - 1), x + i);
    else v = _mm512_setzero_ps();
    __m512 qv = _mm512_div_ps(v, vs);
    const __mmask16 ordered = _mm512_cmp_ps_mask(qv, qv, _CMP_ORD_Q);
    qv = _mm512_min_ps(_mm512_max_ps(qv, vlo), vhi);
    const __m512i qi = _mm512_maskz_cvt_roundps_epi32(
        ordered, qv, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vsum = _mm512_add_epi32(vsum, qi);
    const __m512i stored = low_x16 ? _mm512_mullo_epi32(qi, x16) : qi;
    alignas(16) int32_t words[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(words), _mm512_cvtepi32_epi8(stored));
    const int64_t kk0 = i / 4;
    for (int w = 0; w < 4 && kk0 + w < steps; ++w)
      std::memcpy(panel + ((kk0 + w) * kMr + r) * 4, &words[w], 4);
  }
  *sum_out = _mm512_reduce_add_epi32(vsum);
}

// acc[r][c] over the full padded K for MR tokens of one activation panel and
// 4 weight panels b[0..3]; results to out[r][64] (int32, offset not removed).
// The 24 accumulators are separate named variables: with an array GCC 12 keeps
// them partly on the stack (a GCC 12 pitfall; checked with objdump -d:
// the loop holds only loads, broadcasts and vpdpbusd, no stack traffic).
#define MIXQ_ROW(r)                                                    \
  if constexpr (MR > r) {                                              \
    int32_t word;                                                      \
    std::memcpy(&word, ak + 4 * r, 4);                                 \
    const __m512i x = _mm512_set1_epi32(word);                         \
    c##r##0 = _mm512_dpbusd_epi32(c##r##0, w0, x);                     \
    c##r##1 = _mm512_dpbusd_epi32(c##r##1, w1, x);                     \
    c##r##2 = _mm512_dpbusd_epi32(c##r##2, w2, x);                     \
    c##r##3 = _mm512_dpbusd_epi32(c##r##3, w3, x);                     \
  }
#define MIXQ_ALL_ROWS MIXQ_ROW(0) MIXQ_ROW(1) MIXQ_ROW(2) MIXQ_ROW(3) MIXQ_ROW(4) MIXQ_ROW(5)
#define MIXQ_STORE_ROW(r)                                              \
  if constexpr (MR > r) {                                              \
    _mm512_storeu_si512(out + r * 64 + 0, c##r##0);                    \
    _mm512_storeu_si512(out + r * 64 + 16, c##r##1);                   \
    _mm512_storeu_si512(out + r * 64 + 32, c##r##2);                   \
    _mm512_storeu_si512(out + r * 64 + 48, c##r##3);                   \
  }

// Streaming (M <= kGemvRows, weights from DRAM): software prefetch of each of
// the 4 weight streams this far ahead. The hardware prefetchers alone left the
// M = 1 loops at 56-88 % (int8) and 65-78 % (int4) of the read bandwidth;
// with it: 95-100 % and 76-85 % (2 threads, quiet, alternating runs; 1 and 4 KiB
// were no better). Not used for large M, where weights come from L2 and the
// extra loads measured slower.
constexpr int64_t kStreamPrefetchBytes = 2048;

#define MIXQ_PREFETCH_STREAMS(offset)                                                        \
  if constexpr (Stream) {                                                                    \
    _mm_prefetch(reinterpret_cast<const char*>(b0 + (offset) + kStreamPrefetchBytes), _MM_HINT_T0); \
    _mm_prefetch(reinterpret_cast<const char*>(b1 + (offset) + kStreamPrefetchBytes), _MM_HINT_T0); \
    _mm_prefetch(reinterpret_cast<const char*>(b2 + (offset) + kStreamPrefetchBytes), _MM_HINT_T0); \
    _mm_prefetch(reinterpret_cast<const char*>(b3 + (offset) + kStreamPrefetchBytes), _MM_HINT_T0); \
  }

// How the micro-kernel reads the weight panels (int_pack.hpp):
//  int8:     one panel row is the u8 operand as is;
//  int4:     low nibbles (v & 0xF) then high nibbles ((v >> 4) & 0xF): 3 ops
//            per 64 weight bytes;
//  int4_x16: low nibbles (v & 0x0F) against activations stored times 16, high
//            nibbles in place (v & 0xF0 = 16·high) against plain activations:
//            2 ops, and every product carries the factor 16, which the
//            epilogue removes with an exact arithmetic shift. Needs int4
//            activations (16·q must fit int8).
enum class WeightMode { int8, int4, int4_x16 };

template <int MR, WeightMode Mode, bool Stream>
void micro(const int8_t* a, int64_t kp, const uint8_t* const b[4], int32_t* out) {
  __m512i c00 = _mm512_setzero_si512(), c01 = c00, c02 = c00, c03 = c00;
  __m512i c10 = c00, c11 = c00, c12 = c00, c13 = c00;
  __m512i c20 = c00, c21 = c00, c22 = c00, c23 = c00;
  __m512i c30 = c00, c31 = c00, c32 = c00, c33 = c00;
  __m512i c40 = c00, c41 = c00, c42 = c00, c43 = c00;
  __m512i c50 = c00, c51 = c00, c52 = c00, c53 = c00;
  const uint8_t* b0 = b[0];
  const uint8_t* b1 = b[1];
  const uint8_t* b2 = b[2];
  const uint8_t* b3 = b[3];
  if constexpr (Mode == WeightMode::int8) {
    for (int64_t kk = 0; kk < kp / 4; ++kk) {
      const __m512i w0 = _mm512_load_si512(b0 + kk * 64), w1 = _mm512_load_si512(b1 + kk * 64);
      const __m512i w2 = _mm512_load_si512(b2 + kk * 64), w3 = _mm512_load_si512(b3 + kk * 64);
      const int8_t* ak = a + kk * kMr * 4;
      MIXQ_PREFETCH_STREAMS(kk * 64)
      MIXQ_ALL_ROWS
    }
  } else if constexpr (Mode == WeightMode::int4_x16) {
    const __m512i lo = _mm512_set1_epi8(0x0F), hi = _mm512_set1_epi8(static_cast<char>(0xF0));
    for (int64_t k8 = 0; k8 < kp / 8; ++k8) {
      MIXQ_PREFETCH_STREAMS(k8 * 64)
      const __m512i v0 = _mm512_load_si512(b0 + k8 * 64), v1 = _mm512_load_si512(b1 + k8 * 64);
      const __m512i v2 = _mm512_load_si512(b2 + k8 * 64), v3 = _mm512_load_si512(b3 + k8 * 64);
      {
        const int8_t* ak = a + 2 * k8 * kMr * 4;
        const __m512i w0 = _mm512_and_si512(v0, lo), w1 = _mm512_and_si512(v1, lo);
        const __m512i w2 = _mm512_and_si512(v2, lo), w3 = _mm512_and_si512(v3, lo);
        MIXQ_ALL_ROWS
      }
      {
        const int8_t* ak = a + (2 * k8 + 1) * kMr * 4;
        const __m512i w0 = _mm512_and_si512(v0, hi), w1 = _mm512_and_si512(v1, hi);
        const __m512i w2 = _mm512_and_si512(v2, hi), w3 = _mm512_and_si512(v3, hi);
        MIXQ_ALL_ROWS
      }
    }
  } else {
    const __m512i mask = _mm512_set1_epi8(0x0F);
    for (int64_t k8 = 0; k8 < kp / 8; ++k8) {
      MIXQ_PREFETCH_STREAMS(k8 * 64)
      {
        const int8_t* ak = a + 2 * k8 * kMr * 4;
        const __m512i w0 = _mm512_and_si512(_mm512_load_si512(b0 + k8 * 64), mask);
        const __m512i w1 = _mm512_and_si512(_mm512_load_si512(b1 + k8 * 64), mask);
        const __m512i w2 = _mm512_and_si512(_mm512_load_si512(b2 + k8 * 64), mask);
        const __m512i w3 = _mm512_and_si512(_mm512_load_si512(b3 + k8 * 64), mask);
        MIXQ_ALL_ROWS
      }
      {
        const int8_t* ak = a + (2 * k8 + 1) * kMr * 4;
        const __m512i w0 = _mm512_and_si512(_mm512_srli_epi16(_mm512_load_si512(b0 + k8 * 64), 4), mask);
        const __m512i w1 = _mm512_and_si512(_mm512_srli_epi16(_mm512_load_si512(b1 + k8 * 64), 4), mask);
        const __m512i w2 = _mm512_and_si512(_mm512_srli_epi16(_mm512_load_si512(b2 + k8 * 64), 4), mask);
        const __m512i w3 = _mm512_and_si512(_mm512_srli_epi16(_mm512_load_si512(b3 + k8 * 64), 4), mask);
        MIXQ_ALL_ROWS
      }
    }
  }
  MIXQ_STORE_ROW(0) MIXQ_STORE_ROW(1) MIXQ_STORE_ROW(2)
  MIXQ_STORE_ROW(3) MIXQ_STORE_ROW(4) MIXQ_STORE_ROW(5)
}
#undef MIXQ_ROW
#undef MIXQ_ALL_ROWS
#undef MIXQ_STORE_ROW
#undef MIXQ_PREFETCH_STREAMS

using MicroFn = void (*)(const int8_t*, int64_t, const uint8_t* const*, int32_t*);

template <WeightMode Mode, bool Stream>
MicroFn micro_for(int rows) {
  switch (rows) {
    case 1: return micro<1, Mode, Stream>;
    case 2: return micro<2, Mode, Stream>;
    case 3: return micro<3, Mode, Stream>;
    case 4: return micro<4, Mode, Stream>;
    case 5: return micro<5, Mode, Stream>;
    default: return micro<6, Mode, Stream>;
  }
}

template <WeightMode Mode>
MicroFn micro_for(int rows, bool stream) {
  return stream ? micro_for<Mode, true>(rows) : micro_for<Mode, false>(rows);
}

MicroFn micro_for(int rows, WeightMode mode, bool stream) {
  switch (mode) {
    case WeightMode::int8: return micro_for<WeightMode::int8>(rows, stream);
    case WeightMode::int4: return micro_for<WeightMode::int4>(rows, stream);
    default: return micro_for<WeightMode::int4_x16>(rows, stream);
  }
}

class Avx512IntKernel final : public IntKernel {
 public:
  explicit Avx512IntKernel(const IntLayerDesc& d)
      : group_(d.group),
        act_(d.act),
        epilogue_(d.epilogue),
        w_(pack_int_weights(d)),
        // int4_x16 sums 16·(w+8)·q: |16·15·7| per product, so int32 holds K up to ~1.2 M.
        mode_(!w_.int4 ? WeightMode::int8
                       : d.act == ActQuant::q4row ? WeightMode::int4_x16 : WeightMode::int4) {}

  std::string_view name() const override { return "avx512_vnni"; }

  void forward(const float* x, int64_t m, float* y) const override {
    if (m <= 0) return;
    if (m <= kGemvRows) forward_small(x, m, y);
    else forward_large(x, m, y);
  }

 private:
  // Rotates (when ConvRot) and quantizes `rows` tokens starting at x into blk.
  void prepare(const float* x, int64_t rows, ActBlock& blk) const {
    const int64_t k = w_.k, kp = w_.kp;
    const int64_t panels = (rows + kMr - 1) / kMr;
    blk.q.assign(static_cast<size_t>(panels * kp * kMr), 0);
    blk.scale.resize(static_cast<size_t>(panels * kMr));
    blk.sum.resize(static_cast<size_t>(panels * kMr));
    if (group_ > 0) blk.tmp.resize(static_cast<size_t>(k));
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = x + r * k;
      if (group_ > 0) {
        std::memcpy(blk.tmp.data(), src, static_cast<size_t>(k) * sizeof(float));
        hadamard_row_avx512(blk.tmp.data(), k, group_);
        src = blk.tmp.data();
      }
      quantize_row(src, k, kp, act_, mode_ == WeightMode::int4_x16, blk.q.data() + (r / kMr) * kp * kMr,
                   static_cast<int>(r % kMr), &blk.scale[static_cast<size_t>(r)],
                   &blk.sum[static_cast<size_t>(r)]);
    }
  }

  // Offset removal, scales, bias; stores the valid columns of 4 panels.
  void epilogue(const int32_t* acc, int rows, int64_t row0, const ActBlock& blk,
                int64_t blk_row0, const int64_t panel[4], float* y) const {
    const int64_t n = w_.n;
    for (int r = 0; r < rows; ++r) {
      const int64_t br = blk_row0 + r;
      const uint32_t offset =
          static_cast<uint32_t>(w_.weight_bias) * static_cast<uint32_t>(blk.sum[static_cast<size_t>(br)]);
      const __m512i voff = _mm512_set1_epi32(static_cast<int32_t>(offset));
      const __m512 sx = _mm512_set1_ps(blk.scale[static_cast<size_t>(br)]);
      float* yr = y + (row0 + r) * n;
      for (int c = 0; c < 4; ++c) {
        const int64_t col = panel[c] * kPanelCols;
        if (col >= n) continue;
        const int64_t left = std::min<int64_t>(16, n - col);
        const __mmask16 mask = static_cast<__mmask16>((1u << left) - 1);
        __m512i raw = _mm512_loadu_si512(acc + r * 64 + c * 16);
        if (mode_ == WeightMode::int4_x16) raw = _mm512_srai_epi32(raw, 4);  // exact: a multiple of 16
        const __m512i a = _mm512_sub_epi32(raw, voff);
        const __m512 f = _mm512_cvtepi32_ps(a);
        const __m512 sw = _mm512_loadu_ps(w_.scale.data() + col);
        __m512 v;
        if (epilogue_ == Epilogue::scale_product) v = _mm512_mul_ps(f, _mm512_mul_ps(sx, sw));
        else v = _mm512_mul_ps(_mm512_mul_ps(f, sx), sw);
        if (!w_.bias.empty()) v = _mm512_add_ps(v, _mm512_loadu_ps(w_.bias.data() + col));
        _mm512_mask_storeu_ps(yr + col, mask, v);
      }
    }
  }

  // Asks for the output lines of a tile before its micro-kernel runs. Every
  // line of y is written exactly once, so without this each epilogue store
  // misses to DRAM and the store buffer stalls the core (measured: ~15 % of the
  // M = 4096 time); the micro-kernel takes microseconds, ample time to fetch.
  void prefetch_output(int64_t row, int rows, const int64_t panel[4], float* y) const {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < 4; ++c) {
        const int64_t col = panel[c] * kPanelCols;
        if (col < w_.n) _mm_prefetch(reinterpret_cast<const char*>(y + (row + r) * w_.n + col), _MM_HINT_ET0);
      }
  }

  // Runs 4 weight panels over every activation panel of blk (rows tokens);
  // `stream` when the panels come from DRAM (small M).
  void run_quad(const ActBlock& blk, int64_t rows, int64_t row0, const int64_t panel[4], bool stream,
                float* y) const {
    alignas(64) int32_t acc[kMr * 64];
    const uint8_t* b[4] = {w_.panel(panel[0]), w_.panel(panel[1]), w_.panel(panel[2]),
                           w_.panel(panel[3])};
    for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
      const int mr = static_cast<int>(std::min<int64_t>(kMr, rows - r0));
      const int8_t* a = blk.q.data() + (r0 / kMr) * w_.kp * kMr;
      prefetch_output(row0 + r0, mr, panel, y);
      micro_for(mr, mode_, stream)(a, w_.kp, b, acc);
      epilogue(acc, mr, row0 + r0, blk, r0, panel, y);
    }
  }

  void forward_small(const float* x, int64_t m, float* y) const {
    thread_local ActBlock blk;
    prepare(x, m, blk);
    const ActBlock& shared = blk;
    const int64_t quads = w_.panels / 4;
    util::parallel_for(quads, 1, [&](int64_t q0, int64_t q1, int) {
      // 4 streams: register column c walks panels [4q0 + c·L, 4q0 + (c+1)·L).
      const int64_t len = q1 - q0;
      for (int64_t t = 0; t < len; ++t) {
        const int64_t panel[4] = {4 * q0 + t, 4 * q0 + len + t, 4 * q0 + 2 * len + t,
                                  4 * q0 + 3 * len + t};
        run_quad(shared, m, 0, panel, true, y);
      }
    });
  }

  void forward_large(const float* x, int64_t m, float* y) const {
    // Block rows so that the quantized block stays in L2 and the blocks split
    // evenly over the threads.
    const int64_t by_cache = std::max<int64_t>(kMr, (kActBlockBytes / w_.kp) / kMr * kMr);
    const int64_t threads = std::max(1, mixq::num_threads());
    int64_t blocks = (m + by_cache - 1) / by_cache;
    blocks = (blocks + threads - 1) / threads * threads;
    const int64_t mc = ((m + blocks - 1) / blocks + kMr - 1) / kMr * kMr;
    const int64_t nblocks = (m + mc - 1) / mc;
    util::parallel_for(nblocks, 1, [&](int64_t b0, int64_t b1, int) {
      thread_local ActBlock blk;
      for (int64_t bi = b0; bi < b1; ++bi) {
        const int64_t row0 = bi * mc;
        const int64_t rows = std::min(mc, m - row0);
        prepare(x + row0 * w_.k, rows, blk);
        for (int64_t q = 0; q < w_.panels / 4; ++q) {
          const int64_t panel[4] = {4 * q, 4 * q + 1, 4 * q + 2, 4 * q + 3};
          run_quad(blk, rows, row0, panel, false, y);
        }
      }
    });
  }

  int64_t group_;
  ActQuant act_;
  Epilogue epilogue_;
  PackedIntWeights w_;
  WeightMode mode_;
};

}  // namespace
}  // namespace x86

std::unique_ptr<IntKernel> make_int_kernel_avx512(const IntLayerDesc& desc) {
  return std::make_unique<x86::Avx512IntKernel>(desc);
}

}  // namespace mixq::kernels
