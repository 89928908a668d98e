#pragma once
// The integer linear (layouts and roles: int_pack.hpp) over a vector type V
// (simd_traits.hpp), compiled once per target by int_gemm.avx2.cpp,
// int_gemm.avxvnni.cpp and int_gemm.avx512.cpp.
//
// forward(x, m):
//  * small M (<= T::kSmallRows): quantize all tokens once, then split the weight
//    panels over the threads; each thread walks its tiles of P panels as P
//    independent memory streams (one per panel of the tile), so the weights
//    are read from DRAM exactly once per call.
//  * large M: split the tokens into blocks of MC rows (one block per task);
//    a task rotates + quantizes its rows into an L2-resident activation block
//    and runs every weight tile (P·16 columns, L2-resident while all of the
//    block's 6-row panels use it) over it. Activations never go to DRAM in
//    quantized form; rotation and quantization are a few % of the work.
// int8 or int4 rows used in place (PackedIntWeights::rows, no copy): small M
// runs a row-major GEMV on them (rows_dot; int8 rows only up to
// kInt8InPlaceGemvRows tokens, then small M's tiles are transposed as large
// M's are); large M transposes a tile of P
// panels into the int8 / int4 panel layout just before use (transpose_panel), once
// per (activation block, tile), as codes are decoded below.
// 4-bit codes (IntCodes, asym_w4a8_int8) are decoded one tile of P panels at
// a time, over the full K, into a per-thread int8 tile (decode_panel: a
// 16-entry table per column and group, vpshufb over the nibbles) that the
// int8 micro-kernel then reads: small M decodes every panel once per call,
// large M once per (activation block, tile), i.e. once per MC tokens; up to
// kCodesInRegistersRows tokens the codes are looked up in registers instead
// (codes_micro_impl.hpp), no tile. The AVX2 targets hold codes in 32-k
// blocks where the group size and K allow (int_pack.hpp): their register
// kernel and decode are codes_blocks_impl.hpp's.
// On Isa::amx, large M multiplies on AMX-INT8 tiles instead
// (forward_large_amx, amx_tiles.hpp), the weight panels being the B tiles.
// The register tile is kMr = 6 tokens × P panels (16/kLanes vectors each):
// AVX-512 6 × 4 panels (24 zmm accumulators, 4 weight registers, 1
// broadcast), AVX2 6 × 1 panel (12 ymm accumulators, 2 weight registers, 1
// broadcast; int_micro_impl.hpp). It runs a full K per call (large M past
// kKChunk k: one K chunk, adding to the int32 sums of the chunks before); its
// int32 results go through one epilogue with the exact operation order of the
// reference (int_kernel.hpp).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/cpu.hpp"
#include "kernels/hadamard_fast_impl.hpp"
#include "util/parallel.hpp"
#include "util/phase_timer.hpp"
#include "kernels/x86/amx_tiles.hpp"
#include "kernels/x86/codes_blocks_impl.hpp"
#include "kernels/x86/codes_micro_impl.hpp"
#include "kernels/x86/codes_vbmi.hpp"
#include "kernels/x86/int_micro_impl.hpp"
#include "kernels/x86/int_pack.hpp"
#include "kernels/x86/int_tile.hpp"
#include "kernels/x86/int_weight_panels.hpp"
#include "kernels/x86/nibble_steps.hpp"
#include "kernels/x86/simd_traits.hpp"
#include "mixq/threads.hpp"

namespace mixq::kernels::x86 {
namespace {

struct ActBlock {
  std::vector<int8_t> q;     // panels of kMr tokens, layout in int_pack.hpp, from q.data() + at
  size_t at = 0;             // 64-byte aligned for ActLayout::tiles (a tile row is one cache line)
  std::vector<float> scale;  // [rows]
  std::vector<int32_t> sum;  // [rows] Σ_k q
  std::vector<float> tmp;    // one rotated row
  std::vector<int8_t> split; // one row's codes, even k then odd k
};

// Q8row / Q4row of one row (T = f32) written into its panel slot. Same
// operations as quant::q8row / q4row: absmax ignoring NaN, one fp32 division
// for the scale, x / s rounded half-to-even, clamped, NaN -> 0.
//
// `slots`: tokens per 4-byte step of the layout: kMr for an activation panel,
// 1 for a plain row: q[k] at panel[(k / 64)·chunk_stride + k % 64] (64 for
// rows_dot's rows, 1024 for the AMX tile layout).
// `low_x16` (int4 weights with int4 activations, see WeightMode::int4_x16):
// the values at k with k % 8 < 4 (they meet the weights' low nibbles) are
// stored times 16 (|16·q| <= 112 fits int8); the row sum stays unscaled.
template <class V>
void quantize_row(const float* x, int64_t k, int64_t kp, ActQuant act, bool low_x16, int8_t* panel, int r,
                  int slots, float* scale_out, int32_t* sum_out, int64_t chunk_stride = 64) {
  using F = typename V::F;
  using I = typename V::I;
  constexpr int L = V::kLanes;
  F amax = V::zero();
  int64_t i = 0;
  for (; i + L <= k; i += L) {
    if (i % 16 == 0) prefetch_activations_ahead(x + i);
    amax = V::max(V::abs(V::load(x + i)), amax);
  }
  if (i < k) amax = V::max(V::abs(V::loadz(V::mask(k - i), x + i)), amax);
  const float a = V::reduce_max(amax);
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
  const F vs = V::set1(s), vlo = V::set1(lo), vhi = V::set1(hi);
  I vsum = V::zeroi();
  const int64_t steps = kp / 4;
  // Lanes i..i+kLanes-1 with i % kLanes == 0: k % 8 < 4 in lanes 0-3 (and 8-11).
  alignas(64) static constexpr int32_t kX16[16] = {16, 16, 16, 16, 1, 1, 1, 1, 16, 16, 16, 16, 1, 1, 1, 1};
  const I x16 = V::loadi(kX16);
  for (i = 0; i < kp; i += L) {
    const int64_t left = k - i;
    F v;
    if (left >= L) v = V::load(x + i);
    else if (left > 0) v = V::loadz(V::mask(left), x + i);
    else v = V::zero();
    F qv = V::div(v, vs);
    const typename V::MF ordered = V::ordered(qv);
    qv = V::min(V::max(qv, vlo), vhi);
    const I qi = V::cvtr_where(ordered, qv);
    vsum = V::addi(vsum, qi);
    const I stored = low_x16 ? V::mullo(qi, x16) : qi;
    // A plain row's L codes lie in one 64-byte chunk (L divides 64).
    int8_t* const row_at = panel + (i / 64) * chunk_stride + i % 64;
    if (slots == 1 && i + L <= kp) {
      V::store_i8(row_at, stored);
      continue;
    }
    alignas(16) int32_t words[L / 4];
    V::store_i8(reinterpret_cast<int8_t*>(words), stored);
    const int64_t kk0 = i / 4;
    for (int w = 0; w < L / 4 && kk0 + w < steps; ++w)
      std::memcpy(slots == 1 ? row_at + 4 * w : panel + ((kk0 + w) * slots + r) * 4, &words[w], 4);
  }
  *sum_out = V::reduce_add(vsum);
}

// Exact int32 dots of TM plain quantized token rows q (stride kp, zero
// padded) with R in-place weight rows of rb bytes, each row one memory
// stream, 64 bytes per step (Stream: each prefetched T::kStreamPrefetchBytes
// ahead, T::kOneStreamPrefetchBytes where R = 1, with T::kStreamPrefetchHint):
//  int8: Σ_k q[k]·w[k], as |w| against q·sign(w) (Avx2::abs8); q must lie
//        in [-127, 127], which Q8row's codes do (|x| / (amax / 127) rounds
//        to at most 127; -128 is never produced);
//  int4, int4_a4 (int8 or int4 activations): Σ_k q[k]·(w[k] + 8): a byte's
//        low nibble (even k, + 8 = ^ 8) meets the token's even codes, stored
//        first (k / 2 bytes), its high nibble the odd ones stored after them
//        (prepare); the + 8 is the panel layouts' weight bias, removed by the
//        epilogue. Without VNNI the products of kI16Steps steps add up in i16
//        (8 per i16 lane and step; kI16Products in int_micro_impl.hpp) before
//        one widening.
// The rb % 64 tail is one more step on copies padded with zero codes (a
// zero q byte adds nothing whatever the weight byte). It is not a scalar
// loop: g++ 12 turns `sum += q[j] * w[j]` over int8 into a wrong dot
// product on AVX-VNNI / AVX512-VNNI targets (seen at tails of 20 and 37
// bytes: test_kernels_int).
template <class V, class T, int R, int TM, WeightMode Mode, bool Stream>
void rows_dot(const uint8_t* const* w, const int8_t* q, int64_t kp, int64_t rb, int32_t (*out)[R]) {
  using I = typename V::I;
  constexpr bool Int4 = Mode != WeightMode::int8, kI16 = Int4 && !V::kVnni;
  constexpr int H = 64 / (4 * V::kLanes);  // vectors per 64-byte step
  constexpr int64_t B = 4 * V::kLanes;     // bytes per vector
  constexpr int64_t kI16Steps = kI16 ? kI16Products<Mode> / 8 : std::numeric_limits<int64_t>::max() / 128;
  I acc[TM][R], d[TM][R];  // d: the i16 sums of the current chain (kI16)
  MIXQ_UNROLL
  for (int t = 0; t < TM; ++t)
    MIXQ_UNROLL
    for (int r = 0; r < R; ++r) acc[t][r] = d[t][r] = V::zeroi();
  auto widen = [&]() __attribute__((always_inline)) {
    if constexpr (kI16) {
      MIXQ_UNROLL
      for (int t = 0; t < TM; ++t)
        MIXQ_UNROLL
        for (int r = 0; r < R; ++r) {
          acc[t][r] = V::add_widened(acc[t][r], d[t][r]);
          d[t][r] = V::zeroi();
        }
    }
  };
  const I low = V::set1b(0x0F), flip = V::set1b(static_cast<int8_t>(0x88));
  // One 64-byte step: weight bytes at wr[r], token t's codes at
  // qt + t * qs (int4: its odd codes qo bytes further).
  auto step = [&](const uint8_t* const* wr, const int8_t* qt, int64_t qs, int64_t qo) __attribute__((always_inline)) {
    MIXQ_UNROLL
    for (int h = 0; h < H; ++h)
      MIXQ_UNROLL
      for (int r = 0; r < R; ++r) {
        const I wv = V::loadi(wr[r] + B * h);
        if constexpr (!Int4) {
          const I u = V::abs8(wv);
          MIXQ_UNROLL
          for (int t = 0; t < TM; ++t) acc[t][r] = V::dot4_small(acc[t][r], u, V::sign8(V::loadi(qt + t * qs + B * h), wv));
        } else {
          const I biased = V::xori(wv, flip);
          const I lo = V::andi(biased, low), hi = V::andi(V::template srli16<4>(biased), low);
          MIXQ_UNROLL
          for (int t = 0; t < TM; ++t) {
            const I x_lo = V::loadi(qt + t * qs + B * h), x_hi = V::loadi(qt + t * qs + qo + B * h);
            if constexpr (kI16) {
              d[t][r] = V::dot_step(V::dot_step(d[t][r], lo, x_lo), hi, x_hi);
            } else {
              acc[t][r] = V::dot4_small(acc[t][r], lo, x_lo);
              acc[t][r] = V::dot4_small(acc[t][r], hi, x_hi);
            }
          }
        }
      }
  };
  // The callers' R rows are consecutive rows of the matrix, and the next
  // call takes the R after them: past its row's end, stream r prefetches
  // where it continues, row r + R (never dereferenced, so rows past the
  // matrix are harmless).
  const int64_t next_group = (R - 1) * rb;
  const int64_t odd = Int4 ? rb : 0;  // int4: where a token's odd codes start
  const int64_t whole = rb / 64 * 64;
  int64_t i = 0;
  while (i < whole) {
    const int64_t chain_end = std::min(whole, i + 64 * kI16Steps);
    for (; i < chain_end; i += 64) {
      if constexpr (Stream) {
        constexpr int64_t ahead = R == 1 ? T::kOneStreamPrefetchBytes : T::kStreamPrefetchBytes;
        const int64_t at = i + ahead < rb ? i + ahead : i + ahead + next_group;
        MIXQ_UNROLL
        for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(w[r] + at), T::kStreamPrefetchHint);
      }
      const uint8_t* wr[R];
      MIXQ_UNROLL
      for (int r = 0; r < R; ++r) wr[r] = w[r] + i;
      step(wr, q + i, kp, odd);
    }
    widen();
  }
  if (i < rb) {
    const size_t left = static_cast<size_t>(rb - i);
    alignas(64) uint8_t wpad[R][64] = {};
    alignas(64) int8_t qpad[TM][2][64] = {};  // even (or all) codes, odd codes
    const uint8_t* wr[R];
    for (int r = 0; r < R; ++r) {
      std::memcpy(wpad[r], w[r] + i, left);
      wr[r] = wpad[r];
    }
    for (int t = 0; t < TM; ++t) {
      std::memcpy(qpad[t][0], q + t * kp + i, left);
      if constexpr (Int4) std::memcpy(qpad[t][1], q + t * kp + odd + i, left);
    }
    step(wr, &qpad[0][0][0], 128, 64);
    widen();
  }
  MIXQ_UNROLL
  for (int t = 0; t < TM; ++t)
    MIXQ_UNROLL
    for (int r = 0; r < R; ++r) out[t][r] = V::reduce_add(acc[t][r]);
}

inline uint8_t* aligned64(uint8_t* p) {
  return p + (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64;
}

template <class V, class T = IntTile<V::kLanes>>
class SimdIntKernel final : public IntKernel {
  static constexpr int P = T::kTilePanels;
  static_assert(4 % P == 0, "pack_int_weights rounds the panels to a multiple of 4");

 public:
  SimdIntKernel(const IntLayerDesc& d, std::string_view name)
      : name_(name),
        group_(d.group),
        act_(d.act),
        epilogue_(d.epilogue),
        w_(pack_int_weights(d, V::kLanes == 8)),
        // int4_x16 sums 16·(w+8)·q: |16·15·7| per product, so int32 holds K up to ~1.2 M.
        mode_(!w_.int4                   ? WeightMode::int8
              : d.act != ActQuant::q4row ? WeightMode::int4
              : T::kX16                  ? WeightMode::int4_x16
                                         : WeightMode::int4_a4) {}

  std::string_view name() const override { return name_; }
  int64_t held_bytes() const override { return w_.bytes(); }
  bool reads_weight_in_place() const override { return w_.rows != nullptr; }

  // The int8 values the micro-kernel sees for column `col` (test hook for the
  // in-kernel decode of codes: undoes the +128 of the int8 layout).
  void decoded_column(int64_t col, int8_t* out) const {
    std::vector<uint8_t> buf(static_cast<size_t>(w_.kp * kPanelCols + 64));
    uint8_t* panel = aligned64(buf.data());
    const int64_t pn = col / kPanelCols, c = col % kPanelCols;
    if (w_.codes) decode(pn, panel);
    else if (w_.rows) transpose(pn, panel);
    else std::memcpy(panel, w_.panel(pn), static_cast<size_t>(w_.kp * kPanelCols));  // int8 layout
    for (int64_t k = 0; k < w_.k; ++k)
      out[k] = static_cast<int8_t>(panel[(k / 4) * 64 + 4 * c + k % 4] - 128);
  }

  // Panel `pn` of codes into the int8 panel layout, from either codes layout.
  void decode(int64_t pn, uint8_t* out, int64_t prefetch_bytes = 0) const {
    if constexpr (V::kLanes == 8)
      if (w_.codes_k_blocks) return decode_blocks_panel<V>(w_, pn, out, prefetch_bytes);
    decode_panel<V>(w_, pn, out, prefetch_bytes);
  }

  void transpose(int64_t pn, uint8_t* out) const {
    if (w_.int4) transpose_panel<true>(w_, pn, out);
    else transpose_panel<false>(w_, pn, out);
  }

  void forward(const float* x, int64_t m, float* y) const override {
    if (m <= 0) return;
    if (w_.rows && m <= (w_.int4 ? kGemvRows : T::kInt8InPlaceGemvRows)) forward_rows_small(x, m, y);
    else if (m <= T::kSmallRows) forward_small(x, m, y);
    else if constexpr (T::kAmx) forward_large_amx(x, m, y);
    else forward_large(x, m, y);
  }

 private:
  // How prepare() lays out the quantized tokens:
  //  panels:   activation panels of kMr tokens (int_pack.hpp), for micro();
  //  rows_dot: rows of kp bytes, for rows_dot and the k-block codes kernel:
  //            in k order against int8 rows and codes,
  //            even k then odd k against int4 rows;
  //  tiles:    AMX A tiles: rows of kp rounded up to 64 bytes (`stride`) in
  //            k order, zero past K, the row count rounded up to 32 with zero
  //            rows; each 16 tokens' chunk of 64 k is one 1 KiB piece (16
  //            rows of 64 bytes), chunk i of tokens [16g, 16g + 16) at
  //            16g·stride + 1024·i (amx::ATiles).
  enum class ActLayout { panels, rows_dot, tiles };
  static int64_t tile_stride(int64_t kp) { return (kp + 63) / 64 * 64; }

  // Rotates (when ConvRot) and quantizes `rows` tokens starting at x into blk.
  void prepare(const float* x, int64_t rows, ActBlock& blk, ActLayout layout = ActLayout::panels) const {
    util::PhaseScope phase("rotate + quantize activations");
    const int64_t k = w_.k, kp = w_.kp;
    const bool plain = layout != ActLayout::panels, tiles = layout == ActLayout::tiles;
    const int64_t stride = tiles ? tile_stride(kp) : kp;
    const int64_t slots = tiles ? (rows + 31) / 32 * 32 : (rows + kMr - 1) / kMr * kMr;
    const size_t align = tiles ? 64 : 0;
    blk.q.assign(static_cast<size_t>(slots * stride) + align, 0);
    blk.at = align ? (align - reinterpret_cast<uintptr_t>(blk.q.data()) % align) % align : 0;
    blk.scale.resize(static_cast<size_t>(slots));
    blk.sum.resize(static_cast<size_t>(slots));
    if (group_ > 0) blk.tmp.resize(static_cast<size_t>(k));
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = x + r * k;
      if (group_ > 0) {
        hadamard_row<V>(src, blk.tmp.data(), k, group_);
        src = blk.tmp.data();
      }
      int8_t* q = blk.q.data() + blk.at +
                  (tiles   ? (r / 16) * 16 * stride + (r % 16) * 64
                   : plain ? r * stride
                           : (r / kMr) * kp * kMr);
      quantize_row<V>(src, k, kp, act_, !plain && mode_ == WeightMode::int4_x16, q,
                      plain ? 0 : static_cast<int>(r % kMr), plain ? 1 : kMr, &blk.scale[static_cast<size_t>(r)],
                      &blk.sum[static_cast<size_t>(r)], tiles ? 1024 : 64);
      if (layout == ActLayout::rows_dot && w_.int4) {  // kp == k (a multiple of 8)
        blk.split.resize(static_cast<size_t>(kp));
        for (int64_t i = 0; i < kp / 2; ++i) {
          blk.split[static_cast<size_t>(i)] = q[2 * i];
          blk.split[static_cast<size_t>(kp / 2 + i)] = q[2 * i + 1];
        }
        std::memcpy(q, blk.split.data(), static_cast<size_t>(kp));
      }
    }
  }

  // What the int32 sums handed to the epilogue hold besides Σ w·q:
  // `weight_bias` Σ (w + weight_bias)·q (the panel layouts' bias, which the
  // epilogue removes); `x16` int4_x16's factor 16.
  struct SumForm {
    bool weight_bias;
    bool x16;
  };
  // micro()'s and codes_micro's sums (BiasedInt8: int8 weights keep the bias
  // on VNNI targets only).
  SumForm micro_sums() const {
    return {w_.int4 || BiasedInt8<V>::kSumsBiased, mode_ == WeightMode::int4_x16};
  }

  // Offset removal, scales, bias; stores the valid columns of the P panels.
  void epilogue(const int32_t* acc, int rows, int64_t row0, const ActBlock& blk, int64_t blk_row0,
                const int64_t* panel, float* y, SumForm sums) const {
    using F = typename V::F;
    using I = typename V::I;
    constexpr int L = V::kLanes, H = 16 / L;
    const int64_t n = w_.n;
    const uint32_t bias = sums.weight_bias ? static_cast<uint32_t>(w_.weight_bias) : 0u;
    for (int r = 0; r < rows; ++r) {
      const int64_t br = blk_row0 + r;
      const uint32_t offset = bias * static_cast<uint32_t>(blk.sum[static_cast<size_t>(br)]);
      const I voff = V::set1i(static_cast<int32_t>(offset));
      const F sx = V::set1(blk.scale[static_cast<size_t>(br)]);
      float* yr = y + (row0 + r) * n;
      for (int v = 0; v < P * H; ++v) {
        const int64_t col = panel[v / H] * kPanelCols + (v % H) * L;
        if (col >= n) continue;
        I raw = V::loadi(acc + r * P * 16 + v * L);
        if (sums.x16) raw = V::template srai<4>(raw);  // exact: a multiple of 16
        const F f = V::cvt(V::subi(raw, voff));
        const F sw = V::load(w_.scale.data() + col);
        F out;
        if (epilogue_ == Epilogue::scale_product) out = V::mul(f, V::mul(sx, sw));
        else out = V::mul(V::mul(f, sx), sw);
        if (!w_.bias.empty()) out = V::add(out, V::load(w_.bias.data() + col));
        V::store_first(yr + col, n - col, out);
      }
    }
  }

  // Asks for the output lines of a tile before its micro-kernel runs. Every
  // line of y is written exactly once, so without this each epilogue store
  // misses to DRAM and the store buffer stalls the core (a visible share of
  // the M = 4096 time in bench_linear_int); the micro-kernel takes
  // microseconds, ample time to fetch.
  void prefetch_output(int64_t row, int rows, const int64_t* panel, float* y) const {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < P; ++c) {
        const int64_t col = panel[c] * kPanelCols;
        if (col < w_.n) _mm_prefetch(reinterpret_cast<const char*>(y + (row + r) * w_.n + col), _MM_HINT_ET0);
      }
  }

  // Whether a call of m tokens looks codes up in registers over activation
  // rows (ActLayout::rows_dot): the k-block layout's kernel reads each
  // token's 16 k as one vector.
  bool codes_blocks_rows(int64_t m) const { return w_.codes_k_blocks && m <= T::kCodesInRegistersRows; }

  // codes_micro with the target's lookup (codes_micro_impl.hpp), or the
  // k-block layout's kernel (codes_blocks_impl.hpp) over the rows of blk from
  // token r0.
  void codes_micro_call(const ActBlock& blk, int64_t r0, const int64_t* panel, int rows, int32_t* acc) const {
    if constexpr (V::kLanes == 8)
      if (w_.codes_k_blocks)
        return codes_blocks_micro_rows<V, P>(w_, blk.q.data() + r0 * w_.kp, w_.kp, panel, rows,
                                             T::kCodeBlocksPrefetchBytes, acc);
    const int8_t* a = blk.q.data() + (r0 / kMr) * w_.kp * kMr;
    if constexpr (V::kLanes == 16 && P == 4 && T::kCodesVbmi)
      if (kernels::cpu_has_avx512_vbmi())
        return codes_micro_avx512vbmi(w_, a, panel, rows, T::kStreamPrefetchBytes, acc);
    codes_micro_rows<V, ShuffleLookup<V>, P>(w_, a, panel, rows, T::kStreamPrefetchBytes, acc);
  }

  // Runs P weight panels over every activation panel of blk (rows tokens);
  // `stream` when the panels come from DRAM (small M), else (large M) in K
  // chunks past T::kKChunk k.
  void run_tile(const ActBlock& blk, int64_t rows, int64_t row0, const int64_t* panel, bool stream, float* y) const {
    const bool k_chunks = !stream && w_.kp > T::kKChunk;
    alignas(64) int32_t acc[kMr * P * 16];
    if (stream && rows <= T::kCodesInRegistersRows && codes_in_registers(w_)) {
      util::PhaseScope phase("integer GEMM on 4-bit codes + epilogue");
      for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
        const int mr = static_cast<int>(std::min<int64_t>(kMr, rows - r0));
        prefetch_output(row0 + r0, mr, panel, y);
        codes_micro_call(blk, r0, panel, mr, acc);
        epilogue(acc, mr, row0 + r0, blk, r0, panel, y, micro_sums());
      }
      return;
    }
    const uint8_t* b[P];
    if (w_.codes || w_.rows) {  // decode / transpose the P panels into this thread's int8 tile (L2-sized)
      util::PhaseScope phase(w_.codes ? "decode 4-bit codes" : "transpose in-place rows");
      thread_local std::vector<uint8_t> tile;
      const size_t bytes = static_cast<size_t>(P * w_.kp * kPanelCols);
      if (tile.size() < bytes + 64) tile.resize(bytes + 64);
      uint8_t* base = aligned64(tile.data());
      for (int c = 0; c < P; ++c) {
        b[c] = base + c * w_.kp * kPanelCols;
        if (w_.codes)
          decode(panel[c], base + c * w_.kp * kPanelCols, stream ? T::kStreamPrefetchBytes : 0);
        else transpose(panel[c], base + c * w_.kp * kPanelCols);
      }
      stream = false;
    } else {
      for (int c = 0; c < P; ++c) b[c] = w_.panel(panel[c]);
    }
    util::PhaseScope phase("integer GEMM + epilogue");
    const int64_t kp = w_.kp;
    if (k_chunks) return run_tile_k_chunks(blk, rows, row0, panel, b, y);
    for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
      const int mr = static_cast<int>(std::min<int64_t>(kMr, rows - r0));
      const int8_t* a = blk.q.data() + (r0 / kMr) * kp * kMr;
      prefetch_output(row0 + r0, mr, panel, y);
      micro_for<V, T>(mr, mode_, stream)(a, kp, b, acc, false);
      epilogue(acc, mr, row0 + r0, blk, r0, panel, y, micro_sums());
    }
  }

  // run_tile past T::kKChunk k (large M only): K in chunks of kKChunk, each
  // chunk of the P panels used by every activation panel of the block before
  // the next one, the block's int32 sums kept between chunks; then the
  // epilogue. The same sums, so the same bits.
  void run_tile_k_chunks(const ActBlock& blk, int64_t rows, int64_t row0, const int64_t* panel,
                         const uint8_t* const* b, float* y) const {
    constexpr int64_t kCols = P * 16;
    const int64_t kp = w_.kp, padded = (rows + kMr - 1) / kMr * kMr;
    const int64_t weight_bytes_per_k = w_.int4 ? kPanelCols / 2 : kPanelCols;
    thread_local std::vector<int32_t> sums;
    if (sums.size() < static_cast<size_t>(padded * kCols + 16)) sums.resize(static_cast<size_t>(padded * kCols + 16));
    int32_t* acc = reinterpret_cast<int32_t*>(aligned64(reinterpret_cast<uint8_t*>(sums.data())));
    for (int64_t k0 = 0; k0 < kp; k0 += T::kKChunk) {
      const int64_t len = std::min(T::kKChunk, kp - k0);
      const uint8_t* bk[P];
      for (int c = 0; c < P; ++c) bk[c] = b[c] + k0 * weight_bytes_per_k;
      for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
        const int mr = static_cast<int>(std::min<int64_t>(kMr, rows - r0));
        const int8_t* a = blk.q.data() + (r0 / kMr) * kp * kMr + k0 * kMr;
        micro_for<V, T>(mr, mode_, false)(a, len, bk, acc + r0 * kCols, k0 > 0);
      }
    }
    for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
      const int mr = static_cast<int>(std::min<int64_t>(kMr, rows - r0));
      prefetch_output(row0 + r0, mr, panel, y);
      epilogue(acc + r0 * kCols, mr, row0 + r0, blk, r0, panel, y, micro_sums());
    }
  }

  void forward_small(const float* x, int64_t m, float* y) const {
    thread_local ActBlock blk;
    prepare(x, m, blk, codes_blocks_rows(m) ? ActLayout::rows_dot : ActLayout::panels);
    const ActBlock& shared = blk;
    const int64_t tiles = w_.panels / P;
    util::parallel_for(tiles, 1, [&](int64_t q0, int64_t q1, int) {
      // P streams: register panel c walks panels [P·q0 + c·L, P·q0 + (c+1)·L).
      const int64_t len = q1 - q0;
      for (int64_t t = 0; t < len; ++t) {
        int64_t panel[P];
        for (int c = 0; c < P; ++c) panel[c] = P * q0 + c * len + t;
        run_tile(shared, m, 0, panel, true, y);
      }
    });
  }

  // Small M on in-place rows: each thread takes a contiguous range of tiles
  // (P panels = P·16 output columns) and, per group of at most kMr tokens,
  // runs the tile's rows R at a time (R memory streams) against kRowTokens
  // tokens at a time (rows_dot). R = T::kRowStreams for rows of at least
  // T::kLongRowBytes, else 1, and 1 at M = 1 where T::kOneRowAtOneToken
  // (see IntTile). The sums then go through the panel epilogue (int8 rows'
  // sums without the weight bias, int4 rows' with it: SumForm).
  static constexpr int kRowTokens = V::kLanes == 16 ? 4 : 2;
  template <int TM, int R>
  void rows_tile(const ActBlock& blk, int64_t t0, const int64_t* panel, int32_t* acc) const {
    const int64_t rb = w_.row_bytes, kp = w_.kp;
    for (int c = 0; c < P; ++c)
      for (int r0 = 0; r0 < kPanelCols; r0 += R) {
        const int64_t first = panel[c] * kPanelCols + r0;
        if (first >= w_.n) break;
        const uint8_t* w[R];
        for (int r = 0; r < R; ++r) w[r] = w_.rows + std::min(first + r, w_.n - 1) * rb;  // rows past n: unused
        int32_t sums[TM][R];
        constexpr bool kStream = T::kStreamPrefetchBytes > 0;
        const int8_t* q = blk.q.data() + t0 * kp;
        // Plain rows (never int4_x16's activations times 16).
        if (!w_.int4) rows_dot<V, T, R, TM, WeightMode::int8, kStream>(w, q, kp, rb, sums);
        else if (act_ == ActQuant::q4row) rows_dot<V, T, R, TM, WeightMode::int4_a4, kStream>(w, q, kp, rb, sums);
        else rows_dot<V, T, R, TM, WeightMode::int4, kStream>(w, q, kp, rb, sums);
        for (int t = 0; t < TM; ++t)
          for (int r = 0; r < R; ++r) acc[t * P * 16 + c * kPanelCols + r0 + r] = sums[t][r];
      }
  }

  template <int TM>
  void rows_tile(const ActBlock& blk, int64_t m, int64_t t0, const int64_t* panel, int32_t* acc) const {
    if (w_.row_bytes < T::kLongRowBytes || (T::kOneRowAtOneToken && m == 1)) rows_tile<TM, 1>(blk, t0, panel, acc);
    else rows_tile<TM, T::kRowStreams>(blk, t0, panel, acc);
  }

  void forward_rows_small(const float* x, int64_t m, float* y) const {
    thread_local ActBlock blk;
    prepare(x, m, blk, ActLayout::rows_dot);
    const ActBlock& shared = blk;
    util::parallel_for(w_.panels / P, 1, [&](int64_t q0, int64_t q1, int) {
      util::PhaseScope phase("integer GEMM + epilogue");
      alignas(64) int32_t acc[kMr * P * 16] = {};  // columns past n stay unused
      for (int64_t q = q0; q < q1; ++q) {
        int64_t panel[P];
        for (int c = 0; c < P; ++c) panel[c] = P * q + c;
        for (int64_t g0 = 0; g0 < m; g0 += kMr) {
          const int rows = static_cast<int>(std::min<int64_t>(kMr, m - g0));
          int t = 0;
          for (; t + kRowTokens <= rows; t += kRowTokens)
            rows_tile<kRowTokens>(shared, m, g0 + t, panel, acc + t * P * 16);
          for (; t < rows; ++t) rows_tile<1>(shared, m, g0 + t, panel, acc + t * P * 16);
          // rows_dot: int8 sums lack the weight bias, int4 sums carry it.
          epilogue(acc, rows, g0, shared, g0, panel, y, {w_.int4, false});
        }
      }
    });
  }

  void forward_large(const float* x, int64_t m, float* y) const {
    // Block rows so that the quantized block (past kKChunk k: its K chunk)
    // stays in L2 and the blocks split evenly over the threads.
    const int64_t mc =
        util::balanced_block_rows(m, T::kActBlockBytes / std::min(w_.kp, T::kKChunk), kMr, mixq::num_threads());
    const int64_t nblocks = (m + mc - 1) / mc;
    util::parallel_for(nblocks, 1, [&](int64_t b0, int64_t b1, int) {
      thread_local ActBlock blk;
      for (int64_t bi = b0; bi < b1; ++bi) {
        const int64_t row0 = bi * mc;
        const int64_t rows = std::min(mc, m - row0);
        prepare(x + row0 * w_.k, rows, blk);
        for (int64_t q = 0; q < w_.panels / P; ++q) {
          int64_t panel[P];
          for (int c = 0; c < P; ++c) panel[c] = P * q + c;
          run_tile(blk, rows, row0, panel, false, y);
        }
      }
    });
  }

  // The P panels of a tile in the int8 layout for AMX B tiles, each readable
  // for tile_stride(kp) / 4 steps (bytes past kp are never met by a nonzero
  // code): packed int8 panels are used as they are when kp is a multiple of
  // 64, everything else is unpacked / decoded / transposed (/ copied) into
  // `buf` (P panels of tile_stride(kp) · 16 bytes, 64-byte aligned).
  void tile_panels(const int64_t* panel, uint8_t* buf, const uint8_t** b) const {
    const int64_t kp = w_.kp, bytes = tile_stride(kp) * kPanelCols;
    const bool direct = !w_.codes && !w_.rows && !w_.int4 && kp % 64 == 0;
    std::optional<util::PhaseScope> phase;
    if (!direct) phase.emplace(w_.codes ? "decode 4-bit codes" : w_.rows ? "transpose in-place rows" : "unpack weights");
    for (int c = 0; c < P; ++c) {
      uint8_t* out = buf + c * bytes;
      b[c] = direct ? w_.panel(panel[c]) : out;
      if (direct) continue;
      if (w_.codes) {
        decode(panel[c], out);
      } else if (w_.int4) {  // int4 layout (packed, or rows transposed into `out` first) -> int8 layout
        if (w_.rows) transpose(panel[c], out + bytes / 2);  // the int4 panel is kp · 8 bytes: the upper half holds it
        unpack_nibble_rows<V>(w_.rows ? out + bytes / 2 : w_.panel(panel[c]), w_.kp / 8, out);
      } else if (w_.rows) {
        transpose(panel[c], out);
      } else {
        std::memcpy(out, w_.panel(panel[c]), static_cast<size_t>(kp * kPanelCols));
      }
    }
  }

  // Where tile q's P weight panels come from (packed panels or in-place
  // rows: contiguous either way) and how many bytes, for the L2 prefetch of
  // the tile that follows in forward_large_amx.
  std::pair<const uint8_t*, int64_t> tile_source(int64_t q) const {
    if (!w_.rows) return {w_.panel(P * q), P * w_.panel_bytes};
    const int64_t row0 = P * q * kPanelCols;  // panels past n (padding to 4): no rows
    const int64_t rows = std::clamp<int64_t>(w_.n - row0, 0, P * kPanelCols);
    return {w_.rows + row0 * w_.row_bytes, rows * w_.row_bytes};
  }

  // Large M on AMX tiles (amx_tiles.hpp): blocks of tokens as in
  // forward_large, quantized in the A tile layout (ActLayout::tiles); per
  // tile of P panels, every 32 tokens run a full K against 2 panels at a
  // time (amx::gemm_32x32: 4 C tiles), then the common epilogue. While a
  // tile runs, its blocks ask the next tile's weight bytes into L2 (the
  // first 32 tokens of a tile otherwise wait on L3 for every B tile; the
  // block ran 17-35 % faster with it from L3, BENCHMARKS.md "Third AMX
  // session"). The sums are
  // the exact int32 dots of micro(), so the output is bit-identical.
  void forward_large_amx(const float* x, int64_t m, float* y) const {
    static_assert(P % 2 == 0, "gemm_32x32 takes panels in pairs");
    const int64_t stride = tile_stride(w_.kp), chunks = stride / 64, tiles = w_.panels / P;
    const int64_t mc = util::balanced_block_rows(m, T::kActBlockBytes / stride, 32, mixq::num_threads());
    const int64_t nblocks = (m + mc - 1) / mc;
    util::parallel_for(nblocks, 1, [&](int64_t b0, int64_t b1, int) {
      thread_local ActBlock blk;
      thread_local std::vector<uint8_t> tile;
      const size_t bytes = static_cast<size_t>(P * stride * kPanelCols);
      if (tile.size() < bytes + 64) tile.resize(bytes + 64);
      alignas(64) int32_t acc[32 * P * 16];
      amx::configure();
      for (int64_t bi = b0; bi < b1; ++bi) {
        const int64_t row0 = bi * mc;
        const int64_t rows = std::min(mc, m - row0);
        prepare(x + row0 * w_.k, rows, blk, ActLayout::tiles);
        // The next tile's bytes, spread evenly over this tile's blocks.
        const int64_t calls = (rows + 31) / 32 * (P / 2);
        for (int64_t q = 0; q < tiles; ++q) {
          int64_t panel[P];
          for (int c = 0; c < P; ++c) panel[c] = P * q + c;
          const uint8_t* b[P];
          tile_panels(panel, aligned64(tile.data()), b);
          const auto [next, next_bytes] =
              T::kAmxNextTileToL2 ? tile_source(q + 1 < tiles ? q + 1 : 0) : std::pair<const uint8_t*, int64_t>{};
          util::PhaseScope phase("integer GEMM + epilogue");
          int64_t call = 0;
          for (int64_t r0 = 0; r0 < rows; r0 += 32) {
            const int mr = static_cast<int>(std::min<int64_t>(32, rows - r0));
            prefetch_output(row0 + r0, mr, panel, y);
            const int8_t* a = blk.q.data() + blk.at + r0 * stride;
            for (int c = 0; c < P; c += 2, ++call)
              amx::gemm_32x32(amx::ATiles::tile_layout(a, stride), b[c], b[c + 1], chunks, acc + c * 16, P * 16,
                              amx::L2Ahead::share(next, next_bytes, calls, chunks, call));
            epilogue(acc, mr, row0 + r0, blk, r0, panel, y, {true, false});  // tdpbsud on the u8 layout
          }
        }
      }
      amx::release();
    });
  }

  std::string_view name_;
  int64_t group_;
  ActQuant act_;
  Epilogue epilogue_;
  PackedIntWeights w_;
  WeightMode mode_;
};

}  // namespace
}  // namespace mixq::kernels::x86
