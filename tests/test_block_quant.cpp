// NVFP4 activations in comfy-kitchen's layout (mixq/block_quant.hpp): hand-
// computed codes, scales and tile offsets (docs/FORMATS.md §2.3, §3.2), and
// the decode as the inverse. python/tests_torch/test_comfy_backend.py checks
// the same functions against comfy-kitchen's eager quantize_nvfp4 bit for bit.
#include <gtest/gtest.h>

#include <vector>

#include "mixq/block_quant.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq {
namespace {

TEST(BlockQuant, HandComputedBlock) {
  // One row, two blocks, global scale 1. Block 0: amax 6 -> scale e4m3(1) =
  // 0x38, codes are the values themselves; 2.5 is a tie between 2 and 3 (even
  // code 2.0 = 0x4). Block 1: all zero -> scale 0, codes 0.
  std::vector<float> x(32, 0.0f);
  const float block0[16] = {6, -6, 0.5, 2.5, 1, -1.5, 4, 3, 0, 0, 0, 0, 0, 0, 0, -0.25};
  std::copy(block0, block0 + 16, x.begin());
  const Nvfp4Packed q = quantize_nvfp4_packed(x.data(), 1, 32, 1.0f, false);
  ASSERT_EQ(q.rows, 1);
  ASSERT_EQ(q.data.size(), 16u);
  // (6, -6) = (0x7, 0xF); (0.5, 2.5) = (0x1, 0x4); (1, -1.5) = (0x2, 0xB); (4, 3) = (0x6, 0x5);
  // -0.25 is a tie between 0 and 0.5: even code 0 with the sign bit (0x8).
  const uint8_t want[8] = {0x7F, 0x14, 0x2B, 0x65, 0x00, 0x00, 0x00, 0x08};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q.data[i], want[i]) << i;
  for (int i = 8; i < 16; ++i) EXPECT_EQ(q.data[i], 0) << i;
  // Tiled scales: 128 rows x 4 columns, entry (r, c) at (r%32)*16 + (r/32)*4 + c.
  ASSERT_EQ(q.scales.size(), 128u * 4u);
  EXPECT_EQ(q.scales[0], 0x38);  // e4m3(1.0)
  EXPECT_EQ(q.scales[1], 0x00);

  std::vector<float> y(32, -1.0f);
  dequantize_nvfp4_packed(q.data.data(), q.scales.data(), 1, 32, y.data());
  const float decoded0[16] = {6, -6, 0.5, 2, 1, -1.5, 4, 3, 0, 0, 0, 0, 0, 0, 0, -0.0f};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(y[i], decoded0[i]) << i;
  for (int i = 16; i < 32; ++i) EXPECT_EQ(y[i], 0.0f) << i;
}

TEST(BlockQuant, RowThirtyThreeLandsInTheSecondRowGroupOfItsTile) {
  // Row 33 of 34 (pad16 -> 48 rows): its block 1 scale sits at
  // (33 % 32)·16 + (33 / 32)·4 + 1 = 21 of the first 128x4 tile.
  std::vector<float> x(34 * 32, 0.0f);
  x[33 * 32 + 16] = 12.0f;  // amax 12 in block (33, 1): scale (12/6)/1 = 2 = e4m3 0x40
  const Nvfp4Packed q = quantize_nvfp4_packed(x.data(), 34, 32, 1.0f, true);
  EXPECT_EQ(q.rows, 48);
  EXPECT_EQ(q.data.size(), 48u * 16u);
  ASSERT_EQ(q.scales.size(), 128u * 4u);
  for (size_t i = 0; i < q.scales.size(); ++i) EXPECT_EQ(q.scales[i], i == 21 ? 0x40 : 0x00) << i;
  EXPECT_EQ(q.data[33 * 16 + 8], 0x70);  // 12 / 2 = 6 = code 7, high nibble
}

TEST(BlockQuant, GlobalScaleDividesTheBlockScale) {
  // g = 0.5: block scale (amax/6)/g = 2 for amax 6; decode gives code·2 (g not applied).
  std::vector<float> x(16, 0.0f);
  x[0] = 6.0f;
  x[1] = 1.0f;
  const Nvfp4Packed q = quantize_nvfp4_packed(x.data(), 1, 16, 0.5f, false);
  EXPECT_EQ(q.scales[0], 0x40);
  EXPECT_EQ(q.data[0], 0x72);  // 6/(0.5·2) = 6 -> 7; 1/(0.5·2) = 1 -> 2
  std::vector<float> y(16);
  dequantize_nvfp4_packed(q.data.data(), q.scales.data(), 1, 16, y.data());
  EXPECT_EQ(y[0], 12.0f);
  EXPECT_EQ(y[1], 2.0f);
}

TEST(BlockQuant, RefusesBadShapesAndScales) {
  std::vector<float> x(24, 1.0f);
  EXPECT_THROW(quantize_nvfp4_packed(x.data(), 1, 24, 1.0f, false), Error);
  EXPECT_THROW(quantize_nvfp4_packed(x.data(), 1, 16, 0.0f, false), Error);
  EXPECT_THROW(quantize_nvfp4_packed(x.data(), 1, 16, -1.0f, false), Error);
}

}  // namespace
}  // namespace mixq
