#pragma once
// The integer GEMM's register micro-kernel (int_gemm_impl.hpp): MR tokens of
// one activation panel against P weight panels, int32 sums, per weight mode,
// over a vector type V (simd_traits.hpp) and a tuning T (IntTile).
#include <immintrin.h>

#include <cstdint>

#include "kernels/x86/int_pack.hpp"
#include "kernels/x86/simd_traits.hpp"

namespace mixq::kernels::x86 {
namespace {

// One vector of int8 weights in the int8 panel layout (u8 = w + 128,
// int_pack.hpp) and its exact 4-product dots with activation bytes x in
// [-127, 127] (Q8row and Q4row never produce -128: |x| / (amax / 127)
// rounds to at most 127):
//  VNNI (V::kVnni): `vpdpbusd` on u8 and x: Σ (w + 128)·x, so the sums carry
//    the weight bias, which the epilogue removes (weight_bias·Σx);
//  without VNNI: `vpmaddubsw` on |w| and x·sign(w) (Avx2::abs8 / sign8;
//    pair sums within ±2·128·127, no saturation): Σ w·x, no bias. 4
//    instructions per dot where splitting u8 into nibbles took 9; the int8
//    GEMM ran 1.9x faster on AMD Zen 2 (BENCHMARKS.md, "Issue 14 on AVX2").
template <class V>
struct BiasedInt8 {
  using I = typename V::I;
  static constexpr bool kSumsBiased = V::kVnni;
  I u, s;  // the u8 operand (without VNNI |w|), and w, the sign source
  __attribute__((always_inline)) static BiasedInt8 of(I u8) {
    if constexpr (V::kVnni) return {u8, u8};
    else {
      const I w = V::xori(u8, V::set1b(static_cast<int8_t>(0x80)));
      return {V::abs8(w), w};
    }
  }
  __attribute__((always_inline)) I dot(I acc, I x) const {
    if constexpr (V::kVnni) return V::dot4(acc, u, x);
    else return V::dot4_small(acc, u, V::sign8(x, s));
  }
};

// How the micro-kernel reads the weight panels (int_pack.hpp):
//  int8:     one panel row is the u8 operand as is (BiasedInt8);
//  int4:     low nibbles (v & 0xF) then high nibbles ((v >> 4) & 0xF): 3 ops
//            per 64 weight bytes, against int8 activations;
//  int4_a4:  the same against int4 activations (|q| <= 7);
//  int4_x16: low nibbles (v & 0x0F) against activations stored times 16, high
//            nibbles in place (v & 0xF0 = 16·high) against plain activations:
//            2 ops, and every product carries the factor 16, which the
//            epilogue removes with an exact arithmetic shift. Needs int4
//            activations (16·q must fit int8) and an exact 4-product dot
//            (VNNI).
enum class WeightMode { int8, int4, int4_a4, int4_x16 };

// Without VNNI, int4 weights' `vpmaddubsw` products add up in i16 before one
// `vpmaddwd` widens them (Avx2::dot_step, add_widened). An i16 lane may take
// kI16Products of them: a weight offset 0..15 times an activation is at most
// 15·7 = 105 against int4 activations (256 products: 26880) and 15·127 =
// 1905 against int8 ones (16 products: 30480), both within int16, so the
// int32 sums are exact.
template <WeightMode Mode>
inline constexpr int64_t kI16Products = Mode == WeightMode::int4_a4 ? 256 : 16;
// The micro-kernel gives an i16 lane 4 products per octet (8 k).
template <WeightMode Mode>
inline constexpr int64_t kI16Octets = kI16Products<Mode> / 4;

// acc[r][c] over kp (padded) k for MR tokens of one activation panel and
// the NV = P·16/kLanes column vectors of P weight panels b[0..P-1]; results to
// out[r][P·16] (int32: int8 weights with the bias where BiasedInt8 keeps it,
// int4 weights with theirs), added to what out holds with
// `accumulate` (a later K chunk: int32 sums, so the chunks add exactly).
// objdump (g++ 12): the k loops keep every accumulator in a register (loads,
// broadcasts and dot products only).
template <class V, class T, int MR, WeightMode Mode, bool Stream>
void micro(const int8_t* a, int64_t kp, const uint8_t* const* b, int32_t* out, bool accumulate) {
  using I = typename V::I;
  constexpr int L = V::kLanes, H = 16 / L, P = T::kTilePanels, NV = P * H;
  constexpr int64_t kAhead = T::kStreamPrefetchBytes;
  I c[MR][NV];
  MIXQ_UNROLL
  for (int r = 0; r < MR; ++r)
    MIXQ_UNROLL
    for (int v = 0; v < NV; ++v) c[r][v] = accumulate ? V::loadi_a(out + r * P * 16 + v * L) : V::zeroi();
  const uint8_t* bp[P];
  MIXQ_UNROLL
  for (int p = 0; p < P; ++p) bp[p] = b[p];
  // Column vector v of step `offset` (64 bytes per panel and step).
  auto load = [&](int v, int64_t offset) { return V::loadi_a(bp[v / H] + offset + 4 * L * (v % H)); };
  auto prefetch = [&](int64_t offset) {
    if constexpr (Stream && kAhead > 0) {
      MIXQ_UNROLL
      for (int p = 0; p < P; ++p)
        _mm_prefetch(reinterpret_cast<const char*>(bp[p] + offset + kAhead), T::kStreamPrefetchHint);
    }
  };
  // Every row's 4 activation bytes at ak against the weight vectors w.
  auto rows = [&](const int8_t* ak, const auto* w) __attribute__((always_inline)) {
    MIXQ_UNROLL
    for (int r = 0; r < MR; ++r) {
      const I x = V::bcast4(ak + 4 * r);
      MIXQ_UNROLL
      for (int v = 0; v < NV; ++v) {
        if constexpr (Mode == WeightMode::int8) c[r][v] = w[v].dot(c[r][v], x);
        else c[r][v] = V::dot4_small(c[r][v], w[v], x);
      }
    }
  };
  if constexpr (Mode == WeightMode::int8) {
    for (int64_t kk = 0; kk < kp / 4; ++kk) {
      BiasedInt8<V> w[NV];
      MIXQ_UNROLL
      for (int v = 0; v < NV; ++v) w[v] = BiasedInt8<V>::of(load(v, kk * 64));
      prefetch(kk * 64);
      rows(a + kk * kMr * 4, w);
    }
  } else {
    // Low nibbles, then high ones: int4_x16 keeps them in place (16·high),
    // int4 shifts them down.
    const I low4 = V::set1b(0x0F), high4 = V::set1b(static_cast<int8_t>(0xF0));
    auto high = [&](I v) {
      if constexpr (Mode == WeightMode::int4_x16) return V::andi(v, high4);
      else return V::andi(V::template srli16<4>(v), low4);
    };
    if constexpr (!V::kVnni) {
      // Chains of kI16Octets octets, each summed in i16 and widened once:
      // 2 + 2 / kI16Octets multiplies per 8 k where two dot4_small take 4.
      for (int64_t c0 = 0; c0 < kp / 8; c0 += kI16Octets<Mode>) {
        const int64_t c1 = std::min(kp / 8, c0 + kI16Octets<Mode>);
        I d[MR][NV];
        MIXQ_UNROLL
        for (int r = 0; r < MR; ++r)
          MIXQ_UNROLL
          for (int v = 0; v < NV; ++v) d[r][v] = V::zeroi();
        for (int64_t k8 = c0; k8 < c1; ++k8) {
          prefetch(k8 * 64);
          const int8_t* a_lo = a + 2 * k8 * kMr * 4;
          const int8_t* a_hi = a_lo + kMr * 4;
          MIXQ_UNROLL
          for (int v = 0; v < NV; ++v) {
            const I raw = load(v, k8 * 64);
            const I lo = V::andi(raw, low4), hi = high(raw);
            MIXQ_UNROLL
            for (int r = 0; r < MR; ++r)
              d[r][v] = V::dot_step(V::dot_step(d[r][v], lo, V::bcast4(a_lo + 4 * r)), hi, V::bcast4(a_hi + 4 * r));
          }
        }
        MIXQ_UNROLL
        for (int r = 0; r < MR; ++r)
          MIXQ_UNROLL
          for (int v = 0; v < NV; ++v) c[r][v] = V::add_widened(c[r][v], d[r][v]);
      }
    } else {
      for (int64_t k8 = 0; k8 < kp / 8; ++k8) {
        prefetch(k8 * 64);
        I w[NV];
        MIXQ_UNROLL
        for (int v = 0; v < NV; ++v) w[v] = V::andi(load(v, k8 * 64), low4);
        rows(a + 2 * k8 * kMr * 4, w);
        MIXQ_UNROLL
        for (int v = 0; v < NV; ++v) w[v] = high(load(v, k8 * 64));
        rows(a + (2 * k8 + 1) * kMr * 4, w);
      }
    }
  }
  MIXQ_UNROLL
  for (int r = 0; r < MR; ++r)
    MIXQ_UNROLL
    for (int v = 0; v < NV; ++v) V::storei_a(out + r * P * 16 + v * L, c[r][v]);
}

using MicroFn = void (*)(const int8_t*, int64_t, const uint8_t* const*, int32_t*, bool);

template <class V, class T, WeightMode Mode, bool Stream>
MicroFn micro_for(int rows) {
  switch (rows) {
    case 1: return micro<V, T, 1, Mode, Stream>;
    case 2: return micro<V, T, 2, Mode, Stream>;
    case 3: return micro<V, T, 3, Mode, Stream>;
    case 4: return micro<V, T, 4, Mode, Stream>;
    case 5: return micro<V, T, 5, Mode, Stream>;
    default: return micro<V, T, 6, Mode, Stream>;
  }
}

template <class V, class T, WeightMode Mode>
MicroFn micro_for(int rows, bool stream) {
  if constexpr (T::kStreamPrefetchBytes > 0)
    if (stream) return micro_for<V, T, Mode, true>(rows);
  return micro_for<V, T, Mode, false>(rows);
}

template <class V, class T>
MicroFn micro_for(int rows, WeightMode mode, bool stream) {
  switch (mode) {
    case WeightMode::int8: return micro_for<V, T, WeightMode::int8>(rows, stream);
    case WeightMode::int4: return micro_for<V, T, WeightMode::int4>(rows, stream);
    case WeightMode::int4_a4: return micro_for<V, T, WeightMode::int4_a4>(rows, stream);
    default:
      if constexpr (T::kX16) return micro_for<V, T, WeightMode::int4_x16>(rows, stream);
      else return nullptr;  // never chosen (see the constructor)
  }
}

}  // namespace
}  // namespace mixq::kernels::x86
