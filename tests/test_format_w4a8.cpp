// asym_w4a8_int8 record (docs/FORMATS.md §3.7): the bit-exact decode with the
// §3.7 formula on hand-picked numbers, dequantize in both bases, the three
// quantizer modes on awkward shapes, and validation errors.
#include <gtest/gtest.h>

#include <cmath>

#include "formats/w4a8.hpp"
#include "mixq/error.hpp"
#include "numeric/hadamard.hpp"
#include "support/test_support.hpp"
#include "test_format_helpers.hpp"

namespace mixq {
namespace {
using testing::bind_layer;
using testing::dequantized;
using testing::f32_tensor;

const FormatTraits& W4a8() { return formats::asym_w4a8_int8_format(); }

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * double(a[i] - b[i]), den += double(b[i]) * b[i];
  return std::sqrt(num / den);
}

TEST(W4a8Decode, SpecFormulaUniformLevels) {
  // e4m3 bytes: 0x48 = 4, 0x42 = 2.5, 0x7E = 448, 0x6C = 96.
  ASSERT_EQ(e4m3_to_f32(0x48), 4.0f);
  ASSERT_EQ(e4m3_to_f32(0x42), 2.5f);
  EXPECT_EQ(formats::w4a8_decode_code(0, 4.0f, nullptr), -32);   // (0-8)·4
  EXPECT_EQ(formats::w4a8_decode_code(15, 4.0f, nullptr), 28);   // 7·4
  EXPECT_EQ(formats::w4a8_decode_code(8, 4.0f, nullptr), 0);
  // rint ties to even: 1·2.5 -> 2, 3·2.5 = 7.5 -> 8, -1·2.5 -> -2, 5·2.5 = 12.5 -> 12.
  EXPECT_EQ(formats::w4a8_decode_code(9, 2.5f, nullptr), 2);
  EXPECT_EQ(formats::w4a8_decode_code(11, 2.5f, nullptr), 8);
  EXPECT_EQ(formats::w4a8_decode_code(7, 2.5f, nullptr), -2);
  EXPECT_EQ(formats::w4a8_decode_code(13, 2.5f, nullptr), 12);
  // clamp to ±127 (never -128).
  EXPECT_EQ(formats::w4a8_decode_code(15, 448.0f, nullptr), 127);
  EXPECT_EQ(formats::w4a8_decode_code(0, 448.0f, nullptr), -127);
}

TEST(W4a8Decode, SpecFormulaCodebook) {
  const float* book = formats::kW4a8LloydMax;
  EXPECT_EQ(book[0], -0.980602f);
  EXPECT_EQ(book[15], 0.980671f);
  EXPECT_EQ(formats::w4a8_decode_code(0, 96.0f, book), -94);   // -94.1378
  EXPECT_EQ(formats::w4a8_decode_code(15, 96.0f, book), 94);   // 94.1444
  EXPECT_EQ(formats::w4a8_decode_code(8, 96.0f, book), 5);     // 5.0439
  EXPECT_EQ(formats::w4a8_decode_code(7, 96.0f, book), -5);    // -4.8691
  // Every code at every finite e4m3 scale: exactly the fp32 formula.
  for (int byte = 0; byte < 256; ++byte) {
    const float s = e4m3_to_f32(static_cast<uint8_t>(byte));
    if (!std::isfinite(s)) continue;
    for (uint8_t c = 0; c < 16; ++c) {
      const float want = std::fmin(127.0f, std::fmax(-127.0f, std::nearbyint(book[c] * s)));
      ASSERT_EQ(formats::w4a8_decode_code(c, s, book), static_cast<int8_t>(want)) << byte << " " << int(c);
    }
  }
}

// N = 2, K = 32, gs = 16, G = 16; codes 0..15 twice per row.
std::unique_ptr<testing::OwnedLayer> hand_layer(DType rel_dtype, bool codebook = false) {
  std::vector<std::byte> codes(2 * 16);
  for (int i = 0; i < 32; ++i) codes[i] = static_cast<std::byte>(((2 * i) & 15) | (((2 * i + 1) & 15) << 4));
  const std::vector<float> rel = {4.0f, 2.5f, 96.0f, 448.0f};
  std::vector<OwnedTensor> t;
  t.push_back(OwnedTensor{"weight", DType::I8, {2, 16}, codes});
  if (rel_dtype == DType::U8) {
    auto bytes = from_f32(DType::F8_E4M3, rel);
    t.push_back(OwnedTensor{"weight_s_rel", DType::U8, {2, 2}, bytes});
  } else {
    t.push_back(OwnedTensor{"weight_s_rel", rel_dtype, {2, 2}, from_f32(rel_dtype, rel)});
  }
  t.push_back(f32_tensor("weight_s_channel", {2}, {0.5f, 0.25f}));
  if (codebook)
    t.push_back(f32_tensor("weight_codebook", {16},
                           std::vector<float>(formats::kW4a8LloydMax, formats::kW4a8LloydMax + 16)));
  auto l = bind_layer(W4a8(), std::move(t), {{"group_size", 16}, {"convrot_groupsize", 16}});
  validate_layer(l->layer);
  return l;
}

TEST(W4a8Record, DequantizeStoredIsW8TimesChannelScale) {
  for (DType dt : {DType::F8_E4M3, DType::U8, DType::F32}) {
    auto l = hand_layer(dt);
    EXPECT_EQ(l->layer.out_features, 2);
    EXPECT_EQ(l->layer.in_features, 32);
    const std::vector<float> w = dequantized(l->layer, Basis::stored);
    const float rel[4] = {4.0f, 2.5f, 96.0f, 448.0f}, ch[2] = {0.5f, 0.25f};
    for (int r = 0; r < 2; ++r)
      for (int k = 0; k < 32; ++k) {
        const uint8_t code = static_cast<uint8_t>(k & 15);
        const float want = formats::w4a8_decode_code(code, rel[r * 2 + k / 16], nullptr) * ch[r];
        ASSERT_EQ(w[r * 32 + k], want) << dtype_name(dt) << " " << r << "," << k;
      }
    // Row 0 group 0 (s_rel 4): codes 0..15 -> -32..28 step 4, times 0.5.
    EXPECT_EQ(w[0], -16.0f);
    EXPECT_EQ(w[15], 14.0f);
  }
}

TEST(W4a8Record, OriginalBasisUndoesTheRotation) {
  auto l = hand_layer(DType::F8_E4M3, true);
  std::vector<float> stored = dequantized(l->layer, Basis::stored);
  const std::vector<float> original = dequantized(l->layer, Basis::original);
  hadamard_rotate(stored.data(), 2, 32, 16);
  for (size_t i = 0; i < stored.size(); ++i) EXPECT_EQ(original[i], stored[i]);
}

TEST(W4a8Record, NonFiniteRelativeScaleIsAnError) {
  auto l = hand_layer(DType::U8);
  const_cast<std::byte&>(l->tensors[1].data[1]) = std::byte{0x7F};  // E4M3 NaN
  std::vector<float> out(64);
  EXPECT_THROW(W4a8().dequantize(l->layer, Basis::stored, out.data()), Error);
}

struct Shape3 {
  int64_t n, k, gs, g;
};

TEST(W4a8Quantize, ModesRoundTripOnAwkwardShapes) {
  for (const Shape3 s : {Shape3{7, 48, 8, 16}, Shape3{33, 128, 32, 64}, Shape3{48, 512, 16, 256}}) {
    const std::vector<float> w = testing::random_floats(s.n * s.k, 11 + s.n, 0.05f);
    for (const char* mode : {"codebook", "uniform", "asymmetric"}) {
      SCOPED_TRACE(std::string(mode) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k));
      const nlohmann::json params = {{"group_size", s.gs}, {"convrot_groupsize", s.g}, {"mode", mode}};
      auto l = testing::quantized_layer(W4a8(), w, s.n, s.k, params);
      EXPECT_EQ(l->layer.in_features, s.k);
      EXPECT_EQ(l->layer.find("weight_codebook") != nullptr, std::string(mode) == "codebook");
      EXPECT_EQ(l->layer.find("weight_correction") != nullptr, std::string(mode) == "asymmetric");
      const std::vector<float> back = dequantized(l->layer);
      // comfy-kitchen's test bound: weight relative error < 0.2 (4-bit levels give ~0.1).
      EXPECT_LT(rel_l2(back, w), 0.2);
      // Deterministic.
      auto again = testing::quantized_layer(W4a8(), w, s.n, s.k, params);
      for (size_t i = 0; i < l->tensors.size(); ++i) EXPECT_EQ(l->tensors[i].data, again->tensors[i].data);
    }
  }
}

TEST(W4a8Quantize, MarkerAndStoredTensors) {
  const std::vector<float> w = testing::random_floats(16 * 256, 3, 0.1f);
  const QuantizedLayer q = W4a8().quantize(w.data(), 16, 256, apply_defaults(W4a8(), {}));
  EXPECT_EQ(q.marker["format"], "asym_w4a8_int8");
  EXPECT_EQ(q.marker["group_size"], 16);
  EXPECT_EQ(q.marker["convrot_groupsize"], 256);
  EXPECT_EQ(q.marker["convrot"], true);
  ASSERT_EQ(q.tensors.size(), 4u);
  EXPECT_EQ(q.tensors[0].dtype, DType::I8);
  EXPECT_EQ(q.tensors[0].shape, (Shape{16, 128}));
  EXPECT_EQ(q.tensors[1].dtype, DType::F8_E4M3);
  EXPECT_EQ(q.tensors[1].shape, (Shape{16, 16}));
  EXPECT_EQ(q.tensors[2].shape, (Shape{16}));
  EXPECT_EQ(q.tensors[3].shape, (Shape{16}));
  // s_channel = max|shifted| / 127 makes the largest decoded level hit ±127 or close.
  auto l = testing::quantized_layer(W4a8(), w, 16, 256, {});
  const formats::W4a8Decoded d = formats::w4a8_decode(l->layer);
  int biggest = 0;
  for (int8_t v : d.w8) biggest = std::max(biggest, std::abs(int(v)));
  EXPECT_GE(biggest, 100);
  EXPECT_LE(biggest, 127);
  EXPECT_THROW(W4a8().quantize(w.data(), 16, 256, {{"mode", "kmeans"}}), Error);
  EXPECT_THROW(W4a8().quantize(w.data(), 16, 200, {}), Error);
}

TEST(W4a8Record, TpUnitAndMethod) {
  auto l = hand_layer(DType::F8_E4M3);
  EXPECT_EQ(W4a8().tp_input_unit(l->layer), 16);  // lcm(16, gs 16, G 16)
  EXPECT_EQ(W4a8().method(l->layer), "asym_w4a8_int8");
  const std::vector<float> w = testing::random_floats(4 * 256, 5, 0.1f);
  auto d = testing::quantized_layer(W4a8(), w, 4, 256, {{"group_size", 32}});
  EXPECT_EQ(W4a8().tp_input_unit(d->layer), 256);  // lcm(16, 32, 256); SGLang: 256 yes, 128 no
  auto a = testing::quantized_layer(W4a8(), w, 4, 256, {{"mode", "asymmetric"}});
  EXPECT_EQ(W4a8().method(a->layer), "asym_w4a8_int8:float_correction");
  auto f = testing::quantized_layer(W4a8(), w, 4, 256, {{"full_precision_matrix_mult", true}});
  EXPECT_EQ(W4a8().method(f->layer), "asym_w4a8_int8:full_precision");
}

void expect_rejected(std::vector<OwnedTensor> t, const nlohmann::json& params, const std::string& needle) {
  auto l = bind_layer(W4a8(), std::move(t), params);
  try {
    validate_layer(l->layer);
    ADD_FAILURE() << "accepted; expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("blk.proj"), std::string::npos) << e.what();
  }
}

std::vector<OwnedTensor> good(int64_t n, int64_t k, int64_t gs) {
  std::vector<OwnedTensor> t;
  t.push_back(testing::zero_tensor("weight", DType::I8, {n, k / 2}));
  t.push_back(testing::zero_tensor("weight_s_rel", DType::F8_E4M3, {n, k / gs}));
  t.push_back(testing::zero_tensor("weight_s_channel", DType::F32, {n}));
  return t;
}

TEST(W4a8Record, ValidationErrors) {
  {
    auto t = good(4, 256, 16);
    t[1] = testing::zero_tensor("weight_s_rel", DType::F8_E4M3, {16, 4});
    expect_rejected(std::move(t), {}, "[4, 16]");
  }
  {
    auto t = good(4, 256, 16);
    t[2] = testing::zero_tensor("weight_s_channel", DType::F16, {4});
    expect_rejected(std::move(t), {}, "F32");
  }
  {
    auto t = good(4, 256, 16);
    t[2] = testing::zero_tensor("weight_s_channel", DType::F32, {4, 1});
    expect_rejected(std::move(t), {}, "[4]");
  }
  expect_rejected(good(4, 128, 16), {}, "convrot_groupsize 256");              // K % G
  expect_rejected(good(4, 256, 16), {{"convrot_groupsize", 32}}, "power of 4");
  expect_rejected(good(4, 240, 12), {{"group_size", 12}, {"convrot_groupsize", 16}}, "group_size");
  {
    auto t = good(4, 256, 16);
    t.erase(t.begin() + 2);
    expect_rejected(std::move(t), {}, "missing");
  }
  {
    auto t = good(4, 256, 16);
    t.push_back(testing::zero_tensor("weight_codebook", DType::F32, {15}));
    expect_rejected(std::move(t), {}, "16 levels");
  }
  {
    auto t = good(4, 256, 16);
    t.push_back(testing::zero_tensor("weight_correction", DType::F32, {4, 16}));
    expect_rejected(std::move(t), {}, "[16, 4]");
  }
  {
    auto l = bind_layer(W4a8(), good(4, 256, 16), {{"convrot", false}});
    validate_layer(l->layer);
    ASSERT_EQ(l->layer.warnings.size(), 1u);
    EXPECT_NE(l->layer.warnings[0].find("convrot=false"), std::string::npos);
  }
}

}  // namespace
}  // namespace mixq
