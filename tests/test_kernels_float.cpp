// The FP8 / MXFP8 / 16-bit float GEMM cores against the reference kernels on
// random data: the activation preparation (exactly the reference quantizer's
// values), the GEMM within the fp32 summation error, the FMA cores bit for bit
// where products are exact, every code decoded exactly, the panels' stored
// width, and the measured choice between the two avx512 cores. Every shape
// list covers the remainder paths: M in {1,2,3,7,16,24,33,64,257}, N not a
// multiple of 16 and K not a multiple of 32. Every test runs once per x86
// path -- avx512 (`vdpbf16ps`), avx512_fma (the f32-FMA core over the same
// panels) and avx2 -- with kernels::set_isa limiting the process to it; a path
// the CPU lacks is skipped by name. NVFP4 is in test_kernels_nvfp4.cpp, FP8
// read in place in test_kernels_float_in_place.cpp.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/calibrate.hpp"
#include "kernels/cpu.hpp"
#include "kernels/ref/float_ref.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/threads.hpp"
#include "numeric/quantizers.hpp"
#include "support/float_kernel_paths.hpp"

namespace mixq {
namespace {

using namespace testing;  // mixq::testing: the paths, stored weights, expect_bits_equal

// The float GEMM cores have no VNNI variant: avx512 (vdpbf16ps), avx512_fma
// and avx2.
class FloatKernels : public OnPath {};
INSTANTIATE_TEST_SUITE_P(Paths, FloatKernels, ::testing::Values(Path::avx512, Path::avx512_fma, Path::avx2),
                         path_name);

// The activation preparation yields exactly the reference quantizer's values
// (avx512: bf16 pairs, as rows and in the AMX A tile layout; avx512_fma /
// avx2: f32 values, `none` = x with zero padding, `round` (avx512_fma) = the
// bf16 value of x). 17 rows in the tile layout cross a 16-token group: a store
// past a token's 64-byte chunk would land in another token's (or the next
// chunk's) row.
TEST_P(FloatKernels, ActivationPreparationMatchesReferenceQuantizers) {
  for (int64_t k : {1, 31, 64, 70})
    for (const bool tiles : {false, true}) {
      if (tiles && !avx512()) continue;
      const int64_t m = tiles ? 17 : 5;
      std::vector<float> x = random_floats(static_cast<size_t>(m * k), 40 + k, 30.0f);
      x[0] = 1e6f;      // saturates
      if (k > 2) x[1] = 1e-9f;  // FP8 subnormal / underflow
      const int64_t steps = (k + 31) / 32 * 16, cols = 2 * steps;
      std::vector<uint32_t> pairs(static_cast<size_t>((m + 15) / 16 * 16 * steps));
      std::vector<float> f32(static_cast<size_t>(m * cols));
      auto prepare = [&](x86::ActPrep prep, float inv) {
        if (avx512()) x86::prepare_bf16_avx512(x.data(), m, k, steps, prep, inv, pairs.data(), tiles);
        else prepare_f32(x.data(), m, k, cols, prep, inv, f32.data());
      };
      auto value = [&](int64_t r, int64_t c) {
        if (!avx512()) return f32[r * cols + c];
        // Tile layout: pair c / 2 of row r in its 16-token group's chunk (16 pairs = 64 bytes each).
        const int64_t at = tiles ? (r / 16) * 16 * steps + (c / 32) * 256 + (r % 16) * 16 + (c / 2) % 16 : r * steps + c / 2;
        const uint32_t word = pairs[at];
        return bf16_to_f32(static_cast<uint16_t>(c % 2 == 0 ? word & 0xFFFF : word >> 16));
      };
      for (DType dt : {DType::F8_E4M3, DType::F8_E5M2}) {
        const float scale = 0.37f;
        std::vector<uint8_t> q(x.size());
        quant::quantize_fp8(x.data(), m * k, scale, dt, q.data());
        prepare(dt == DType::F8_E4M3 ? x86::ActPrep::e4m3 : x86::ActPrep::e5m2, 1.0f / scale);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            const float want = c < k ? (dt == DType::F8_E4M3 ? e4m3_to_f32(q[r * k + c]) : e5m2_to_f32(q[r * k + c])) : 0.0f;
            ASSERT_EQ(value(r, c), want) << dtype_name(dt) << " k=" << k << " (" << r << ", " << c << ")";
          }
      }
      const quant::Mxfp8Blocks mx = quant::quantize_mxfp8(x.data(), m, k);
      prepare(x86::ActPrep::mxfp8, 1.0f);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const float want = e4m3_to_f32(mx.codes[r * mx.cols + c]) * e8m0_to_f32(mx.exponents[r * (mx.cols / 32) + c / 32]);
          ASSERT_EQ(value(r, c), want) << "mxfp8 k=" << k << " (" << r << ", " << c << ")";
        }
      // Full precision: avx512 (both cores) rounds x to bf16 (RNE), avx2 keeps
      // it; `none` keeps x on the f32 paths.
      for (x86::ActPrep prep : {x86::ActPrep::round, x86::ActPrep::none}) {
        if (GetParam() == Path::avx2 && prep == x86::ActPrep::round) continue;  // refused: f32 only
        if (avx512() && prep == x86::ActPrep::none) continue;                  // the bf16 store rounds anyway
        prepare(prep, 1.0f);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            const float v = c < k ? x[r * k + c] : 0.0f;
            ASSERT_EQ(value(r, c), prep == x86::ActPrep::round ? round_to(DType::BF16, v) : v)
                << "k=" << k << " (" << r << ", " << c << ")";
          }
      }
    }
}

// MXFP8 block exponents over the whole f32 range, against the reference
// quantizer (frexp / ldexp / division; the kernels take the exponent from
// the bits and multiply by 2^(127-e)): one 32-block per magnitude 2^j, j =
// -160 .. 130 (subnormal and underflowing blocks, e = 0, up to blocks that
// overflow to infinity, e = 254), blocks whose max|x| / 448 is exactly a
// power of two (ceil(log2) at its tie) or one ulp above it, a NaN among
// finite values, a block of zeros and one of the subnormal 2^-149.
TEST_P(FloatKernels, Mxfp8BlockExponentsMatchTheReferenceAtEveryMagnitude) {
  std::vector<float> x;
  const std::vector<float> unit = random_floats(32, 77, 1.0f);
  for (int j = -160; j <= 130; ++j)
    for (float u : unit) x.push_back(std::ldexp(u, j));
  // Each with a value in E4M3's subnormal range, whose code shows an
  // exponent one off (the largest value's code alone may not: 448·2^(e-127)
  // and 224·2^(e-126) are the same number).
  for (int j = -140; j <= 120; j += 13) {
    for (float u : unit) x.push_back(std::ldexp(u, j));
    x.back() = std::ldexp(448.0f, j);  // max|x| / 448 = 2^j exactly
    x[x.size() - 2] = std::ldexp(0.01f, j);
    for (float u : unit) x.push_back(std::ldexp(u, j));
    x.back() = std::nextafter(std::ldexp(448.0f, j), INFINITY);  // max|x| / 448 one ulp above 2^j
    x[x.size() - 2] = std::ldexp(0.01f, j);
  }
  for (float u : unit) x.push_back(u);
  x.back() = std::nanf("");
  x.insert(x.end(), 32, 0.0f);
  x.insert(x.end(), 32, 0x1p-149f);
  const int64_t k = static_cast<int64_t>(x.size()), cols = k, steps = k / 2;
  const quant::Mxfp8Blocks mx = quant::quantize_mxfp8(x.data(), 1, k);
  std::vector<uint32_t> pairs(static_cast<size_t>(steps));
  std::vector<float> f32(static_cast<size_t>(cols));
  if (avx512()) x86::prepare_bf16_avx512(x.data(), 1, k, steps, x86::ActPrep::mxfp8, 1.0f, pairs.data(), false);
  else prepare_f32(x.data(), 1, k, cols, x86::ActPrep::mxfp8, 1.0f, f32.data());
  for (int64_t c = 0; c < k; ++c) {
    const uint32_t pair = pairs[c / 2];
    const float got = avx512() ? bf16_to_f32(static_cast<uint16_t>(c % 2 == 0 ? pair & 0xFFFF : pair >> 16)) : f32[c];
    const float want = e4m3_to_f32(mx.codes[c]) * e8m0_to_f32(mx.exponents[c / 32]);
    if (std::isnan(want)) ASSERT_TRUE(std::isnan(got)) << "column " << c;
    else ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << "column " << c << " block e "
                                                                                 << int(mx.exponents[c / 32]);
  }
}

// Error bound of an fp32 sum of n terms in any order: n·2^-24·Σ|term| (plus
// the final alpha/bias roundings). The weights are exact in every panel type
// (decoded in registers), and avx512's bf16 core gets bf16 activations, so
// the summation order is the only difference from the reference. The bf16
// core takes the FP8 kinds, the FMA cores every type.
TEST_P(FloatKernels, GemmMatchesReferenceWithinSummationError) {
  struct Shape { int64_t n, k; };
  using T = x86::PanelType;
  const std::vector<T> types = avx512() ? std::vector<T>{T::e4m3, T::e5m2, T::mxfp8}
                                        : std::vector<T>{T::f32, T::bf16, T::f16, T::e4m3, T::e5m2, T::mxfp8};
  for (T type : types) {
    for (Shape s : {Shape{16, 64}, Shape{37, 70}, Shape{50, 3}, Shape{49, 600}, Shape{100, 17}}) {
      const StoredWeight sw = stored_weight(type, s.n, s.k, 9 + s.k);
      const int64_t k = sw.k;  // mxfp8: padded to 32
      const x86::FloatPanels panels = sw.pack();
      const std::vector<float> bias = random_floats(static_cast<size_t>(s.n), 3, 0.5f);
      for (int64_t m : kRows) {
        std::vector<float> x = random_floats(static_cast<size_t>(m * k), 77 + m, 1.0f);
        if (avx512())
          for (float& v : x) v = round_to(DType::BF16, v);
        const float alpha = 0.75f;
        std::vector<float> want(static_cast<size_t>(m * s.n)), got(want.size());
        kernels::ref::linear_f32(x.data(), m, k, sw.value.data(), s.n, nullptr, want.data());
        if (avx512()) {
          std::vector<uint32_t> a(static_cast<size_t>(m * panels.pair_steps()));
          x86::prepare_bf16_avx512(x.data(), m, k, panels.pair_steps(), x86::ActPrep::round, 1.0f, a.data());
          x86::float_gemm_avx512_bf16(a.data(), m, panels, alpha, bias.data(), got.data());
        } else {
          gemm_f32(x.data(), k, m, panels, alpha, bias.data(), got.data());
        }
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < s.n; ++c) {
            double mag = 0;
            for (int64_t i = 0; i < k; ++i) mag += std::fabs(double(x[r * k + i]) * sw.value[c * k + i]);
            const double expect = double(want[r * s.n + c]) * alpha + bias[c];
            const double tol = (2.0 * k + 4) * 0x1p-24 * (mag * alpha + std::fabs(bias[c])) + 1e-30;
            ASSERT_NEAR(got[r * s.n + c], expect, tol) << type_name(type) << " m=" << m << " n=" << s.n << " k=" << k;
          }
      }
    }
  }
}

// The bf16 core decodes each K chunk of panels to bf16 pairs once per row
// chunk from kDotDecodedRows (17) rows on, and in registers per tile below:
// every output's sum is the same either way, so the rows of one call equal
// the same rows run a few at a time, bit for bit. K = 4200 spans two K
// chunks of 2048 pairs and M = 1100 two row chunks of 1024 (float_tile.hpp).
TEST_P(FloatKernels, DotCoreDecodedChunksEqualTheRegisterPath) {
  if (!avx512()) GTEST_SKIP() << "the vdpbf16ps core only";
  using T = x86::PanelType;
  for (T type : {T::e4m3, T::e5m2, T::mxfp8}) {
    const StoredWeight sw = stored_weight(type, 37, 4200, 21);  // N remainder
    const int64_t k = sw.k;
    const x86::FloatPanels panels = sw.pack();
    const std::vector<float> bias = random_floats(37, 4, 0.5f);
    for (int64_t m : {17, 24, 33, 257, 1100}) {
      const std::vector<float> x = random_floats(static_cast<size_t>(m * k), 91 + m, 1.0f);
      const int64_t pairs = panels.pair_steps();
      std::vector<uint32_t> a(static_cast<size_t>(m * pairs));
      x86::prepare_bf16_avx512(x.data(), m, k, pairs, x86::ActPrep::round, 1.0f, a.data());
      std::vector<float> whole(static_cast<size_t>(m * 37)), few(whole.size());
      x86::float_gemm_avx512_bf16(a.data(), m, panels, 0.75f, bias.data(), whole.data());
      for (int64_t r = 0; r < m; r += 5)  // 5 rows: under kDotDecodedRows
        x86::float_gemm_avx512_bf16(a.data() + r * pairs, std::min<int64_t>(5, m - r), panels, 0.75f,
                                    bias.data(), few.data() + r * 37);
      expect_bits_equal(whole, few, (std::string(type_name(type)) + " m=" + std::to_string(m)).c_str());
    }
  }
}

// The bf16 core reads an odd K's last pair from the zero row after the
// codes: packed panels store it, and read in place each K chunk's packing
// writes it. Run in place right after a weight of E5M2 inf codes (whose K
// chunks leave inf in the per-thread pack buffers, and inf·0 is NaN), the
// GEMM gives the packed panels' bits, in registers and decoded per chunk.
TEST_P(FloatKernels, DotCoreReadsAnOddKInPlaceAsPacked) {
  if (!avx512()) GTEST_SKIP() << "the vdpbf16ps core only";
  using T = x86::PanelType;
  const int64_t n = 37;
  for (int64_t k : {63, 1101}) {
    std::vector<uint8_t> inf(static_cast<size_t>(n * (k + 1)), 0x7C), codes(static_cast<size_t>(n * k));
    std::mt19937 rng(static_cast<uint32_t>(k));
    for (uint8_t& c : codes) {
      c = static_cast<uint8_t>(rng());
      if ((c & 0x7C) == 0x7C) c &= 0xBF;  // inf / NaN: exponent 15 instead of 31
    }
    const x86::FloatPanels poison = x86::float_panels_in_place(T::e5m2, inf.data(), k + 1, n, k + 1);
    const x86::FloatPanels in_place = x86::float_panels_in_place(T::e5m2, codes.data(), k, n, k);
    const x86::FloatPanels packed = x86::pack_panels(T::e5m2, codes.data(), k, n, k);
    const int64_t pairs = packed.pair_steps();
    ASSERT_EQ(poison.pair_steps(), pairs);
    for (int64_t m : {1, 8, 30}) {
      const std::vector<float> x = random_floats(static_cast<size_t>(m * k), 13 + m, 1.0f);
      std::vector<uint32_t> a(static_cast<size_t>(m * pairs));
      x86::prepare_bf16_avx512(x.data(), m, k, pairs, x86::ActPrep::round, 1.0f, a.data());
      std::vector<float> want(static_cast<size_t>(m * n)), got(want.size());
      x86::float_gemm_avx512_bf16(a.data(), m, poison, 1.0f, nullptr, got.data());
      x86::float_gemm_avx512_bf16(a.data(), m, in_place, 1.0f, nullptr, got.data());
      x86::float_gemm_avx512_bf16(a.data(), m, packed, 1.0f, nullptr, want.data());
      for (float v : want) ASSERT_TRUE(std::isfinite(v));
      expect_bits_equal(want, got, ("k=" + std::to_string(k) + " m=" + std::to_string(m)).c_str());
    }
  }
}

// Read in place with more rows than one row chunk, each thread packs its
// panels in groups of at most 8 MiB per K chunk (kInPlaceGroupBytes), in
// whole 3-panel tiles: on one thread, 132 panels of 2048-pair K chunks (64
// KiB each) make a group of 126 and one of 6. Whatever the grouping, every
// output sums in k order, so the
// GEMM gives the packed panels' bits, and a NaN code in the second group's
// panels still makes its column NaN.
TEST_P(FloatKernels, DotCoreInPlaceGroupsEqualPacked) {
  if (!avx512()) GTEST_SKIP() << "the vdpbf16ps core only";
  using T = x86::PanelType;
  const int64_t n = 2100, k = 4200, m = 1100;
  StoredWeight sw = stored_weight(T::e4m3, n, k, 77);
  const int64_t nan_column = 2060;  // panel 128: the second group
  sw.bytes[static_cast<size_t>(nan_column * k + 3000)] = 0x7F;
  const x86::FloatPanels packed = sw.pack();
  const x86::FloatPanels in_place = x86::float_panels_in_place(T::e4m3, sw.bytes.data(), k, n, k);
  const int64_t pairs = packed.pair_steps();
  const std::vector<float> x = random_floats(static_cast<size_t>(m * k), 5, 1.0f);
  std::vector<uint32_t> a(static_cast<size_t>(m * pairs));
  x86::prepare_bf16_avx512(x.data(), m, k, pairs, x86::ActPrep::round, 1.0f, a.data());
  std::vector<float> want(static_cast<size_t>(m * n)), got(want.size());
  const int threads = num_threads();
  set_num_threads(1);
  x86::float_gemm_avx512_bf16(a.data(), m, packed, 1.0f, nullptr, want.data());
  x86::float_gemm_avx512_bf16(a.data(), m, in_place, 1.0f, nullptr, got.data());
  set_num_threads(threads);
  for (int64_t r = 0; r < m; r += 97) ASSERT_TRUE(std::isnan(got[static_cast<size_t>(r * n + nan_column)]));
  expect_bits_equal(want, got, "in place, 1100 rows");
}

// The FMA cores (avx2, avx512_fma) are the reference's FMA chain in k order.
// With products exact in f32 -- FP8 activations against FP8 weights, or bf16
// x against bf16 weights -- that is the reference's `acc += a·w` bit for bit:
// zero tolerance, whatever the panel type decodes from. Shapes cross the K
// chunk (600 > 2·256 on AVX-512, 1031 > 1024 on AVX2), odd K, N and M
// remainders.
TEST_P(FloatKernels, FmaGemmIsBitExactForExactProducts) {
  if (!f32_acts()) GTEST_SKIP() << "avx512 sums bf16 pairs (vdpbf16ps); covered by the bound above";
  struct Shape { int64_t n, k; };
  using T = x86::PanelType;
  for (Shape s : {Shape{37, 600}, Shape{50, 3}, Shape{100, 17}, Shape{16, 64}, Shape{49, 1031}}) {
    for (T type : {T::e4m3, T::e5m2, T::bf16, T::mxfp8}) {
      const StoredWeight sw = stored_weight(type, s.n, s.k, 5 + s.k);
      const int64_t k = sw.k;
      const x86::FloatPanels panels = sw.pack();
      const std::vector<float> bias = random_floats(static_cast<size_t>(s.n), 8, 0.5f);
      const x86::ActPrep prep = type == T::e4m3   ? x86::ActPrep::e4m3
                                : type == T::e5m2 ? x86::ActPrep::e5m2
                                : type == T::mxfp8 ? x86::ActPrep::mxfp8
                                                   : x86::ActPrep::none;
      for (int64_t m : kRows) {
        std::vector<float> x = random_floats(static_cast<size_t>(m * k), 6 + m, 3.0f);
        if (type == T::bf16)
          for (float& v : x) v = round_to(DType::BF16, v);
        std::vector<float> a(static_cast<size_t>(m * k)), want(static_cast<size_t>(m * s.n)), got(want.size());
        prepare_f32(x.data(), m, k, k, prep, 1.0f, a.data());
        const float* b = type == T::e5m2 ? bias.data() : nullptr;
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < s.n; ++c) {
            float acc = 0.0f;
            for (int64_t i = 0; i < k; ++i) acc += a[r * k + i] * sw.value[c * k + i];
            const float out = acc * 0.5f;
            want[r * s.n + c] = b ? out + b[c] : out;
          }
        gemm_f32(a.data(), k, m, panels, 0.5f, b, got.data());
        SCOPED_TRACE(::testing::Message() << type_name(type) << " n=" << s.n << " k=" << k << " m=" << m);
        expect_bits_equal(want, got, "fma core");
      }
    }
  }
}

// Under 6 rows the AVX2 core runs FP8 with the activations times 2^112 and
// the codes widened to value·2^-120 (E4M3) or value·2^-112 (E5M2) by
// integer operations (FloatIo::fp8_by_exponent), where every finite |x| <
// 2^16; else, and where this thread reads denormals as zero (next test),
// the f16 widening. Both are the FMA chain in k order bit for bit (std::fma,
// then alpha and bias): a row whose largest |x| is just under 2^16 (61440,
// scaled), one with 2^16 and one with -2^17 (not scaled), and an infinite or
// NaN x (scaled: inf·2^112 is inf), on packed panels and read in place,
// random codes (subnormals among them), a K tail and a partial panel. E5M2
// also with inf and NaN codes, which the decode by exponent makes finite
// (their panels run again on the f16 widening): +inf in one column (±inf
// out), +inf and -inf in another, inf where x is 0 in a third (NaN), a NaN
// code in the partial panel.
TEST_P(FloatKernels, ScaledActivationsKeepTheBits) {
  if (!f32_acts()) GTEST_SKIP() << "avx512 sums bf16 pairs (vdpbf16ps)";
  using T = x86::PanelType;
  const int64_t n = 37, k = 70;
  const std::vector<float> bias = random_floats(static_cast<size_t>(n), 92, 0.5f);
  const float inf = std::numeric_limits<float>::infinity();
  for (T type : {T::e4m3, T::e5m2})
    for (bool nonfinite : {false, true}) {
      if (nonfinite && type != T::e5m2) continue;
      StoredWeight sw = stored_weight(type, n, k, 91);
      if (nonfinite) {
        struct Code { int64_t column, at; uint8_t code; };
        for (const Code& c : {Code{3, 10, 0x7C}, Code{20, 0, 0xFC}, Code{20, 1, 0x7C}, Code{33, 7, 0x7C},
                              Code{36, 69, 0x7E}}) {
          sw.bytes[static_cast<size_t>(c.column * k + c.at)] = c.code;
          sw.value[static_cast<size_t>(c.column * k + c.at)] = e5m2_to_f32(c.code);
        }
      }
      for (bool in_place : {false, true}) {
        const x86::FloatPanels panels = in_place ? x86::float_panels_in_place(type, sw.bytes.data(), sw.row_bytes, n, k)
                                                 : sw.pack();
        for (int64_t m = 1; m <= 5; ++m) {
          for (float big : {61440.0f, 65536.0f, -131072.0f, inf, std::nanf("")}) {
            std::vector<float> x = random_floats(static_cast<size_t>(m * k), 93 + m, 4.0f);
            x[static_cast<size_t>((m - 1) * k + 5)] = big;  // the last row's k = 5
            x[7] = 0.0f;                                    // the first row's k = 7
            std::vector<float> want(static_cast<size_t>(m * n)), got(want.size());
            for (int64_t r = 0; r < m; ++r)
              for (int64_t c = 0; c < n; ++c) {
                float acc = 0.0f;
                for (int64_t i = 0; i < k; ++i) acc = std::fma(x[r * k + i], sw.value[c * k + i], acc);
                want[r * n + c] = acc * 0.5f + bias[c];
              }
            gemm_f32(x.data(), k, m, panels, 0.5f, bias.data(), got.data());
            SCOPED_TRACE(::testing::Message() << type_name(type) << (nonfinite ? " with inf / NaN codes" : "")
                                              << " m=" << m << " x=" << big << " in place " << in_place);
            for (size_t i = 0; i < want.size(); ++i) {
              if (std::isnan(want[i])) {
                ASSERT_TRUE(std::isnan(got[i])) << "output " << i;
              } else {
                ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
                    << "output " << i << ": want " << want[i] << ", got " << got[i];
              }
            }
            if (nonfinite && std::isfinite(big)) {  // what the codes make of the first row
              EXPECT_TRUE(std::isinf(got[3])) << got[3];
              EXPECT_TRUE(std::isnan(got[33]) && std::isnan(got[36])) << got[33] << " " << got[36];
            }
          }
        }
      }
    }
}

// Under 6 rows the AVX2 core runs MXFP8 as E4M3 above, and keeps each sum
// divided by its column's current block scale (one multiply per 32 k
// instead of one per weight), where the layer's scale bytes and the
// call's |x| keep every partial sum normal and finite in both forms
// (mxfp8_sums_rescale in float_scaled_x.hpp); else the f16 widening with
// the scale multiplied into each weight. Either way a row's bits are those
// it gets among 7 rows (the f16 widening, as every larger M), and where
// the rescaled form applies, the FMA chain in k order on the reference's
// weights (std::fma). Random codes (subnormals among them), scale bytes
// random per column and block, |x| in [2^-16, 2^8]; K = 1088 crosses the
// in-place K chunk (1024 steps: sums stored in y between chunks), N = 37 a
// partial panel; alpha 2 and no bias (a bias would hide the subnormal
// sums' bits). Cases: scales in [110, 140] (rescaled), in [60, 200] (too
// far apart: not), a zero scale in one block (not), scales in [1, 4] and
// the first row's x times 2^-12 (not: the f16 widening's sums of it are
// subnormal), the first row's x times 2^6 with scales up to 220
// (rescaled: the sums stay under 2^127 either way),
// scales up to 2^127 with every x under 2^-16 (not: the inverse of 2^127,
// which a first block's sums start from, is subnormal). The four that are
// not rescaled give other bits if they were.
TEST_P(FloatKernels, Mxfp8RescaledSumsKeepTheBits) {
  if (!f32_acts()) GTEST_SKIP() << "avx512 sums bf16 pairs (vdpbf16ps)";
  using T = x86::PanelType;
  const int64_t n = 37, k = 1088, blocks = k / 32, batch = 7;
  struct Case { const char* name; int lo, hi; bool zero_block; float first_row_times, x_times; bool rescaled; };
  for (const Case& cs : {Case{"band", 110, 140, false, 1.0f, 1.0f, true},
                         Case{"wide", 60, 200, false, 1.0f, 1.0f, false},
                         Case{"zero block", 110, 140, true, 1.0f, 1.0f, false},
                         Case{"tiny scales", 1, 4, false, 0x1p-12f, 1.0f, false},
                         Case{"large row", 180, 220, false, 0x1p6f, 1.0f, true},
                         Case{"top scale", 208, 254, false, 1.0f, 0x1p-24f, false}}) {
    std::mt19937 rng(static_cast<uint32_t>(cs.lo * 7 + cs.hi));
    std::vector<uint8_t> codes(static_cast<size_t>(n * k)), scales(static_cast<size_t>(n * blocks));
    for (uint8_t& c : codes) {
      c = static_cast<uint8_t>(rng());
      if ((c & 0x7F) == 0x7F) c ^= 0x01;  // no NaN codes
    }
    for (uint8_t& e : scales) e = static_cast<uint8_t>(cs.lo + static_cast<int>(rng() % (cs.hi - cs.lo + 1)));
    if (cs.zero_block) scales[static_cast<size_t>(5 * blocks + 20)] = 0;
    std::vector<float> w(codes.size());
    for (int64_t c = 0; c < n; ++c)
      for (int64_t i = 0; i < k; ++i)
        w[c * k + i] = e4m3_to_f32(codes[c * k + i]) * e8m0_to_f32(scales[c * blocks + i / 32]);
    std::vector<float> x(static_cast<size_t>(batch * k));
    for (float& v : x) {
      const float mag = std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024.0f, static_cast<int>(rng() % 24) - 16);
      v = rng() % 2 ? mag : -mag;
    }
    for (float& v : x) v *= cs.x_times;
    for (int64_t i = 0; i < k; ++i) x[static_cast<size_t>(i)] *= cs.first_row_times;
    std::vector<float> chain(static_cast<size_t>(5 * n));  // rows 0-4: the std::fma chain, alpha 2
    for (int64_t r = 0; r < 5; ++r)
      for (int64_t c = 0; c < n; ++c) {
        float acc = 0.0f;
        for (int64_t i = 0; i < k; ++i) acc = std::fma(x[r * k + i], w[c * k + i], acc);
        chain[r * n + c] = acc * 2.0f;
      }
    for (bool in_place : {false, true}) {
      const x86::FloatPanels panels = in_place
                                          ? x86::float_panels_in_place(T::mxfp8, codes.data(), k, n, k, scales.data())
                                          : x86::pack_panels(T::mxfp8, codes.data(), k, n, k, scales.data());
      std::vector<float> many(static_cast<size_t>(batch * n));
      gemm_f32(x.data(), k, batch, panels, 2.0f, nullptr, many.data());
      for (int64_t m = 1; m <= 5; ++m) {
        SCOPED_TRACE(::testing::Message() << cs.name << " m=" << m << " in place " << in_place);
        std::vector<float> got(static_cast<size_t>(m * n));
        gemm_f32(x.data(), k, m, panels, 2.0f, nullptr, got.data());
        expect_bits_equal(std::vector<float>(many.begin(), many.begin() + m * n), got, "rows among 7");
        if (cs.rescaled) expect_bits_equal(std::vector<float>(chain.begin(), chain.begin() + m * n), got, "the FMA chain");
      }
    }
  }
}

// With the denormals-are-zero flag set in MXCSR (as torch.set_flush_denormal
// does), FP8's subnormal codes still decode exactly: the value·2^-120
// (E4M3) or value·2^-112 (E5M2) that the scaled-x path makes of them is an
// f32 subnormal, which DAZ would read as zero, so a thread with DAZ set
// takes the f16 widening. One thread, so that the test's thread (the one
// with DAZ) runs every panel; every code at k = 0 with x = 1 (MXFP8: the
// rest of the block zero, scale 1).
TEST_P(FloatKernels, SubnormalCodesSurviveDenormalsAreZero) {
  if (!f32_acts()) GTEST_SKIP() << "the FMA cores";
  for (x86::PanelType type : {x86::PanelType::e4m3, x86::PanelType::e5m2, x86::PanelType::mxfp8}) {
    const int64_t n = 256, k = type == x86::PanelType::mxfp8 ? 32 : 1;
    std::vector<uint8_t> codes(static_cast<size_t>(n * k), 0), scales(static_cast<size_t>(n), 127);
    for (int64_t c = 0; c < n; ++c) codes[c * k] = static_cast<uint8_t>(c);
    const x86::FloatPanels panels = x86::pack_panels(type, codes.data(), k, n, k, k == 32 ? scales.data() : nullptr);
    const int threads = num_threads();
    set_num_threads(1);
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x0040u);  // DAZ
    std::vector<float> x(static_cast<size_t>(k), 0.0f), got(static_cast<size_t>(n));
    x[0] = 1.0f;
    gemm_f32(x.data(), k, 1, panels, 1.0f, nullptr, got.data());
    _mm_setcsr(csr);
    set_num_threads(threads);
    for (int64_t c = 0; c < n; ++c) {
      const uint8_t code = static_cast<uint8_t>(c);
      const float want = type == x86::PanelType::e5m2 ? e5m2_to_f32(code) : e4m3_to_f32(code);
      if (std::isnan(want)) continue;  // the NaN columns: DecodedWeightsAreExactForEveryCode
      ASSERT_EQ(std::bit_cast<uint32_t>(got[c]), std::bit_cast<uint32_t>(0.0f + want))
          << type_name(type) << " code " << c;
    }
  }
}

// In-kernel decoding is exact for every code: 256 columns, column c holding
// code c at k = 0 (for mxfp8 with the block exponents below, the rest of the
// 32-block zero), times x = 1 at k = 0: y[c] = 0 + 1·decode(c), which is the
// reference decoder's value (-0 becomes +0 in any sum, NaN codes give NaN,
// E5M2 inf codes inf). Also checks alpha and the NaN-column fix on both cores,
// packed and read in place (NaN codes found while the GEMM packs).
TEST_P(FloatKernels, DecodedWeightsAreExactForEveryCode) {
  using T = x86::PanelType;
  for (T type : {T::e4m3, T::e5m2, T::mxfp8}) {
    // Block exponents: 0 (scale 0), 1 (subnormal weights), 120, 127, 200.
    // Not 254 / 255: weights of 2^127·448 overflow, and the reference's
    // 0·inf = NaN poisons the whole block. vcvtne2ps2bf16 flushes subnormals,
    // so the bf16 core skips e = 1.
    for (uint8_t e : {uint8_t{127}, uint8_t{0}, uint8_t{1}, uint8_t{120}, uint8_t{200}}) {
      if (type != T::mxfp8 && e != 127) continue;
      if (avx512() && e == 1) continue;
      const int64_t n = 256, k = type == T::mxfp8 ? 32 : 1;
      std::vector<uint8_t> codes(static_cast<size_t>(n * k), 0), scales(static_cast<size_t>(n), e);
      for (int64_t c = 0; c < n; ++c) codes[c * k] = static_cast<uint8_t>(c);
      for (bool in_place : {false, true}) {
      const uint8_t* block_scales = type == T::mxfp8 ? scales.data() : nullptr;
      const x86::FloatPanels panels = in_place
                                          ? x86::float_panels_in_place(type, codes.data(), k, n, k, block_scales)
                                          : x86::pack_panels(type, codes.data(), k, n, k, block_scales);
      std::vector<float> x(static_cast<size_t>(k), 0.0f), got(static_cast<size_t>(n), -1.0f);
      x[0] = 1.0f;
      for (float alpha : {1.0f, 0.5f}) {
        if (avx512()) {
          std::vector<uint32_t> a(static_cast<size_t>(panels.pair_steps()));
          x86::prepare_bf16_avx512(x.data(), 1, k, panels.pair_steps(), x86::ActPrep::none, 1.0f, a.data());
          x86::float_gemm_avx512_bf16(a.data(), 1, panels, alpha, nullptr, got.data());
        } else {
          gemm_f32(x.data(), k, 1, panels, alpha, nullptr, got.data());
        }
        for (int64_t c = 0; c < n; ++c) {
          const uint8_t code = static_cast<uint8_t>(c);
          float w = type == T::e5m2 ? e5m2_to_f32(code) : e4m3_to_f32(code);
          if (type == T::mxfp8) w *= e8m0_to_f32(e);
          const float want = (0.0f + 1.0f * w) * alpha;
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got[c])) << type_name(type) << " code " << c << " e " << int(e) << " in place "
                                            << in_place;
          } else {
            ASSERT_EQ(std::bit_cast<uint32_t>(got[c]), std::bit_cast<uint32_t>(want))
                << type_name(type) << " code " << c << " e " << int(e) << " alpha " << alpha << " in place "
                << in_place << ": want " << want << ", got " << got[c];
          }
        }
      }
      }
    }
  }
}

// Unquantized 16-bit panels decode every bf16 / f16 bit pattern exactly (f16
// subnormals, infinities; NaN stays NaN): one k, 65536 columns.
TEST_P(FloatKernels, SixteenBitPanelsDecodeEveryPattern) {
  if (!f32_acts()) GTEST_SKIP() << "unquantized panels run the FMA cores";
  for (x86::PanelType type : {x86::PanelType::bf16, x86::PanelType::f16}) {
    const int64_t n = 65536;
    std::vector<uint16_t> bits(static_cast<size_t>(n));
    for (int64_t c = 0; c < n; ++c) bits[c] = static_cast<uint16_t>(c);
    const x86::FloatPanels panels = x86::pack_panels(type, bits.data(), 2, n, 1);
    const float x = 1.0f;
    std::vector<float> got(static_cast<size_t>(n));
    gemm_f32(&x, 1, 1, panels, 1.0f, nullptr, got.data());
    for (int64_t c = 0; c < n; ++c) {
      const float w = type == x86::PanelType::bf16 ? bf16_to_f32(bits[c]) : f16_to_f32(bits[c]);
      const float want = 0.0f + 1.0f * w;
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[c])) << type_name(type) << " bits " << c;
      } else {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[c]), std::bit_cast<uint32_t>(want)) << type_name(type) << " bits " << c;
      }
    }
  }
}
// pack_panels' rows_packed contract (what lets FloatGemm drop a layer's file
// pages while it packs): every row is handed over exactly once, in pieces of
// at most 64 panels, and never read again. The callback overwrites the rows
// it is given, as dropped-and-refaulted pages could not; the panels and the
// NaN column list must still equal a plain pack of the untouched weight.
TEST(KernelsFloat, PackedRowsAreHandedOverOnceAndNotReadAgain) {
  using T = x86::PanelType;
  for (T type : {T::e4m3, T::bf16})
    for (int64_t n : {5, 16, 1100, 2100}) {
      const int64_t k = 48, eb = type == T::bf16 ? 2 : 1, row_bytes = k * eb;
      std::vector<uint8_t> w(static_cast<size_t>(n * row_bytes));
      std::mt19937 rng(static_cast<uint32_t>(n + eb));
      for (uint8_t& b : w) b = static_cast<uint8_t>(rng() % 0x7F);
      w[static_cast<size_t>((n - 1) * row_bytes)] = 0x7F;  // an E4M3 NaN in the last row
      const x86::FloatPanels want = x86::pack_panels(type, w.data(), row_bytes, n, k);
      std::vector<uint8_t> scratch = w;
      std::mutex lock;
      std::vector<int> handed(static_cast<size_t>(n), 0);
      const x86::FloatPanels got = x86::pack_panels(type, scratch.data(), row_bytes, n, k, nullptr,
                                                    [&](int64_t r0, int64_t r1) {
                                                      ASSERT_LE(r1 - r0, 64 * 16);
                                                      std::lock_guard<std::mutex> hold(lock);
                                                      for (int64_t r = r0; r < r1; ++r) ++handed[static_cast<size_t>(r)];
                                                      std::memset(scratch.data() + r0 * row_bytes, 0xFF,
                                                                  static_cast<size_t>((r1 - r0) * row_bytes));
                                                    });
      EXPECT_EQ(std::count(handed.begin(), handed.end(), 1), n) << "n=" << n;
      EXPECT_TRUE(got.data == want.data) << "n=" << n << ": a row was read after it was handed over";
      EXPECT_EQ(got.nan_columns, want.nan_columns) << "n=" << n;
    }
}

// Panels hold the stored bytes: 1 per FP8 weight, 2 per bf16 / f16, 4 per
// f32, 1 + 1/32 per MXFP8 weight (N a multiple of 16: no column padding;
// an odd K's FP8 panels one zero row more, which the bf16 core reads as the
// last pair's second half).
TEST(KernelsFloat, PanelsKeepTheStoredWidth) {
  const int64_t n = 64, k = 128;
  std::vector<uint8_t> bytes(static_cast<size_t>(n * k * 4), 0x11), scales(static_cast<size_t>(n * k / 32), 127);
  using T = x86::PanelType;
  EXPECT_EQ(x86::pack_panels(T::e4m3, bytes.data(), k, n, k).bytes(), n * k);
  EXPECT_EQ(x86::pack_panels(T::e5m2, bytes.data(), k, n, k).bytes(), n * k);
  EXPECT_EQ(x86::pack_panels(T::e5m2, bytes.data(), k, n, k - 1).bytes(), n * k);
  EXPECT_EQ(x86::pack_panels(T::bf16, bytes.data(), 2 * k, n, k - 1).bytes(), 2 * n * (k - 1));
  EXPECT_EQ(x86::pack_panels(T::bf16, bytes.data(), 2 * k, n, k).bytes(), 2 * n * k);
  EXPECT_EQ(x86::pack_panels(T::f16, bytes.data(), 2 * k, n, k).bytes(), 2 * n * k);
  EXPECT_EQ(x86::pack_panels(T::f32, bytes.data(), 4 * k, n, k).bytes(), 4 * n * k);
  EXPECT_EQ(x86::pack_panels(T::mxfp8, bytes.data(), k, n, k, scales.data()).bytes(), n * k + n * k / 32);
  std::vector<uint8_t> e4m3_scales(static_cast<size_t>(n * k / 16), 0x38);
  EXPECT_EQ(x86::pack_panels(T::nvfp4, bytes.data(), k / 2, n, k, e4m3_scales.data()).bytes(),
            n * k / 2 + n * k / 16);
  EXPECT_THROW(x86::pack_panels(T::mxfp8, bytes.data(), k, n, 48, scales.data()), Error);  // K % 32
  EXPECT_THROW(x86::pack_panels(T::f32, bytes.data(), 4 * k - 1, n, k), Error);  // short rows
}

// The selection point: forcing works both ways, the automatic choice follows
// the probe's rates, and the probe is short.
TEST(FloatDot, ForcingAndAutomaticChoice) {
  if (!kernels::has_avx512_vnni_bf16()) {
    EXPECT_EQ(kernels::measured_float_dot(), kernels::FloatDot::fma);  // no vdpbf16ps at all
  }
  MIXQ_KERNEL_PATH_OR_SKIP("float_dot:avx512_bf16", kernels::Isa::avx512,
                           kernels::has_avx512_vnni_bf16() ? "" : "AVX-512 VNNI/BF16");
  kernels::set_float_dot(kernels::FloatDot::bf16);
  EXPECT_EQ(kernels::float_dot(), kernels::FloatDot::bf16);
  kernels::set_float_dot(kernels::FloatDot::fma);
  EXPECT_EQ(kernels::float_dot(), kernels::FloatDot::fma);
  kernels::set_float_dot(std::nullopt);
  const kernels::FloatDot measured = kernels::measured_float_dot();
  if (!std::getenv("MIXQ_FLOAT_DOT")) {
    EXPECT_EQ(kernels::float_dot(), measured);
  }
  EXPECT_EQ(kernels::parse_float_dot("fma"), kernels::FloatDot::fma);
  EXPECT_EQ(kernels::parse_float_dot("bf16"), kernels::FloatDot::bf16);
  EXPECT_EQ(kernels::parse_float_dot("auto"), std::nullopt);
  const auto t0 = std::chrono::steady_clock::now();
  const kernels::FloatDotProbe p = kernels::probe_float_dot();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("probe: vdpbf16ps %.0f GFLOPS, vfmadd231ps %.0f GFLOPS (1 thread, %.1f ms) -> %s\n",
              p.bf16_gflops, p.fma_gflops, ms, std::string(kernels::float_dot_name(measured)).c_str());
  EXPECT_GT(p.bf16_gflops, 0.0);
  EXPECT_GT(p.fma_gflops, 0.0);
  EXPECT_LT(ms, 50.0) << "the probe must stay short";
  // The cached choice came from an earlier probe; on a shared machine rates
  // drift, so only a clear winner (1.5x) must match it.
  if (p.fma_gflops > 1.5 * p.bf16_gflops) {
    EXPECT_EQ(measured, kernels::FloatDot::fma);
  }
  if (p.bf16_gflops > 1.5 * p.fma_gflops) {
    EXPECT_EQ(measured, kernels::FloatDot::bf16);
  }
}
}  // namespace
}  // namespace mixq
