// NVFP4 specifics: the §3.2 worked example down to the stored bytes, the
// two-level decode through the swizzle, and the layout helpers for
// checkpoints with linear scales or low-nibble-first codes.
#include <gtest/gtest.h>

#include "formats/nvfp4_layout.hpp"
#include "mixq/error.hpp"
#include "numeric/swizzle.hpp"
#include "test_format_helpers.hpp"

namespace mixq {
namespace {

using testing::quantized_layer;

TEST(Nvfp4Format, WorkedExampleStoredBytes) {
  std::vector<float> w(16, 0.0f);
  w[0] = 0.5f, w[1] = -1.0f, w[2] = 3.0f, w[3] = 0.25f;
  const auto layer = quantized_layer(*find_format("nvfp4"), w, 1, 16, {}, {0.0f});
  const TensorView& weight = layer->layer.tensor("weight");
  ASSERT_EQ(weight.shape, (Shape{16, 8}));
  EXPECT_EQ(static_cast<uint8_t>(weight.data[0]), 0x2C);
  EXPECT_EQ(static_cast<uint8_t>(weight.data[1]), 0x71);
  for (size_t i = 2; i < weight.data.size(); ++i) EXPECT_EQ(static_cast<uint8_t>(weight.data[i]), 0);
  const TensorView& scales = layer->layer.tensor("weight_scale");
  EXPECT_EQ(scales.dtype, DType::F8_E4M3);
  ASSERT_EQ(scales.shape, (Shape{128, 4}));
  EXPECT_EQ(static_cast<uint8_t>(scales.data[0]), 0x7E);  // 448
  const TensorView& global = layer->layer.tensor("weight_scale_2");
  EXPECT_EQ(global.shape, Shape{});
  EXPECT_EQ(testing::to_f32_first(global), 3.0f / 2688.0f);
  EXPECT_EQ(layer->layer.out_features, 1);
  EXPECT_EQ(layer->layer.in_features, 16);
  const auto deq = testing::dequantized(layer->layer);
  const float blk = (3.0f / 2688.0f) * 448.0f;
  EXPECT_EQ(deq[0], 1.0f * blk);
  EXPECT_EQ(deq[1], -2.0f * blk);
  EXPECT_EQ(deq[2], 6.0f * blk);
  EXPECT_EQ(deq[3], 0.5f * blk);
  EXPECT_NEAR(deq[2], 3.0f, 1e-5f);
}

// A hand-made layer: scale bytes chosen per (row, block) so that a wrong
// swizzle or nibble order shows up as wrong values.
struct HandLayer {
  std::unique_ptr<testing::OwnedLayer> owned;
  std::vector<float> expect;  // [rows, 32]
};

HandLayer hand_layer(int64_t rows, formats::Nvfp4Layout layout) {
  const int64_t k = 32, blocks = 2;
  std::vector<uint8_t> codes(rows * k), linear_scales(rows * blocks);
  std::vector<float> expect(rows * k);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) linear_scales[r * blocks + b] = static_cast<uint8_t>(0x30 + (r * 2 + b) % 40);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < k; ++c) {
      codes[r * k + c] = static_cast<uint8_t>((r * 7 + c * 3) % 16);
      expect[r * k + c] = e2m1_to_f32(codes[r * k + c]) * (0.5f * e4m3_to_f32(linear_scales[r * blocks + c / 16]));
    }
  std::vector<uint8_t> packed(rows * k / 2);
  for (size_t j = 0; j < packed.size(); ++j)
    packed[j] = layout.high_nibble_first ? static_cast<uint8_t>(codes[2 * j] << 4 | codes[2 * j + 1])
                                         : static_cast<uint8_t>(codes[2 * j + 1] << 4 | codes[2 * j]);
  const std::vector<uint8_t> scales =
      layout.swizzled_scales ? swizzle_scales(linear_scales.data(), rows, blocks) : linear_scales;
  std::vector<OwnedTensor> t;
  t.push_back(OwnedTensor{"weight", DType::U8, {rows, k / 2}, {}});
  t.back().data.resize(packed.size());
  std::memcpy(t.back().data.data(), packed.data(), packed.size());
  t.push_back(OwnedTensor{"weight_scale", DType::U8, {static_cast<int64_t>(scales.size())}, {}});
  t.back().data.resize(scales.size());
  std::memcpy(t.back().data.data(), scales.data(), scales.size());
  t.push_back(testing::f32_tensor("weight_scale_2", {1}, {0.5f}));
  return {testing::bind_layer(*find_format("nvfp4"), std::move(t)), expect};
}

TEST(Nvfp4Format, DecodesThroughSwizzleAndHighNibbleFirst) {
  auto hand = hand_layer(144, {});  // 144 rows: two row tiles
  validate_layer(hand.owned->layer);
  EXPECT_EQ(testing::dequantized(hand.owned->layer), hand.expect);
}

TEST(Nvfp4Layout, ForeignLayoutsDecodeAndConvert) {
  for (const formats::Nvfp4Layout layout : {formats::Nvfp4Layout{false, true}, formats::Nvfp4Layout{true, false},
                                            formats::Nvfp4Layout{false, false}}) {
    auto hand = hand_layer(144, layout);
    const Layer& layer = hand.owned->layer;
    const auto geo = formats::nvfp4_geometry(layer, layout);
    EXPECT_EQ(geo.rows, 144);
    EXPECT_EQ(geo.k_padded, 32);
    std::vector<float> out(144 * 32);
    formats::nvfp4_dequantize(layer, layout, out.data());
    EXPECT_EQ(out, hand.expect);
    // The comfy decoder reads the same bytes differently (or rejects them).
    std::vector<float> comfy(144 * 32);
    bool rejected = false;
    try {
      formats::nvfp4_dequantize(layer, {}, comfy.data());
    } catch (const Error&) {
      rejected = true;
    }
    EXPECT_TRUE(rejected || comfy != hand.expect);
    // Converted to the comfy layout, the standard decoder agrees.
    const auto converted = formats::nvfp4_to_comfy_layout(
        reinterpret_cast<const uint8_t*>(layer.tensor("weight").data.data()),
        reinterpret_cast<const uint8_t*>(layer.tensor("weight_scale").data.data()), 144, 32, layout);
    auto comfy_layer = hand_layer(144, {});
    EXPECT_TRUE(std::equal(converted.weight.begin(), converted.weight.end(),
                           reinterpret_cast<const uint8_t*>(comfy_layer.owned->tensors[0].data.data())));
    EXPECT_TRUE(std::equal(converted.scales.begin(), converted.scales.end(),
                           reinterpret_cast<const uint8_t*>(comfy_layer.owned->tensors[1].data.data())));
  }
  EXPECT_EQ(formats::nvfp4_scale_bytes(144, 32, {true, true}), 256 * 4);
  EXPECT_EQ(formats::nvfp4_scale_bytes(144, 32, {false, true}), 144 * 2);
}

TEST(Nvfp4Format, PreQuantScaleGivesLogicalK) {
  const int64_t n = 4, k = 70;
  const auto w = std::vector<float>(n * k, 0.75f);
  const auto& f = *find_format("nvfp4");
  QuantizedLayer q = f.quantize(w.data(), n, k, apply_defaults(f, {}));
  q.tensors.push_back(testing::f32_tensor("pre_quant_scale", {k}, std::vector<float>(k, 1.0f)));
  q.tensors.push_back(testing::f32_tensor("bias", {n}, std::vector<float>(n, 0.0f)));
  auto layer = testing::bind_layer(f, std::move(q.tensors));
  validate_layer(layer->layer);
  EXPECT_EQ(layer->layer.out_features, n);
  EXPECT_EQ(layer->layer.in_features, k);
  EXPECT_TRUE(layer->layer.warnings.empty());
  for (float v : testing::dequantized(layer->layer)) EXPECT_NEAR(v, 0.75f, 1e-6f);
}

}  // namespace
}  // namespace mixq
