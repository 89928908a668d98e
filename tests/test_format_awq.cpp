// awq_w4a16 record (docs/FORMATS.md §3.9): the dequantize formula on a hand
// example, the min/max RTN quantizer on awkward shapes, validation errors.
#include <gtest/gtest.h>

#include <cmath>

#include "formats/awq.hpp"
#include "mixq/error.hpp"
#include "support/test_support.hpp"
#include "test_format_helpers.hpp"

namespace mixq {
namespace {
using testing::bind_layer;

const FormatTraits& Awq() { return formats::awq_w4a16_format(); }

TEST(AwqRecord, DequantizeIsQMinus8TimesScalePlusZero) {
  // N = 2, K = 4, G = 2: bytes low nibble = even k.
  std::vector<std::byte> codes = {std::byte{0x0F}, std::byte{0x83}, std::byte{0x21}, std::byte{0xA7}};
  // scale / zeros [K/G, N] = [2, 2] (BF16-exact values).
  std::vector<OwnedTensor> t;
  t.push_back(OwnedTensor{"weight", DType::I8, {2, 2}, codes});
  t.push_back(OwnedTensor{"weight_scale", DType::BF16, {2, 2}, from_f32(DType::BF16, std::vector<float>{0.5f, 0.25f, 2.0f, 1.0f})});
  t.push_back(OwnedTensor{"weight_zeros", DType::BF16, {2, 2}, from_f32(DType::BF16, std::vector<float>{1.0f, -1.0f, 0.0f, 0.5f})});
  auto l = bind_layer(Awq(), std::move(t), {{"group_size", 2}});
  validate_layer(l->layer);
  EXPECT_EQ(l->layer.out_features, 2);
  EXPECT_EQ(l->layer.in_features, 4);
  const std::vector<float> w = testing::dequantized(l->layer);
  // Row 0 codes: 15, 0, 3, 8; row 1: 1, 2, 7, 10.
  const std::vector<float> want = {(15 - 8) * 0.5f + 1.0f, (0 - 8) * 0.5f + 1.0f, (3 - 8) * 2.0f + 0.0f,
                                   (8 - 8) * 2.0f + 0.0f,  (1 - 8) * 0.25f - 1.0f, (2 - 8) * 0.25f - 1.0f,
                                   (7 - 8) * 1.0f + 0.5f,  (10 - 8) * 1.0f + 0.5f};
  EXPECT_EQ(w, want);
  EXPECT_EQ(Awq().tp_input_unit(l->layer), 2);
  EXPECT_EQ(Awq().method(l->layer), "awq_w4a16");
}

TEST(AwqQuantize, RoundTripOnAwkwardShapes) {
  for (auto [n, k, g] : {std::tuple<int64_t, int64_t, int64_t>{7, 64, 64}, {33, 96, 32}, {40, 320, 64}, {5, 12, 6}}) {
    SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(k) + " g" + std::to_string(g));
    const std::vector<float> w = testing::random_floats(n * k, 7 + n, 0.05f);
    auto l = testing::quantized_layer(Awq(), w, n, k, {{"group_size", g}});
    EXPECT_EQ(l->layer.params["group_size"], g);
    const std::vector<float> back = testing::dequantized(l->layer);
    // RTN with 15 steps per group: |err| <= step/2 + bf16 rounding of scale and zero.
    for (int64_t r = 0; r < n; ++r)
      for (int64_t grp = 0; grp < k / g; ++grp) {
        float lo = 1e30f, hi = -1e30f;
        for (int64_t i = 0; i < g; ++i) lo = std::min(lo, w[r * k + grp * g + i]), hi = std::max(hi, w[r * k + grp * g + i]);
        const float step = (hi - lo) / 15;
        for (int64_t i = 0; i < g; ++i) {
          const int64_t idx = r * k + grp * g + i;
          ASSERT_LE(std::fabs(back[idx] - w[idx]), 0.5f * step * 1.05f + 0.02f * std::fabs(w[idx]) + 1e-6f);
        }
      }
  }
}

void expect_rejected(std::vector<OwnedTensor> t, const nlohmann::json& params, const std::string& needle) {
  auto l = bind_layer(Awq(), std::move(t), params);
  try {
    validate_layer(l->layer);
    ADD_FAILURE() << "accepted; expected '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::vector<OwnedTensor> good(int64_t n, int64_t k, int64_t g, DType dt = DType::BF16) {
  std::vector<OwnedTensor> t;
  t.push_back(testing::zero_tensor("weight", DType::I8, {n, k / 2}));
  t.push_back(testing::zero_tensor("weight_scale", dt, {k / g, n}));
  t.push_back(testing::zero_tensor("weight_zeros", dt, {k / g, n}));
  return t;
}

TEST(AwqRecord, ValidationErrors) {
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    auto l = bind_layer(Awq(), good(8, 128, 64, dt));
    EXPECT_NO_THROW(validate_layer(l->layer));
  }
  expect_rejected(good(8, 96, 64), {}, "not divisible by group_size 64");
  expect_rejected(good(8, 90, 3), {{"group_size", 3}}, "even");
  {
    auto t = good(8, 128, 64);
    t[1] = testing::zero_tensor("weight_scale", DType::BF16, {8, 2});  // [N, K/G]: transposed
    expect_rejected(std::move(t), {}, "[2, 8]");
  }
  {
    auto t = good(8, 128, 64);
    t[2] = testing::zero_tensor("weight_zeros", DType::I8, {2, 8});
    expect_rejected(std::move(t), {}, "weight_zeros");
  }
  {
    auto t = good(8, 128, 64);
    t.pop_back();
    expect_rejected(std::move(t), {}, "missing");
  }
  EXPECT_THROW(Awq().quantize(std::vector<float>(8 * 100).data(), 8, 100, {{"group_size", 64}}), Error);
}

}  // namespace
}  // namespace mixq
