// Block-scale swizzle (docs/FORMATS.md §2.3) and the NVFP4 nibble swap (§2.2a).
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "mixq/error.hpp"
#include "numeric/swizzle.hpp"

namespace mixq {
namespace {

TEST(Swizzle, SpecOffsetTableWithEightColumns) {
  struct Case {
    int64_t r, c, offset;
  };
  const Case table[] = {{0, 0, 0},   {0, 1, 1},   {0, 3, 3},   {0, 4, 512}, {1, 0, 16},    {31, 0, 496},
                        {32, 0, 4},  {64, 0, 8},  {96, 3, 15}, {127, 3, 511}, {128, 0, 1024}};
  for (const auto& t : table) {
    EXPECT_EQ(swizzled_offset(t.r, t.c, 8), t.offset) << t.r << "," << t.c;
    const auto pos = swizzled_position(t.offset, 8);
    EXPECT_EQ(pos.row, t.r);
    EXPECT_EQ(pos.col, t.c);
  }
}

// The worked examples of docs/FORMATS.md §2.3: an H3 mlp.fc2 NVFP4 block scale
// (N = 5376, K = 14336: 896 blocks per row, no padding) and a padded layer
// (N = 200, K = 80: 5 blocks, padded to 256 x 8).
TEST(Swizzle, DocsWorkedExamples) {
  EXPECT_EQ(swizzled_rows(5376) * swizzled_cols(896), 4816896);
  EXPECT_EQ(swizzled_offset(300, 37, 896), 234181);
  const auto fc2 = swizzled_position(234181, 896);
  EXPECT_EQ(fc2.row, 300);
  EXPECT_EQ(fc2.col, 37);
  EXPECT_EQ(swizzled_rows(200) * swizzled_cols(5), 2048);
  EXPECT_EQ(swizzled_offset(150, 4, 5), 1888);
  const auto padded = swizzled_position(1888, 5);
  EXPECT_EQ(padded.row, 150);
  EXPECT_EQ(padded.col, 4);
}

TEST(Swizzle, PaddedSizes) {
  EXPECT_EQ(swizzled_rows(1), 128);
  EXPECT_EQ(swizzled_rows(128), 128);
  EXPECT_EQ(swizzled_rows(129), 256);
  EXPECT_EQ(swizzled_cols(1), 4);
  EXPECT_EQ(swizzled_cols(5), 8);
  EXPECT_EQ(swizzled_cols(0), 0);
}

class SwizzleShapes : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(SwizzleShapes, OffsetIsABijectionAndInverts) {
  const auto [rows, cols] = GetParam();
  const int64_t rp = swizzled_rows(rows), cp = swizzled_cols(cols);
  std::set<int64_t> seen;
  for (int64_t r = 0; r < rp; ++r)
    for (int64_t c = 0; c < cp; ++c) {
      const int64_t o = swizzled_offset(r, c, cols);
      ASSERT_GE(o, 0);
      ASSERT_LT(o, rp * cp);
      ASSERT_TRUE(seen.insert(o).second) << "offset " << o << " used twice";
      const auto pos = swizzled_position(o, cols);
      ASSERT_EQ(pos.row, r);
      ASSERT_EQ(pos.col, c);
    }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), rp * cp);
}

TEST_P(SwizzleShapes, RoundTripWithZeroPadding) {
  const auto [rows, cols] = GetParam();
  std::mt19937 rng(static_cast<unsigned>(rows * 31 + cols));
  std::vector<uint8_t> linear(static_cast<size_t>(rows * cols));
  for (auto& b : linear) b = static_cast<uint8_t>(1 + rng() % 255);  // never 0, so padding is visible
  const auto swizzled = swizzle_scales(linear.data(), rows, cols);
  ASSERT_EQ(static_cast<int64_t>(swizzled.size()), swizzled_rows(rows) * swizzled_cols(cols));
  int64_t zeros = 0;
  for (size_t o = 0; o < swizzled.size(); ++o) {
    const auto pos = swizzled_position(static_cast<int64_t>(o), cols);
    if (pos.row < rows && pos.col < cols) {
      ASSERT_EQ(swizzled[o], linear[pos.row * cols + pos.col]);
    } else {
      ++zeros;
      ASSERT_EQ(swizzled[o], 0);
    }
  }
  EXPECT_EQ(zeros, static_cast<int64_t>(swizzled.size()) - rows * cols);
  EXPECT_EQ(unswizzle_scales(swizzled.data(), rows, cols), linear);
  // Fewer rows than the buffer holds (a layer using the first n rows): the first n rows.
  const std::vector<uint8_t> head(linear.begin(), linear.begin() + (rows - 1) * cols);
  EXPECT_EQ(unswizzle_scales(swizzled.data(), rows - 1, cols), head);
}

INSTANTIATE_TEST_SUITE_P(SpecShapes, SwizzleShapes,
                         ::testing::Values(std::pair<int64_t, int64_t>{128, 4}, std::pair<int64_t, int64_t>{129, 5},
                                           std::pair<int64_t, int64_t>{300, 17}, std::pair<int64_t, int64_t>{16, 1},
                                           std::pair<int64_t, int64_t>{256, 8}));

TEST(Swizzle, TileOrderIsRowTileMajor) {
  // (0, 4) is the second column tile of row tile 0; (128, 0) comes after all
  // column tiles of row tile 0: with 17 columns there are 5 tiles of 512 bytes.
  EXPECT_EQ(swizzled_offset(0, 4, 17), 512);
  EXPECT_EQ(swizzled_offset(128, 0, 17), 5 * 512);
  EXPECT_THROW(swizzled_position(0, 0), Error);
}

TEST(NibbleSwap, SwapsBothHalves) {
  uint8_t bytes[] = {0xAB, 0x10, 0x2C, 0x71};
  swap_nibbles(bytes, 4);
  EXPECT_EQ(bytes[0], 0xBA);
  EXPECT_EQ(bytes[1], 0x01);
  EXPECT_EQ(bytes[2], 0xC2);
  EXPECT_EQ(bytes[3], 0x17);
}

}  // namespace
}  // namespace mixq
