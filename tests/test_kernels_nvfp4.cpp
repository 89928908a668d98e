// NVFP4 W4A4 against the reference kernels on random data, bit exact
// (integer block dots, the reference's fp32 epilogue order): the activation
// quantizer, the GEMM, extreme codes, and the panels read in place. Shapes
// cover the remainder paths: M in {1,2,3,7,16,33,64,257}, N not a multiple of
// 16, K = 80 (5 NVFP4 blocks). Every test runs once per x86 path (avx512;
// avx2 with AVX-VNNI; avx2 with vpmaddubsw only, forced through the kernel's
// switch) with kernels::set_isa limiting the process to it; a path the CPU
// lacks is skipped by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <vector>

#include "kernels/ref/float_ref.hpp"
#include "kernels/x86/nvfp4_w4a4.hpp"
#include "numeric/swizzle.hpp"
#include "support/float_kernel_paths.hpp"

namespace mixq {
namespace {

using namespace testing;  // mixq::testing: the paths, stored weights, expect_bits_equal

// NVFP4 W4A4 runs on all three paths.
class Nvfp4Kernels : public OnPath {
  bool nvfp4() const override { return true; }
};
INSTANTIATE_TEST_SUITE_P(Paths, Nvfp4Kernels, ::testing::Values(Path::avx512, Path::avx2_vnni, Path::avx2),
                         path_name);

// An NVFP4 weight as a checkpoint stores it: hi-first packed codes and
// swizzled E4M3 block scales.
struct StoredNvfp4 {
  int64_t rows = 0, row_bytes = 0;
  std::vector<uint8_t> codes, scales;
  float global = 0;
  kernels::ref::Nvfp4Weight view() const {
    return {codes.data(), rows, row_bytes, scales.data(), global};
  }
};

StoredNvfp4 make_nvfp4(int64_t n, int64_t k, uint64_t seed) {
  const std::vector<float> w = random_floats(static_cast<size_t>(n * k), seed, 0.05f);
  const quant::Nvfp4Blocks q = quant::quantize_nvfp4(w.data(), n, k, std::nullopt);
  StoredNvfp4 s;
  s.rows = q.rows;
  s.row_bytes = q.cols / 2;
  s.codes.resize(static_cast<size_t>(q.rows * q.cols / 2));
  for (int64_t i = 0; i < q.rows * q.cols / 2; ++i)
    s.codes[static_cast<size_t>(i)] = static_cast<uint8_t>((q.codes[2 * i] << 4) | q.codes[2 * i + 1]);
  s.scales = swizzle_scales(q.block_scales.data(), q.rows, q.cols / 16);
  s.global = q.global_scale;
  return s;
}

TEST_P(Nvfp4Kernels, ActivationQuantizerMatchesReference) {
  // 600: 37 blocks and a partial one; a NaN, whole zero blocks and a tiny
  // block (a subnormal E4M3 scale) among them. 248: 16 blocks, the last one
  // partial, in one group of the kernels' kLanes blocks at a time, one of
  // them past the E4M3 maximum under the input scale (s = 448).
  for (int64_t k : {16, 80, 72, 3, 600, 248}) {
    const int64_t blocks = (k + 15) / 16;
    for (int64_t m : {1, 7, 33}) {
      std::vector<float> x = random_floats(static_cast<size_t>(m * k), 7 + m + k, 2.0f);
      x[0] = 0.0f;  // exact zeros and a zero block stay zero
      if (k > 16) x[static_cast<size_t>(k - 17)] = std::nanf("");  // NaN: no part of its block's scale, code 0
      if (k == 600) {  // whole zero blocks among the vector ones, a tiny block (subnormal E4M3 scale)
        for (int64_t i = 32; i < 48; ++i) x[static_cast<size_t>(i)] = 0.0f;
        for (int64_t i = 48; i < 64; ++i) x[static_cast<size_t>(i)] *= 1e-4f;
      }
      if (k == 248) x[20] = 40.0f;  // (40 / 6) / 0.004 > 448
      for (auto scale : {std::optional<float>{}, std::optional<float>{0.004f}}) {
        const quant::Nvfp4Blocks ref = quant::quantize_nvfp4(x.data(), m, k, scale);
        x86::Nvfp4Activation act;
        quantize(x.data(), m, k, blocks, nullptr, scale, act);
        EXPECT_EQ(act.global, ref.global_scale);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t b = 0; b < blocks; ++b) {
            ASSERT_EQ(act.scale[r * blocks + b], e4m3_to_f32(ref.block_scales[r * blocks + b]))
                << "m=" << m << " k=" << k << " row " << r << " block " << b;
            int32_t sum = 0;
            for (int64_t i = 0; i < 16; ++i) {
              const int64_t c = b * 16 + i;
              const int want = static_cast<int>(2.0f * e2m1_to_f32(ref.codes[r * ref.cols + c]));
              ASSERT_EQ(act.q[(r * blocks + b) * 16 + i], want) << "row " << r << " col " << c;
              sum += want;
            }
            EXPECT_EQ(act.comp[r * blocks + b], -12 * sum);
          }
      }
    }
  }
}

TEST_P(Nvfp4Kernels, ActivationQuantizerRoundsTiesToEven) {
  // With input scale 1 a block of maximum 6·2^e gets S = 2^e exactly, so
  // x = 2^e·v divides to v exactly: the E2M1 ties (0.25 .. 5) and the grid's
  // range edges, each block at its own power of two (16 blocks: one group of
  // the AVX-512 quantizer, two of AVX2's), row 1 negated. Doubled codes by
  // the E2M1 rule (ties to the even code: 0.75 -> 1.0, 1.25 -> 1.0, 1.75 ->
  // 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4).
  const float v[16] = {6.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                       0.0f, 0.5f, 1.9999f, 2.0f, 3.9999f, 4.0f, 5.0001f, 0.2499f};
  const int want[16] = {12, 0, 2, 2, 4, 4, 8, 8, 0, 1, 4, 4, 8, 8, 12, 0};
  const int64_t k = 256, blocks = 16;
  std::vector<float> x(2 * k);
  for (int64_t b = 0; b < blocks; ++b)
    for (int i = 0; i < 16; ++i) {
      const float at = std::ldexp(v[i], static_cast<int>(b % 5) - 2);
      x[static_cast<size_t>(b * 16 + i)] = at;
      x[static_cast<size_t>(k + b * 16 + i)] = -at;
    }
  x86::Nvfp4Activation act;
  quantize(x.data(), 2, k, blocks, nullptr, 1.0f, act);
  const quant::Nvfp4Blocks ref = quant::quantize_nvfp4(x.data(), 2, k, 1.0f);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      ASSERT_EQ(act.scale[r * blocks + b], std::ldexp(1.0f, static_cast<int>(b % 5) - 2)) << "block " << b;
      for (int i = 0; i < 16; ++i) {
        const int64_t c = b * 16 + i;
        ASSERT_EQ(act.q[(r * blocks + b) * 16 + i], r == 0 ? want[i] : -want[i]) << "row " << r << " value " << v[i];
        ASSERT_EQ(static_cast<int>(2.0f * e2m1_to_f32(ref.codes[r * ref.cols + c])), r == 0 ? want[i] : -want[i]);
      }
    }
}

// Zero tolerance: integer block dots and the reference's fp32 epilogue order.
TEST_P(Nvfp4Kernels, GemmIsBitExactAgainstReference) {
  struct Shape { int64_t n, k; };
  for (Shape s : {Shape{16, 80}, Shape{37, 80}, Shape{70, 48}, Shape{5, 32}, Shape{33, 160}, Shape{100, 48},
                 Shape{300, 80} /* rows past one 128-row scale tile */}) {
    const StoredNvfp4 w = make_nvfp4(s.n, s.k, 100 + s.n);
    const x86::Nvfp4Weights packed = x86::nvfp4_pack(w.codes.data(), w.rows, w.row_bytes,
                                                     w.scales.data(), s.n, w.global);
    const x86::Nvfp4Weights in_place = x86::nvfp4_in_place(w.codes.data(), w.rows, w.row_bytes,
                                                           w.scales.data(), s.n, w.global);
    ASSERT_TRUE(packed.fast_ok);
    ASSERT_TRUE(in_place.fast_ok);
    const std::vector<float> bias = random_floats(static_cast<size_t>(s.n), 5, 0.1f);
    const std::vector<float> pqs = random_floats(static_cast<size_t>(s.k), 6, 1.0f);
    // kRows, and 5, 6, 34 and 35 rows: every tail of AVX2's 4-row tiles
    // (3, 5, 6, 7 rows) and of 3- or 4-row large-M tiles (16, 17, 33 to 35;
    // AVX2 takes that path from 16 rows packed, 9 in place).
    std::vector<int64_t> rows(std::begin(kRows), std::end(kRows));
    rows.insert(rows.end(), {5, 6, 34, 35});
    for (int64_t m : rows) {
      const std::vector<float> x = random_floats(static_cast<size_t>(m * s.k), 300 + m, 1.0f);
      for (int variant = 0; variant < 3; ++variant) {
        const std::optional<float> input = variant == 1 ? std::optional<float>(0.002f) : std::nullopt;
        const float* p = variant == 2 ? pqs.data() : nullptr;
        const float* b = variant == 0 ? nullptr : bias.data();
        std::vector<float> want(static_cast<size_t>(m * s.n)), got(want.size(), -1.0f);
        kernels::ref::nvfp4_w4a4(x.data(), m, s.k, w.view(), s.n, input, p, b, want.data());
        x86::Nvfp4Activation act;
        quantize(x.data(), m, s.k, packed.blocks, p, input, act);
        SCOPED_TRACE(::testing::Message() << "n=" << s.n << " k=" << s.k << " m=" << m << " variant " << variant);
        gemm(act, packed, b, got.data());
        expect_bits_equal(want, got, "nvfp4 packed");
        std::fill(got.begin(), got.end(), -1.0f);
        gemm(act, in_place, b, got.data());
        expect_bits_equal(want, got, "nvfp4 in place");
      }
    }
  }
}

TEST_P(Nvfp4Kernels, BlockDotIsExactForExtremeCodes) {
  // Every weight code ±6 with scale 448 and activations that quantize to ±6:
  // the largest block dot (16·12·12 = 2304 doubled) must come out exactly.
  const int64_t n = 16, k = 32;
  StoredNvfp4 w;
  w.rows = 16;
  w.row_bytes = 16;
  w.codes.assign(16 * 16, 0x7F);  // +6, -6 alternating (0x7 / 0xF)
  std::vector<uint8_t> linear(16 * 2, 0x7E);  // 448
  w.scales = swizzle_scales(linear.data(), 16, 2);
  w.global = 1.0f;
  std::vector<float> x(2 * k);
  for (int64_t i = 0; i < 2 * k; ++i) x[i] = (i % 2 == 0) ? 3.0f : -3.0f;
  const x86::Nvfp4Weights packed = x86::nvfp4_pack(w.codes.data(), 16, 16, w.scales.data(), n, 1.0f);
  std::vector<float> want(2 * n), got(2 * n);
  kernels::ref::nvfp4_w4a4(x.data(), 2, k, w.view(), n, std::nullopt, nullptr, nullptr, want.data());
  x86::Nvfp4Activation act;
  quantize(x.data(), 2, k, packed.blocks, nullptr, std::nullopt, act);
  gemm(act, packed, nullptr, got.data());
  std::vector<float> in_place(2 * n);
  gemm(act, x86::nvfp4_in_place(w.codes.data(), 16, 16, w.scales.data(), n, 1.0f), nullptr, in_place.data());
  expect_bits_equal(want, in_place, "extreme codes in place");
  // x codes +6/-6 with g = 3/2688, S = 448 (worked example of §3.2): block dot
  // of (6)(6) + (-6)(-6) ... = 16·36 per block, two blocks; y = g·1·448²·1152.
  const float expected = (3.0f / 2688.0f) * 1.0f * (448.0f * 448.0f * 1152.0f);
  EXPECT_FLOAT_EQ(want[0], expected);
  expect_bits_equal(want, got, "extreme codes");
}

// The large-M kernels' decoded panels, read in place, for both vector widths
// (16 lanes is AVX-512's layout, checked here on any AVX2 CPU), against the
// layout written out byte by byte: the stored codes and scales of each row.
TEST(KernelsFloat, Nvfp4InPlacePanelsHoldTheDecodedLayout) {
  MIXQ_KERNEL_PATH_OR_SKIP("nvfp4:in_place_panels", kernels::Isa::avx2, testing::missing_isa(kernels::Isa::avx2));
  const int64_t n = 300, k = 112;  // 7 blocks (a lone last one), rows in 3 scale tiles, a partial panel
  StoredNvfp4 w = make_nvfp4(n, k, 77);
  // Every E4M3 code but NaN as a block scale: subnormals, negatives, zeros.
  for (size_t i = 0, code = 0; i < w.scales.size(); ++i, code = (code + 1) % 256) {
    if ((code & 0x7F) == 0x7F) code = (code + 1) % 256;
    w.scales[i] = static_cast<uint8_t>(code);
  }
  const x86::Nvfp4Weights in_place = x86::nvfp4_in_place(w.codes.data(), w.rows, w.row_bytes, w.scales.data(), n, w.global);
  ASSERT_TRUE(in_place.fast_ok);
  const int8_t table[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
  const int64_t blocks = k / 16;
  for (int lanes : {8, 16}) {
    std::vector<uint8_t> got(static_cast<size_t>(blocks * 320));
    for (int64_t p = 0; p < in_place.panels; ++p) {
      x86::nvfp4_decode_panel_in_place(in_place, p, lanes, got.data());
      for (int64_t j = 0; j < 16 && p * 16 + j < n; ++j) {
        const int64_t r = p * 16 + j, h = j / lanes, lane = j % lanes;
        for (int64_t b = 0; b < blocks; ++b) {
          const uint8_t* vec = got.data() + b * 320 + h * 20 * lanes;
          for (int64_t kk = 0; kk < 16; ++kk) {
            const uint8_t byte = w.codes[static_cast<size_t>(r * w.row_bytes + (16 * b + kk) / 2)];
            const int code = kk % 2 == 0 ? byte >> 4 : byte & 0x0F;
            ASSERT_EQ(vec[4 * lanes * (kk / 4) + 4 * lane + kk % 4], static_cast<uint8_t>(table[code]))
                << "lanes " << lanes << " row " << r << " k " << 16 * b + kk;
          }
          float scale;
          std::memcpy(&scale, vec + 16 * lanes + 4 * lane, 4);
          ASSERT_EQ(scale, e4m3_to_f32(w.scales[static_cast<size_t>(swizzled_offset(r, b, blocks))]))
              << "lanes " << lanes << " row " << r << " block " << b;
        }
      }
    }
  }
  // The GEMVs (8 rows a ymm up to kNvfp4InPlaceGemvM rows; with AVX-512
  // VBMI 16 a zmm from 2 to kNvfp4InPlaceGemv16M) convert the same scales
  // their own ways; past its bound, the ymm call runs the panel decode.
  for (int64_t m = 1; m <= std::max(x86::kNvfp4InPlaceGemvM, x86::kNvfp4InPlaceGemv16M); ++m) {
    const std::vector<float> x = random_floats(static_cast<size_t>(m * k), 78 + m, 1.0f);
    std::vector<float> want(static_cast<size_t>(m * n)), got(want.size(), -1.0f);
    kernels::ref::nvfp4_w4a4(x.data(), m, k, w.view(), n, std::nullopt, nullptr, nullptr, want.data());
    x86::Nvfp4Activation act;
    x86::nvfp4_quantize_avx2(x.data(), m, k, blocks, nullptr, std::nullopt, act);
    SCOPED_TRACE(::testing::Message() << "M = " << m);
    x86::nvfp4_gemm_avx2(act, in_place, nullptr, got.data(), false);
    expect_bits_equal(want, got, "nvfp4 in place (ymm), every scale code");
    if (!x86::nvfp4_avx512_supported()) continue;
    std::fill(got.begin(), got.end(), -1.0f);
    x86::nvfp4_gemm_avx512(act, in_place, nullptr, got.data());
    expect_bits_equal(want, got, "nvfp4 in-place GEMV (zmm), every scale code");
  }
}

TEST(KernelsFloat, Nvfp4NanScaleDisablesFastPath) {
  std::vector<uint8_t> codes(16 * 8, 0x11), linear(16, 0x38);
  linear[3] = 0x7F;
  const std::vector<uint8_t> scales = swizzle_scales(linear.data(), 16, 1);
  EXPECT_FALSE(x86::nvfp4_pack(codes.data(), 16, 8, scales.data(), 16, 1.0f).fast_ok);
  EXPECT_FALSE(x86::nvfp4_in_place(codes.data(), 16, 8, scales.data(), 16, 1.0f).fast_ok);
  // A NaN in a padding row (past n) is never read: the fast path stays.
  EXPECT_TRUE(x86::nvfp4_in_place(codes.data(), 16, 8, scales.data(), 3, 1.0f).fast_ok);
  linear[3] = 0xB8;  // negative scale: decodable, stays fast
  const std::vector<uint8_t> neg = swizzle_scales(linear.data(), 16, 1);
  EXPECT_TRUE(x86::nvfp4_pack(codes.data(), 16, 8, neg.data(), 16, 1.0f).fast_ok);
  EXPECT_TRUE(x86::nvfp4_in_place(codes.data(), 16, 8, neg.data(), 16, 1.0f).fast_ok);
}
}  // namespace
}  // namespace mixq
