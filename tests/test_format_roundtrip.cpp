// Per-format property tests on awkward shapes: quantize -> dequantize within
// comfy-kitchen's test bounds (docs/FORMATS.md §3), deterministic quantization, and a written-then-read
// checkpoint dequantizes exactly like the in-memory layer.
#include <gtest/gtest.h>

#include <cmath>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "numeric/hadamard.hpp"
#include "mixq/layer.hpp"
#include "mixq/marker.hpp"
#include "support/test_support.hpp"
#include "test_format_helpers.hpp"

namespace mixq {
namespace {

using testing::dequantized;
using testing::mean_error_over_max;
using testing::quantized_layer;
using testing::random_floats;

const FormatTraits& format(std::string_view name) {
  const FormatTraits* f = find_format(name);
  if (!f) throw Error("no format " + std::string(name));
  return *f;
}

// |a - b| <= atol + rtol·|b| everywhere (torch.allclose).
void expect_allclose(const std::vector<float>& a, const std::vector<float>& b, double rtol, double atol) {
  ASSERT_EQ(a.size(), b.size());
  size_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(double(a[i]) - b[i]) <= atol + rtol * std::fabs(double(b[i])))) ++bad;
  EXPECT_EQ(bad, 0u) << "of " << a.size();
}

// max over 16-element blocks of max |a - b| / max |b| (b: [n, k_source],
// a: [n, k] with k >= k_source, the padding compared against 0).
double worst_block_error(const std::vector<float>& a, const std::vector<float>& b, int64_t n, int64_t k,
                         int64_t k_source) {
  double worst = 0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c0 = 0; c0 < k; c0 += 16) {
      double amax = 0, err = 0;
      for (int64_t c = c0; c < std::min(k, c0 + 16); ++c) {
        const double want = c < k_source ? b[r * k_source + c] : 0.0;
        amax = std::max(amax, std::fabs(want));
        err = std::max(err, std::fabs(double(a[r * k + c]) - want));
      }
      if (amax > 0) worst = std::max(worst, err / amax);
    }
  return worst;
}

// NVFP4 per block: the step between E2M1 levels is at most 2 (4 -> 6), so
// rounding moves an element by at most T = g·S, the block's scale, which is
// amax/6 up to the E4M3 rounding of S (at most 1/16 relative; a scale rounded
// down clamps by less: amax/16). Bound: (17/16)·amax/6 = 0.177·amax;
// measured on the shapes below: 0.146-0.1725.
constexpr double kNvfp4BlockBound = 17.0 / 16.0 / 6.0;

void expect_deterministic(const FormatTraits& f, const std::vector<float>& w, int64_t n, int64_t k,
                          const nlohmann::json& params) {
  const auto a = f.quantize(w.data(), n, k, apply_defaults(f, params));
  const auto b = f.quantize(w.data(), n, k, apply_defaults(f, params));
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].name, b.tensors[i].name);
    EXPECT_EQ(a.tensors[i].shape, b.tensors[i].shape);
    EXPECT_TRUE(a.tensors[i].data == b.tensors[i].data) << a.tensors[i].name;
  }
  EXPECT_EQ(a.marker, b.marker);
}

// Writes the quantizer's output as layer "model.layer" of a checkpoint, reads
// it back through markers and layer grouping, and compares dequantization.
void expect_file_roundtrip(const FormatTraits& f, const std::vector<float>& w, int64_t n, int64_t k,
                           const nlohmann::json& params, const std::vector<float>& bias, Basis basis) {
  const auto mem = quantized_layer(f, w, n, k, params, bias);
  const auto expect = dequantized(mem->layer, basis);

  auto q = f.quantize(w.data(), n, k, apply_defaults(f, params));
  testing::CheckpointBuilder builder;
  for (auto& t : q.tensors) {
    t.name = "model.layer." + t.name;
    builder.add(std::move(t));
  }
  if (!bias.empty()) builder.add_float("model.layer.bias", DType::F32, {static_cast<int64_t>(bias.size())}, bias);
  builder.add_marker("model.layer", q.marker.dump());
  const auto path = testing::temp_dir("format_roundtrip") / "q.safetensors";
  builder.write(path);

  const Checkpoint ckpt = Checkpoint::open(path.string());
  const LayerSet set = group_layers(ckpt, collect_markers(ckpt));
  const Layer* layer = nullptr;
  for (const Layer& l : set.layers)
    if (l.prefix == "model.layer") layer = &l;
  ASSERT_NE(layer, nullptr);
  ASSERT_EQ(layer->problem, "");
  ASSERT_EQ(layer->format, &f);
  EXPECT_EQ(layer->out_features, mem->layer.out_features);
  EXPECT_EQ(layer->in_features, mem->layer.in_features);
  EXPECT_TRUE(set.other_tensors.empty());
  const auto got = dequantized(*layer, basis);
  ASSERT_EQ(got.size(), expect.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], expect[i]) << i;
}

TEST(Fp8Roundtrip, E4M3AndE5M2WithinSpecTolerance) {
  const int64_t n = 37, k = 200;
  const auto w = random_floats(n * k, 1);
  for (const char* name : {"float8_e4m3fn", "float8_e5m2"}) {
    const auto layer = quantized_layer(format(name), w, n, k);
    EXPECT_EQ(layer->layer.out_features, n);
    EXPECT_EQ(layer->layer.in_features, k);
    expect_allclose(dequantized(layer->layer), w, 0.1, 0.1);  // §3.1 roundtrip of randn
    expect_deterministic(format(name), w, n, k, {});
    expect_file_roundtrip(format(name), w, n, k, {}, random_floats(n, 2), Basis::original);
  }
}

TEST(Fp8Roundtrip, ScaleIsAmaxOverMax) {
  std::vector<float> w = {1.0f, -896.0f, 3.0f, 0.5f};
  const auto layer = quantized_layer(format("float8_e4m3fn"), w, 2, 2);
  const auto deq = dequantized(layer->layer);
  EXPECT_EQ(deq[1], -896.0f);  // amax maps to ±448 exactly
  EXPECT_EQ(deq[0], 1.0f);
  const auto zero = quantized_layer(format("float8_e4m3fn"), std::vector<float>(6, 0.0f), 2, 3);
  for (float v : dequantized(zero->layer)) EXPECT_EQ(v, 0.0f);
}

TEST(Nvfp4Roundtrip, AwkwardShapesWithinSpecTolerance) {
  struct Case {
    int64_t n, k;
  };
  for (const Case c : {Case{37, 80}, Case{96, 80}, Case{16, 16}, Case{130, 48}}) {
    auto w = random_floats(c.n * c.k, 3 + c.n);
    for (auto& v : w) v *= 4.0f;  // §3.2 roundtrip test uses 4·randn
    const auto bias = random_floats(c.n, 4);
    const auto layer = quantized_layer(format("nvfp4"), w, c.n, c.k, {}, bias);
    EXPECT_EQ(layer->layer.out_features, c.n);  // from the bias
    EXPECT_EQ(layer->layer.in_features, c.k);   // multiple of 16: stored K is exact
    EXPECT_LE(worst_block_error(dequantized(layer->layer), w, c.n, c.k, c.k), kNvfp4BlockBound);
    EXPECT_LT(mean_error_over_max(dequantized(layer->layer), w), 0.05);
    expect_deterministic(format("nvfp4"), w, c.n, c.k, {});
    expect_file_roundtrip(format("nvfp4"), w, c.n, c.k, {}, bias, Basis::original);
  }
}

TEST(Nvfp4Roundtrip, UnalignedKReportsPaddedKWithZeroColumns) {
  const int64_t n = 5, k = 70;  // stored [16, 40] bytes, K padded to 80
  const auto w = random_floats(n * k, 5);
  const auto layer = quantized_layer(format("nvfp4"), w, n, k, {}, random_floats(n, 6));
  EXPECT_EQ(layer->layer.out_features, n);
  EXPECT_EQ(layer->layer.in_features, 80);
  EXPECT_FALSE(layer->layer.warnings.empty());
  const auto deq = dequantized(layer->layer);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = k; c < 80; ++c) EXPECT_EQ(deq[r * 80 + c], 0.0f);
  EXPECT_LE(worst_block_error(deq, w, n, 80, k), kNvfp4BlockBound);
}

TEST(Mxfp8Roundtrip, AwkwardShapes) {
  const int64_t n = 45, k = 96;
  const auto w = random_floats(n * k, 7);
  const auto bias = random_floats(n, 8);
  const auto layer = quantized_layer(format("mxfp8"), w, n, k, {}, bias);
  EXPECT_EQ(layer->layer.out_features, n);
  EXPECT_EQ(layer->layer.in_features, k);
  // E4M3 keeps 3 mantissa bits: relative error <= 1/16 (plus subnormal steps).
  expect_allclose(dequantized(layer->layer), w, 1.0 / 16, 1e-3);
  expect_deterministic(format("mxfp8"), w, n, k, {});
  expect_file_roundtrip(format("mxfp8"), w, n, k, {}, bias, Basis::original);
  // K = 70 pads to 96; no bias: stored N 64 with a warning.
  const auto w2 = random_floats(20 * 70, 9);
  const auto padded = quantized_layer(format("mxfp8"), w2, 20, 70);
  EXPECT_EQ(padded->layer.out_features, 32);
  EXPECT_EQ(padded->layer.in_features, 96);
  EXPECT_GE(padded->layer.warnings.size(), 2u);
}

// comfy-kitchen saves MXFP8 block scales with safetensors dtype F8_E8M0; the
// same bytes as U8 must give the same weight (docs/FORMATS.md §1.3: "U8 or the
// native fp8 dtype").
TEST(Mxfp8Roundtrip, ScalesStoredAsE8M0) {
  const int64_t n = 32, k = 64;
  const auto w = random_floats(n * k, 11);
  auto as_u8 = quantized_layer(format("mxfp8"), w, n, k);
  std::vector<OwnedTensor> tensors = as_u8->tensors;
  for (OwnedTensor& t : tensors)
    if (t.name == "weight_scale") {
      ASSERT_EQ(t.dtype, DType::U8);
      t.dtype = DType::F8_E8M0;
    }
  auto as_e8m0 = testing::bind_layer(format("mxfp8"), std::move(tensors));
  EXPECT_NO_THROW(validate_layer(as_e8m0->layer));
  EXPECT_EQ(dequantized(as_e8m0->layer), dequantized(as_u8->layer));
}

TEST(Int8Roundtrip, TensorwiseAndRowwise) {
  const int64_t n = 37, k = 200;
  const auto w = random_floats(n * k, 10);
  const auto rowwise = quantized_layer(format("int8_tensorwise"), w, n, k);
  EXPECT_EQ(rowwise->layer.tensor("weight_scale").shape, (Shape{n, 1}));
  EXPECT_EQ(format("int8_tensorwise").method(rowwise->layer), "int8_rowwise");
  EXPECT_LT(mean_error_over_max(dequantized(rowwise->layer), w), 0.02);  // §3.4
  const auto tensorwise = quantized_layer(format("int8_tensorwise"), w, n, k, {{"per_channel", false}});
  EXPECT_EQ(tensorwise->layer.tensor("weight_scale").shape, Shape{});
  EXPECT_EQ(format("int8_tensorwise").method(tensorwise->layer), "int8_tensorwise");
  EXPECT_LT(mean_error_over_max(dequantized(tensorwise->layer), w), 0.02);
  expect_deterministic(format("int8_tensorwise"), w, n, k, {});
  expect_file_roundtrip(format("int8_tensorwise"), w, n, k, {}, random_floats(n, 11), Basis::original);
  expect_file_roundtrip(format("int8_tensorwise"), w, n, k, {{"per_channel", false}}, {}, Basis::original);
}

TEST(Int8Roundtrip, ConvRotBasesAndBound) {
  const int64_t n = 96, k = 512;
  const nlohmann::json params = {{"convrot", true}, {"convrot_groupsize", 256}};
  const auto w = random_floats(n * k, 12);
  const auto layer = quantized_layer(format("int8_tensorwise"), w, n, k, params);
  EXPECT_EQ(format("int8_tensorwise").method(layer->layer), "int8_convrot");
  EXPECT_EQ(format("int8_tensorwise").tp_input_unit(layer->layer), 256);
  const auto original = dequantized(layer->layer, Basis::original);
  EXPECT_LT(mean_error_over_max(original, w), 0.02);  // §3.5
  // The stored basis is the rotated weight: rotating it back gives `original`.
  auto stored = dequantized(layer->layer, Basis::stored);
  auto rotated = w;
  hadamard_rotate(rotated.data(), n, k, 256);
  EXPECT_LT(mean_error_over_max(stored, rotated), 0.02);
  EXPECT_GT(mean_error_over_max(stored, w), 0.1);  // really a different basis
  hadamard_rotate(stored.data(), n, k, 256);
  for (size_t i = 0; i < stored.size(); ++i) ASSERT_NEAR(stored[i], original[i], 1e-6);
  expect_deterministic(format("int8_tensorwise"), w, n, k, params);
  expect_file_roundtrip(format("int8_tensorwise"), w, n, k, params, {}, Basis::original);
  expect_file_roundtrip(format("int8_tensorwise"), w, n, k, params, {}, Basis::stored);
}

TEST(ConvRotW4A4Roundtrip, Int4AndInt8LinearDtype) {
  const int64_t n = 96, k = 512;
  const auto w = random_floats(n * k, 13);
  for (const char* dtype : {"int4", "int8"}) {
    const nlohmann::json params = {{"convrot_groupsize", 256}, {"linear_dtype", dtype}};
    const auto layer = quantized_layer(format("convrot_w4a4"), w, n, k, params);
    EXPECT_EQ(layer->layer.tensor("weight").shape, (Shape{n, k / 2}));
    EXPECT_EQ(layer->layer.tensor("weight_scale").shape, (Shape{n}));
    EXPECT_EQ(format("convrot_w4a4").method(layer->layer), std::string("convrot_w4a4:") + dtype);
    EXPECT_LT(mean_error_over_max(dequantized(layer->layer), w), 0.04);  // §3.6
    expect_deterministic(format("convrot_w4a4"), w, n, k, params);
    expect_file_roundtrip(format("convrot_w4a4"), w, n, k, params, random_floats(n, 14), Basis::original);
  }
  // Codes stay in [-7, 7] (never -8) and are packed low nibble first.
  const auto layer = quantized_layer(format("convrot_w4a4"), w, n, k, {{"convrot_groupsize", 64}});
  const auto& bytes = layer->tensors[0].data;
  for (std::byte b : bytes) {
    EXPECT_NE(static_cast<int>(b) & 0x0F, 8);
    EXPECT_NE(static_cast<int>(b) >> 4, 8);
  }
  auto stored = dequantized(layer->layer, Basis::stored);
  const float s0 = testing::to_f32_first(layer->layer.tensor("weight_scale"));
  const int lo = static_cast<int>(bytes[0]) & 0x0F, hi = static_cast<int>(bytes[0]) >> 4;
  EXPECT_EQ(stored[0], (lo >= 8 ? lo - 16 : lo) * s0);
  EXPECT_EQ(stored[1], (hi >= 8 ? hi - 16 : hi) * s0);
}

TEST(UnquantizedRecord, DequantizesFloatWeights) {
  const auto w = random_floats(6 * 5, 15);
  const auto layer = quantized_layer(unquantized_format(), w, 6, 5, {{"dtype", "BF16"}});
  EXPECT_EQ(layer->layer.tensor("weight").dtype, DType::BF16);
  const auto deq = dequantized(layer->layer);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(deq[i], round_to(DType::BF16, w[i]));
  EXPECT_EQ(unquantized_format().method(layer->layer), "unquantized");
}

}  // namespace
}  // namespace mixq
