// The format table: lookup, defaults, methods, TP units, canonical markers,
// and validation errors (each a clear mixq::Error naming layer and tensor).
#include <gtest/gtest.h>

#include "linear/runtime_table.hpp"
#include "mixq/error.hpp"
#include "test_format_helpers.hpp"

namespace mixq {
namespace {

using nlohmann::json;
using testing::bind_layer;
using testing::f32_tensor;
using testing::zero_tensor;

const FormatTraits& format(std::string_view name) {
  const FormatTraits* f = find_format(name);
  if (!f) throw Error("no format " + std::string(name));
  return *f;
}

// Validates and expects an Error whose message contains every `needle`.
void expect_invalid(Layer& layer, std::initializer_list<std::string> needles) {
  try {
    validate_layer(layer);
    ADD_FAILURE() << "layer validated; expected an error containing " << *needles.begin();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
}

// The runtime table has exactly one row per format record, and no row for a
// name the format table does not know.
TEST(Registry, RuntimeTableCoversEveryFormatOnce) {
  for (const FormatTraits* f : all_formats()) {
    int rows = 0;
    for (const mixq::linear::FormatRuntime& row : mixq::linear::runtime_table()) rows += row.format == f->name;
    EXPECT_EQ(rows, 1) << f->name;
  }
  for (const mixq::linear::FormatRuntime& row : mixq::linear::runtime_table())
    EXPECT_TRUE(find_format(row.format) != nullptr || row.format == unquantized_format().name) << row.format;
}

TEST(Registry, LookupAndOrder) {
  for (const char* name : {"float8_e4m3fn", "float8_e5m2", "nvfp4", "mxfp8", "int8_tensorwise", "convrot_w4a4"}) {
    const FormatTraits* f = find_format(name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->name, name);
    EXPECT_TRUE(f->from_marker);
    EXPECT_TRUE(f->validate && f->method && f->tp_input_unit && f->dequantize && f->quantize);
    EXPECT_EQ(f->tensors.front().role, "weight");
  }
  for (const FormatTraits* f : all_formats()) EXPECT_NE(f->shard, nullptr) << f->name << " has no shard rule";
  EXPECT_EQ(find_format("unquantized"), nullptr);
  EXPECT_EQ(find_format("int4_magic"), nullptr);
  EXPECT_FALSE(unquantized_format().from_marker);
  EXPECT_EQ(all_formats().back(), &unquantized_format());
}

TEST(Registry, ApplyDefaultsMarkerWins) {
  const json p = apply_defaults(format("int8_tensorwise"), {{"convrot", true}, {"format", "x"}, {"per_row", true}});
  EXPECT_EQ(p["convrot"], true);
  EXPECT_EQ(p["convrot_groupsize"], 256);
  EXPECT_EQ(p["full_precision_matrix_mult"], false);
  EXPECT_EQ(p["per_row"], true);
  EXPECT_FALSE(p.contains("format"));
  const json w4 = apply_defaults(format("convrot_w4a4"), json::object());
  EXPECT_EQ(w4["convrot_groupsize"], 256);
  EXPECT_EQ(w4["linear_dtype"], "int4");
}

TEST(Registry, CanonicalMarkers) {
  const std::vector<float> w(64 * 4, 0.5f);
  auto marker = [&](std::string_view name, const json& params) {
    const auto& f = format(name);
    return f.quantize(w.data(), 4, 64, apply_defaults(f, params)).marker;
  };
  EXPECT_EQ(marker("nvfp4", {}), (json{{"format", "nvfp4"}}));
  EXPECT_EQ(marker("float8_e4m3fn", {{"full_precision_matrix_mult", true}}),
            (json{{"format", "float8_e4m3fn"}, {"full_precision_matrix_mult", true}}));
  EXPECT_EQ(marker("int8_tensorwise", {{"convrot", true}, {"convrot_groupsize", 64}}),
            (json{{"format", "int8_tensorwise"}, {"convrot", true}, {"convrot_groupsize", 64}}));
  EXPECT_EQ(marker("convrot_w4a4", {{"convrot_groupsize", 64}}),
            (json{{"format", "convrot_w4a4"}, {"convrot_groupsize", 64}}));  // int4 is not saved
  EXPECT_EQ(marker("convrot_w4a4", {{"convrot_groupsize", 64}, {"linear_dtype", "int8"}}),
            (json{{"format", "convrot_w4a4"}, {"convrot_groupsize", 64}, {"linear_dtype", "int8"}}));
}

TEST(Methods, NamesAndTpUnits) {
  const std::vector<float> w(64 * 8, 0.25f);
  auto layer_of = [&](std::string_view name, const json& params) {
    return testing::quantized_layer(format(name), w, 8, 64, params);
  };
  auto fp8 = layer_of("float8_e4m3fn", {});
  EXPECT_EQ(format("float8_e4m3fn").method(fp8->layer), "fp8:dynamic");
  EXPECT_EQ(format("float8_e4m3fn").tp_input_unit(fp8->layer), 1);
  auto fp8s = layer_of("float8_e4m3fn", {{"input_scale", 0.5}});
  EXPECT_EQ(format("float8_e4m3fn").method(fp8s->layer), "fp8:static");
  auto fp8f = layer_of("float8_e5m2", {{"full_precision_matrix_mult", true}});
  EXPECT_EQ(format("float8_e5m2").method(fp8f->layer), "fp8:full_precision");
  auto nv = layer_of("nvfp4", {});
  EXPECT_EQ(format("nvfp4").method(nv->layer), "nvfp4");
  EXPECT_EQ(format("nvfp4").tp_input_unit(nv->layer), 16);
  auto nvf = layer_of("nvfp4", {{"full_precision_matrix_mult", true}});
  EXPECT_EQ(format("nvfp4").method(nvf->layer), "nvfp4:full_precision");
  auto mx = layer_of("mxfp8", {});
  EXPECT_EQ(format("mxfp8").method(mx->layer), "mxfp8");
  EXPECT_EQ(format("mxfp8").tp_input_unit(mx->layer), 32);
  auto i8 = layer_of("int8_tensorwise", {{"convrot", true}, {"convrot_groupsize", 64}});
  EXPECT_EQ(format("int8_tensorwise").tp_input_unit(i8->layer), 64);
  auto i8f = layer_of("int8_tensorwise", {{"full_precision_matrix_mult", true}});
  EXPECT_EQ(format("int8_tensorwise").method(i8f->layer), "int8_tensorwise:full_precision");
  EXPECT_EQ(format("int8_tensorwise").tp_input_unit(i8f->layer), 1);
  auto w4 = layer_of("convrot_w4a4", {{"convrot_groupsize", 16}});
  EXPECT_EQ(format("convrot_w4a4").tp_input_unit(w4->layer), 64);  // lcm(64, 16)
  EXPECT_EQ(format("convrot_w4a4").method(w4->layer), "convrot_w4a4:int4");
  auto w4f = layer_of("convrot_w4a4", {{"convrot_groupsize", 16}, {"full_precision_matrix_mult", true}});
  EXPECT_EQ(format("convrot_w4a4").method(w4f->layer), "convrot_w4a4:full_precision");
  const std::vector<float> big(256 * 2, 0.25f);
  auto w4big = testing::quantized_layer(format("convrot_w4a4"), big, 2, 256);
  EXPECT_EQ(format("convrot_w4a4").tp_input_unit(w4big->layer), 256);
}

TEST(Validation, UnknownFormatAndMissingCompanions) {
  Layer unknown;
  unknown.prefix = "a.b";
  unknown.declared_format = "int3_magic";
  expect_invalid(unknown, {"a.b", "int3_magic"});

  auto fp8 = bind_layer(format("float8_e4m3fn"), [] {
    std::vector<OwnedTensor> t;
    t.push_back(zero_tensor("weight", DType::F8_E4M3, {4, 8}));
    return t;
  }());
  expect_invalid(fp8->layer, {"blk.proj", "missing", "blk.proj.weight_scale"});

  auto nv = bind_layer(format("nvfp4"), [] {
    std::vector<OwnedTensor> t;
    t.push_back(zero_tensor("weight", DType::U8, {16, 8}));
    t.push_back(zero_tensor("weight_scale", DType::F8_E4M3, {128, 4}));
    return t;
  }());
  expect_invalid(nv->layer, {"missing", "blk.proj.weight_scale_2"});
}

std::unique_ptr<testing::OwnedLayer> fp8_layer(DType weight, DType scale, Shape scale_shape) {
  std::vector<OwnedTensor> t;
  t.push_back(zero_tensor("weight", weight, {4, 8}));
  t.push_back(zero_tensor("weight_scale", scale, scale_shape));
  return bind_layer(format("float8_e4m3fn"), std::move(t));
}

TEST(Validation, Fp8DtypesAndScaleShapes) {
  auto ok = fp8_layer(DType::F8_E4M3, DType::F32, {});
  EXPECT_NO_THROW(validate_layer(ok->layer));
  EXPECT_EQ(ok->layer.out_features, 4);
  EXPECT_EQ(ok->layer.in_features, 8);
  auto one = fp8_layer(DType::F8_E4M3, DType::F32, {1});
  EXPECT_NO_THROW(validate_layer(one->layer));
  auto bf16 = fp8_layer(DType::BF16, DType::F32, {});
  expect_invalid(bf16->layer, {"blk.proj.weight", "F8_E4M3", "BF16"});
  auto e5 = fp8_layer(DType::F8_E5M2, DType::F32, {});
  expect_invalid(e5->layer, {"F8_E4M3", "F8_E5M2"});  // e5m2 bytes under an e4m3 marker
  auto f16scale = fp8_layer(DType::F8_E4M3, DType::F16, {});
  expect_invalid(f16scale->layer, {"weight_scale", "F32", "F16"});
  auto vec = fp8_layer(DType::F8_E4M3, DType::F32, {4});
  expect_invalid(vec->layer, {"weight_scale", "[4]", "[] or [1]"});
}

std::unique_ptr<testing::OwnedLayer> int8_layer(Shape weight, Shape scale, const json& params) {
  std::vector<OwnedTensor> t;
  t.push_back(zero_tensor("weight", DType::I8, weight));
  t.push_back(zero_tensor("weight_scale", DType::F32, scale));
  return bind_layer(format("int8_tensorwise"), std::move(t), params);
}

TEST(Validation, Int8ScaleShapesAndConvRotGroups) {
  for (Shape s : {Shape{}, Shape{1}, Shape{6}, Shape{6, 1}}) {
    auto l = int8_layer({6, 256}, s, {});
    EXPECT_NO_THROW(validate_layer(l->layer)) << shape_str(s);
  }
  auto wrong = int8_layer({6, 256}, {6, 2}, {});
  expect_invalid(wrong->layer, {"blk.proj.weight_scale", "[6, 2]", "[N, 1]"});
  auto wrong_n = int8_layer({6, 256}, {5}, {});
  expect_invalid(wrong_n->layer, {"[5]"});
  auto not_div = int8_layer({6, 80}, {6, 1}, {{"convrot", true}, {"convrot_groupsize", 64}});
  expect_invalid(not_div->layer, {"K = 80", "not divisible", "64"});
  auto not_pow4 = int8_layer({6, 256}, {6, 1}, {{"convrot", true}, {"convrot_groupsize", 32}});
  expect_invalid(not_pow4->layer, {"power of 4", "32"});
  auto bad_type = int8_layer({6, 256}, {6, 1}, {{"convrot", "yes"}});
  expect_invalid(bad_type->layer, {"convrot", "boolean"});
  // Without convrot the group size is not used and not checked.
  auto plain = int8_layer({6, 80}, {6, 1}, {{"convrot_groupsize", 32}});
  EXPECT_NO_THROW(validate_layer(plain->layer));
  auto rank1 = int8_layer({6}, {6, 1}, {});
  expect_invalid(rank1->layer, {"2-D"});
}

std::unique_ptr<testing::OwnedLayer> w4a4_layer(Shape weight, Shape scale, const json& params) {
  std::vector<OwnedTensor> t;
  t.push_back(zero_tensor("weight", DType::I8, weight));
  t.push_back(zero_tensor("weight_scale", DType::F32, scale));
  return bind_layer(format("convrot_w4a4"), std::move(t), params);
}

TEST(Validation, ConvRotW4A4) {
  auto ok = w4a4_layer({3, 128}, {3}, {});
  EXPECT_NO_THROW(validate_layer(ok->layer));
  EXPECT_EQ(ok->layer.in_features, 256);
  auto k80 = w4a4_layer({3, 40}, {3}, {{"convrot_groupsize", 16}});
  expect_invalid(k80->layer, {"K = 2 x 40 = 80", "64"});
  auto g256 = w4a4_layer({3, 96}, {3}, {});  // K = 192, not divisible by 256
  expect_invalid(g256->layer, {"192", "convrot_groupsize 256"});
  auto g32 = w4a4_layer({3, 128}, {3}, {{"convrot_groupsize", 32}});
  expect_invalid(g32->layer, {"power of 4"});
  auto dtype = w4a4_layer({3, 128}, {3}, {{"linear_dtype", "fp16"}});
  expect_invalid(dtype->layer, {"linear_dtype", "fp16"});
  auto qgs = w4a4_layer({3, 128}, {3}, {{"quant_group_size", 32}});
  expect_invalid(qgs->layer, {"quant_group_size"});
  auto scale2d = w4a4_layer({3, 128}, {3, 1}, {});
  expect_invalid(scale2d->layer, {"weight_scale", "[3, 1]"});
}

std::unique_ptr<testing::OwnedLayer> nvfp4_layer(Shape weight, Shape scale, Shape scale2,
                                                 std::vector<float> bias = {}) {
  std::vector<OwnedTensor> t;
  t.push_back(zero_tensor("weight", DType::U8, weight));
  t.push_back(zero_tensor("weight_scale", DType::F8_E4M3, scale));
  t.push_back(f32_tensor("weight_scale_2", scale2, std::vector<float>(shape_numel(scale2), 1.0f)));
  if (!bias.empty()) t.push_back(f32_tensor("bias", {static_cast<int64_t>(bias.size())}, bias));
  return bind_layer(format("nvfp4"), std::move(t));
}

TEST(Validation, Nvfp4Shapes) {
  auto ok = nvfp4_layer({32, 40}, {128, 8}, {});  // K = 80 -> 5 blocks -> Cp 8
  EXPECT_NO_THROW(validate_layer(ok->layer));
  EXPECT_EQ(ok->layer.out_features, 32);
  EXPECT_EQ(ok->layer.in_features, 80);
  EXPECT_EQ(ok->layer.warnings.size(), 2u);  // N and K are the stored sizes
  auto flat = nvfp4_layer({32, 40}, {1024}, {1});  // 1-D scales with the right byte count
  EXPECT_NO_THROW(validate_layer(flat->layer));
  auto biased = nvfp4_layer({32, 40}, {128, 8}, {}, std::vector<float>(27, 0.0f));
  validate_layer(biased->layer);
  EXPECT_EQ(biased->layer.out_features, 27);
  auto linear_scales = nvfp4_layer({32, 40}, {32, 5}, {});  // linear layout is not the comfy one
  expect_invalid(linear_scales->layer, {"weight_scale", "1024 bytes", "[32, 5]"});
  auto odd_k = nvfp4_layer({32, 12}, {128, 4}, {});  // K = 24
  expect_invalid(odd_k->layer, {"K = 2 x 12 = 24", "16"});
  auto scale2 = nvfp4_layer({32, 40}, {128, 8}, {2});
  expect_invalid(scale2->layer, {"weight_scale_2", "[2]"});
  auto small_bias = nvfp4_layer({32, 40}, {128, 8}, {}, std::vector<float>(16, 0.0f));
  expect_invalid(small_bias->layer, {"bias", "16"});
  auto i8 = bind_layer(format("nvfp4"), [] {
    std::vector<OwnedTensor> t;
    t.push_back(zero_tensor("weight", DType::I8, {16, 8}));
    t.push_back(zero_tensor("weight_scale", DType::U8, {128, 4}));
    t.push_back(f32_tensor("weight_scale_2", {}, {1.0f}));
    return t;
  }());
  expect_invalid(i8->layer, {"weight", "U8", "I8"});
}

TEST(Validation, Mxfp8Shapes) {
  auto make = [](Shape weight, Shape scale) {
    std::vector<OwnedTensor> t;
    t.push_back(zero_tensor("weight", DType::F8_E4M3, weight));
    t.push_back(zero_tensor("weight_scale", DType::U8, scale));
    return bind_layer(format("mxfp8"), std::move(t));
  };
  auto ok = make({32, 64}, {128, 4});
  EXPECT_NO_THROW(validate_layer(ok->layer));
  auto k48 = make({32, 48}, {128, 4});
  expect_invalid(k48->layer, {"K = 48", "32"});
  auto linear = make({32, 64}, {32, 2});
  expect_invalid(linear->layer, {"512 bytes", "[32, 2]"});
}

TEST(Validation, BiasAndByteSizes) {
  auto l = int8_layer({6, 16}, {6, 1}, {});
  l->tensors.push_back(f32_tensor("bias", {5}, std::vector<float>(5, 0.0f)));
  l->layer.tensors["bias"] = l->tensors.back().view();
  l->layer.tensors["bias"].name = "blk.proj.bias";
  expect_invalid(l->layer, {"bias", "5", "6"});

  auto short_data = int8_layer({6, 16}, {6, 1}, {});
  short_data->layer.tensors["weight"].data = short_data->layer.tensors["weight"].data.subspan(0, 10);
  expect_invalid(short_data->layer, {"blk.proj.weight", "10 bytes"});
}

}  // namespace
}  // namespace mixq
