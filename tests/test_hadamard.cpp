// Regular Hadamard matrix and the fast ConvRot transform (docs/FORMATS.md §2.4).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "mixq/error.hpp"
#include "numeric/hadamard.hpp"

namespace mixq {
namespace {

std::vector<float> random_matrix(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(Hadamard, PowerOf4Predicate) {
  for (int64_t g : {4, 16, 64, 256, 1024, 4096, 1 << 20}) EXPECT_TRUE(is_power_of_4(g)) << g;
  for (int64_t g : {-4, 0, 1, 2, 3, 8, 12, 32, 128, 512, 2048, 255, 257}) EXPECT_FALSE(is_power_of_4(g)) << g;
}

TEST(Hadamard, RejectsNonPowersOf4) {
  for (int64_t g : {0, 1, 2, 8, 32, 128, 12, -4}) {
    EXPECT_THROW(hadamard_matrix(g), Error) << g;
    std::vector<float> x(256, 1.0f);
    EXPECT_THROW(hadamard_rotate(x.data(), 1, 256, g), Error) << g;
  }
  try {
    hadamard_matrix(32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("power of 4"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("32"), std::string::npos);
  }
  std::vector<float> x(80, 1.0f);
  EXPECT_THROW(hadamard_rotate(x.data(), 1, 80, 64), Error);  // K % G != 0
}

TEST(Hadamard, H4AndH16Row0) {
  const auto h4 = hadamard_matrix(4);
  const float expect[16] = {1, 1, 1, -1, 1, 1, -1, 1, 1, -1, 1, 1, -1, 1, 1, 1};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(h4[i], 0.5f * expect[i]) << i;
  const auto h16 = hadamard_matrix(16);
  const std::string pattern = "+++-+++-+++----+";
  for (int c = 0; c < 16; ++c) EXPECT_EQ(h16[c] * 4.0f, pattern[c] == '+' ? 1.0f : -1.0f) << c;
}

class HadamardSizes : public ::testing::TestWithParam<int64_t> {};

TEST_P(HadamardSizes, SymmetricOrthogonalRegular) {
  const int64_t g = GetParam();
  const auto h = hadamard_matrix(g);
  const float entry = 1.0f / std::sqrt(static_cast<float>(g));
  for (int64_t r = 0; r < g; ++r) {
    double row_sum = 0;
    for (int64_t c = 0; c < g; ++c) {
      ASSERT_EQ(h[r * g + c], h[c * g + r]);
      ASSERT_EQ(std::fabs(h[r * g + c]), entry);
      row_sum += h[r * g + c];
    }
    EXPECT_NEAR(row_sum, 1.0, 1e-6) << r;  // sqrt(G) before normalisation
  }
  for (int64_t r = 0; r < g; ++r)
    for (int64_t c = 0; c < g; ++c) {
      double dot = 0;
      for (int64_t i = 0; i < g; ++i) dot += double(h[r * g + i]) * h[i * g + c];
      ASSERT_NEAR(dot, r == c ? 1.0 : 0.0, 1e-6) << r << "," << c;
    }
}

TEST_P(HadamardSizes, FastTransformEqualsMatrixProduct) {
  const int64_t g = GetParam();
  const int64_t rows = 3, k = 2 * g;
  const auto h = hadamard_matrix(g);
  const auto x = random_matrix(rows, k, static_cast<uint64_t>(g));
  auto fast = x;
  hadamard_rotate(fast.data(), rows, k, g);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t grp = 0; grp < k / g; ++grp)
      for (int64_t j = 0; j < g; ++j) {
        double expect = 0;
        for (int64_t i = 0; i < g; ++i) expect += double(x[r * k + grp * g + i]) * h[i * g + j];
        ASSERT_NEAR(fast[r * k + grp * g + j], expect, 1e-5) << r << " " << grp << " " << j;
      }
  // Rotating twice is the identity (H·H = I).
  hadamard_rotate(fast.data(), rows, k, g);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(fast[i], x[i], 1e-5) << i;
}

INSTANTIATE_TEST_SUITE_P(Sizes, HadamardSizes, ::testing::Values(4, 16, 64, 256));

TEST(Hadamard, BasisVectorExample) {
  float e0[4] = {1, 0, 0, 0};
  hadamard_rotate(e0, 1, 4, 4);
  EXPECT_EQ(e0[0], 0.5f);
  EXPECT_EQ(e0[1], 0.5f);
  EXPECT_EQ(e0[2], 0.5f);
  EXPECT_EQ(e0[3], -0.5f);
}

}  // namespace
}  // namespace mixq
