// Reference quantizers (docs/FORMATS.md §2.5, §3.1–3.3) on hand-computed
// examples, including the NVFP4 worked example of §3.2.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "numeric/quantizers.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq {
namespace {

std::vector<float> randn(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(Q8Row, HandExampleWithTiesToEven) {
  const float x[8] = {1.0f, -127.0f, 63.5f, 0.5f, 0, 0, 0, 0};  // second row all zero
  int8_t q[8];
  float s[2];
  quant::q8row(x, 2, 4, q, s);
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(q[0], 1);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[2], 64);  // 63.5 -> even
  EXPECT_EQ(q[3], 0);   // 0.5 -> even
  EXPECT_EQ(s[1], 1e-30f);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(q[i], 0);
}

TEST(Q8Row, ErrorBoundedByHalfAStep) {
  const int64_t m = 5, k = 77;
  const auto x = randn(m * k, 11, 3.0f);
  std::vector<int8_t> q(m * k);
  std::vector<float> s(m);
  quant::q8row(x.data(), m, k, q.data(), s.data());
  for (int64_t r = 0; r < m; ++r) {
    float amax = 0;
    for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(x[r * k + i]));
    EXPECT_EQ(s[r], amax / 127.0f);
    for (int64_t i = 0; i < k; ++i) ASSERT_LE(std::fabs(q[r * k + i] * s[r] - x[r * k + i]), 0.5f * s[r] * 1.0001f);
  }
}

TEST(Q4Row, HandExample) {
  const float x[8] = {7.0f, -3.5f, 0.5f, 1.5f, 0, 0, 0, 0};
  int8_t q[8];
  float s[2];
  quant::q4row(x, 2, 4, q, s);
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(q[0], 7);
  EXPECT_EQ(q[1], -4);  // -3.5 -> even
  EXPECT_EQ(q[2], 0);
  EXPECT_EQ(q[3], 2);
  EXPECT_EQ(s[1], 1e-10f / 7.0f);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(q[i], 0);
}

TEST(Nvfp4Quantizer, SpecWorkedExample) {
  // One 16-block: [0.5, -1, 3, 0.25, 0 ...]; amax 3 -> g = 3/2688.
  std::vector<float> x(16, 0.0f);
  x[0] = 0.5f, x[1] = -1.0f, x[2] = 3.0f, x[3] = 0.25f;
  const auto b = quant::quantize_nvfp4(x.data(), 1, 16, std::nullopt);
  EXPECT_EQ(b.global_scale, 3.0f / 2688.0f);
  EXPECT_NEAR(b.global_scale, 0.0011160715f, 1e-10f);
  EXPECT_EQ(b.rows, 16);
  EXPECT_EQ(b.cols, 16);
  ASSERT_EQ(b.block_scales.size(), 16u);
  EXPECT_EQ(e4m3_to_f32(b.block_scales[0]), 448.0f);
  EXPECT_EQ(b.codes[0], 0x2);
  EXPECT_EQ(b.codes[1], 0xC);
  EXPECT_EQ(b.codes[2], 0x7);
  EXPECT_EQ(b.codes[3], 0x1);
  for (int i = 4; i < 16; ++i) EXPECT_EQ(b.codes[i], 0);
  for (size_t i = 1; i < b.block_scales.size(); ++i) EXPECT_EQ(b.block_scales[i], 0);  // padding rows
}

TEST(Nvfp4Quantizer, PaddingGivenScaleAndZeros) {
  const int64_t m = 3, k = 20;  // pads to [16, 32]
  const auto x = randn(m * k, 5, 4.0f);
  const auto b = quant::quantize_nvfp4(x.data(), m, k, 0.01f);
  EXPECT_EQ(b.rows, 16);
  EXPECT_EQ(b.cols, 32);
  EXPECT_EQ(b.global_scale, 0.01f);
  EXPECT_EQ(b.codes.size(), 16u * 32u);
  EXPECT_EQ(b.block_scales.size(), 16u * 2u);
  for (int64_t r = 0; r < b.rows; ++r)
    for (int64_t c = 0; c < b.cols; ++c)
      if (r >= m || c >= k) {
        ASSERT_EQ(b.codes[r * b.cols + c], 0) << r << "," << c;
      }
  // Each value decodes within half a grid step of the block's scale (codes <= 6).
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const float blk = 0.01f * e4m3_to_f32(b.block_scales[r * 2 + c / 16]);
      const float v = e2m1_to_f32(b.codes[r * b.cols + c]) * blk;
      ASSERT_LE(std::fabs(v - x[r * k + c]), blk * 1.0f + 1e-6f);
    }
  const std::vector<float> zeros(32, 0.0f);
  const auto z = quant::quantize_nvfp4(zeros.data(), 2, 16, std::nullopt);
  EXPECT_EQ(z.global_scale, 0.0f);
  for (auto c : z.codes) EXPECT_EQ(c, 0);
  for (auto s : z.block_scales) EXPECT_EQ(s, 0);
  EXPECT_THROW(quant::quantize_nvfp4(x.data(), m, k, 0.0f), Error);
  EXPECT_THROW(quant::quantize_nvfp4(x.data(), m, k, std::nanf("")), Error);
}

TEST(Mxfp8Quantizer, ExponentsAreExactCeilLog2) {
  // Blocks of 32 with amax 448 (ratio 1 -> e 127), 449 (-> 128), 896 (ratio 2
  // exactly -> 128), 0 (-> 0), 1 (ratio 1/448 -> ceil(log2) = -8 -> 119).
  const float amax[5] = {448.0f, 449.0f, 896.0f, 0.0f, 1.0f};
  const uint8_t expect[5] = {127, 128, 128, 0, 119};
  std::vector<float> x(5 * 32, 0.0f);
  for (int b = 0; b < 5; ++b) x[b * 32 + 7] = -amax[b];
  const auto q = quant::quantize_mxfp8(x.data(), 1, 5 * 32);
  EXPECT_EQ(q.rows, 32);
  EXPECT_EQ(q.cols, 160);
  for (int b = 0; b < 5; ++b) {
    EXPECT_EQ(q.exponents[b], expect[b]) << b;
    const float scale = b == 3 ? 0.0f : std::ldexp(1.0f, expect[b] - 127);
    EXPECT_EQ(e4m3_to_f32(q.codes[b * 32 + 7]) * scale, b == 1 ? -448.0f : -amax[b]) << b;
  }
}

TEST(Mxfp8Quantizer, RandomBlocksDecodeClosely) {
  const int64_t m = 5, k = 40;  // pads to [32, 64]
  const auto x = randn(m * k, 9, 2.0f);
  const auto q = quant::quantize_mxfp8(x.data(), m, k);
  EXPECT_EQ(q.rows, 32);
  EXPECT_EQ(q.cols, 64);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const float v = e4m3_to_f32(q.codes[r * 64 + c]) * e8m0_to_f32(q.exponents[r * 2 + c / 32]);
      ASSERT_NEAR(v, x[r * k + c], std::fabs(x[r * k + c]) / 16.0f + 1e-3f);
    }
}

TEST(Fp8Quantizer, ScaleClampAndType) {
  const float x[4] = {896.0f, -1000.0f, 1.0f, 3.0f};
  uint8_t out[4];
  quant::quantize_fp8(x, 4, 2.0f, DType::F8_E4M3, out);
  EXPECT_EQ(out[0], 0x7E);
  EXPECT_EQ(out[1], 0xFE);
  EXPECT_EQ(e4m3_to_f32(out[2]), 0.5f);
  EXPECT_EQ(e4m3_to_f32(out[3]), 1.5f);
  quant::quantize_fp8(x, 4, 0.01f, DType::F8_E5M2, out);
  EXPECT_EQ(e5m2_to_f32(out[0]), 57344.0f);
  EXPECT_EQ(e5m2_to_f32(out[2]), 96.0f);  // 100 -> nearest e5m2 (96, 112): 96
  EXPECT_THROW(quant::quantize_fp8(x, 4, 1.0f, DType::I8, out), Error);
}

}  // namespace
}  // namespace mixq
