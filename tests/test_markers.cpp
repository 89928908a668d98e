// Marker collection: both dialects, nested params, legacy scaled fp8,
// conflicting duplicates and malformed markers (docs/DISPATCH.md §1).
#include <gtest/gtest.h>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/marker.hpp"
#include "mixq/numeric.hpp"
#include "support/test_support.hpp"

namespace mixq {
namespace {

using testing::CheckpointBuilder;
using testing::temp_dir;

std::vector<std::byte> zeros(size_t n) { return std::vector<std::byte>(n); }

CheckpointBuilder int8_layer(const std::string& prefix) {
  CheckpointBuilder b;
  b.add(prefix + ".weight", DType::I8, {4, 256}, zeros(4 * 256));
  b.add_float(prefix + ".weight_scale", DType::F32, {4, 1}, {1, 1, 1, 1});
  return b;
}

Checkpoint write_and_open(const CheckpointBuilder& builder, const std::string& name) {
  auto path = temp_dir(name) / "model.safetensors";
  builder.write(path);
  return Checkpoint::open(path.string());
}

std::string error_of(const CheckpointBuilder& builder, const std::string& name) {
  Checkpoint checkpoint = write_and_open(builder, name);
  try {
    collect_markers(checkpoint);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Markers, TensorMarkerIsParsedAndConsumed) {
  auto b = int8_layer("blocks.0.attn.out_proj");
  b.add_marker("blocks.0.attn.out_proj",
               R"({"format": "int8_tensorwise", "convrot": true, "convrot_groupsize": 256})");
  Checkpoint ck = write_and_open(b, "tensor-marker");
  MarkerSet set = collect_markers(ck);
  ASSERT_EQ(set.markers.size(), 1u);
  const Marker& m = set.markers.at("blocks.0.attn.out_proj");
  EXPECT_EQ(m.format, "int8_tensorwise");
  EXPECT_EQ(m.params.at("convrot"), true);
  EXPECT_EQ(m.params.at("convrot_groupsize"), 256);
  EXPECT_FALSE(m.params.contains("format"));
  EXPECT_NE(m.source.find("blocks.0.attn.out_proj.comfy_quant"), std::string::npos);
  EXPECT_TRUE(set.consumed.count("blocks.0.attn.out_proj.comfy_quant"));
}

TEST(Markers, HeaderMarkersAreEquivalentToTensorMarkers) {
  auto b = int8_layer("blocks.0.attn.out_proj");
  b.metadata("_quantization_metadata",
             R"({"format_version": "1.0", "layers": {"blocks.0.attn.out_proj":
                 {"format": "int8_tensorwise", "convrot": true, "convrot_groupsize": 64}}})");
  MarkerSet set = collect_markers(write_and_open(b, "header-marker"));
  ASSERT_EQ(set.markers.size(), 1u);
  EXPECT_EQ(set.markers.at("blocks.0.attn.out_proj").params.at("convrot_groupsize"), 64);
  EXPECT_NE(set.markers.at("blocks.0.attn.out_proj").source.find("header of"), std::string::npos);
}

TEST(Markers, NestedParamsAreFlattenedTopLevelWins) {
  auto b = int8_layer("x");
  b.add_marker("x", R"({"format": "int8_tensorwise", "convrot_groupsize": 16,
                        "params": {"convrot": true, "convrot_groupsize": 64}})");
  MarkerSet set = collect_markers(write_and_open(b, "nested"));
  const Marker& m = set.markers.at("x");
  EXPECT_EQ(m.params.at("convrot"), true);
  EXPECT_EQ(m.params.at("convrot_groupsize"), 16);
  EXPECT_FALSE(m.params.contains("params"));
  // SGLang reads top-level keys only: the planner needs to know which came from "params".
  EXPECT_EQ(set.nested_keys.at("x"), std::set<std::string>{"convrot"});
}

TEST(Markers, IdenticalDuplicatesAcrossDialectsAreAccepted) {
  auto b = int8_layer("x");
  b.add_marker("x", R"({"format":"int8_tensorwise","convrot":true,"convrot_groupsize":256})");
  b.metadata("_quantization_metadata",
             R"({"layers": {"x": {"format": "int8_tensorwise", "convrot": true, "convrot_groupsize": 256}}})");
  EXPECT_EQ(collect_markers(write_and_open(b, "dup-same")).markers.size(), 1u);
}

TEST(Markers, ConflictingDuplicatesNameBothSources) {
  auto b = int8_layer("x");
  b.add_marker("x", R"({"format": "int8_tensorwise", "convrot": true})");
  b.metadata("_quantization_metadata",
             R"({"layers": {"x": {"format": "int8_tensorwise", "convrot": false}}})");
  std::string error = error_of(b, "dup-conflict");
  EXPECT_NE(error.find("Conflicting Comfy quantization markers for 'x'"), std::string::npos) << error;
  EXPECT_NE(error.find("x.comfy_quant"), std::string::npos) << error;
  EXPECT_NE(error.find("header of"), std::string::npos) << error;
}

TEST(Markers, ConflictAcrossShardHeaders) {
  auto dir = temp_dir("dup-shards");
  auto a = int8_layer("x");
  a.metadata("_quantization_metadata", R"({"layers": {"x": {"format": "int8_tensorwise"}}})");
  a.write(dir / "a.safetensors");
  CheckpointBuilder b;
  b.add_float("y.weight", DType::F32, {1, 1}, {1});
  b.metadata("_quantization_metadata", R"({"layers": {"x": {"format": "nvfp4"}}})");
  b.write(dir / "b.safetensors");
  Checkpoint ck = Checkpoint::open(dir.string());
  EXPECT_THROW(collect_markers(ck), Error);
}

TEST(Markers, InvalidMarkersAreErrorsNamingTheLayer) {
  struct Case {
    std::string json;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"{not json", "invalid JSON"},
      {"[1, 2]", "must contain a JSON object"},
      {R"({"convrot": true})", "no \"format\""},
      {R"({"format": 7})", "\"format\" must be a string"},
      {R"({"format": "int8_tensorwise", "params": 3})", "\"params\" must be an object"},
      {"{\"format\": \"\xff\xfe\"}", "not UTF-8"},
      {"{\"format\": \"\xc0\xaf\"}", "not UTF-8"},  // overlong encoding
  };
  for (const Case& c : cases) {
    auto b = int8_layer("blocks.3.mlp.fc2");
    b.add_marker("blocks.3.mlp.fc2", c.json);
    std::string error = error_of(b, "bad-marker");
    EXPECT_NE(error.find("blocks.3.mlp.fc2"), std::string::npos) << c.json << " -> " << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.json << " -> " << error;
  }
}

TEST(Markers, MarkerTensorMustBeOneDimensionalBytes) {
  CheckpointBuilder b = int8_layer("x");
  b.add_float("x.comfy_quant", DType::F32, {1}, {1.0f});
  std::string error = error_of(b, "marker-dtype");
  EXPECT_NE(error.find("1-D U8"), std::string::npos) << error;
}

TEST(Markers, InvalidHeaderMetadata) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{oops", "invalid JSON"},
      {"[]", "must contain an object"},
      {R"({"format_version": "1.0"})", "must contain a layers object"},
      {R"({"layers": []})", "must contain a layers object"},
      {R"({"layers": {"x": "nvfp4"}})", "must contain a JSON object"},
  };
  for (const auto& [value, expected] : cases) {
    auto b = int8_layer("x");
    b.metadata("_quantization_metadata", value);
    std::string error = error_of(b, "bad-header");
    EXPECT_NE(error.find(expected), std::string::npos) << value << " -> " << error;
    EXPECT_NE(error.find("model.safetensors"), std::string::npos) << error;
  }
}

// Legacy ComfyUI scaled fp8 (convert_old_quants): sentinel, renamed scales,
// a 2-element sentinel means full-precision matmul, unit input scales dropped.
CheckpointBuilder scaled_fp8(size_t sentinel_elements, float input_scale) {
  CheckpointBuilder b;
  const std::string p = "model.diffusion_model.";
  b.add(p + "scaled_fp8", DType::F8_E4M3, {static_cast<int64_t>(sentinel_elements)},
        zeros(sentinel_elements));
  for (std::string layer : {"blocks.0.attn.qkv_proj", "blocks.0.mlp.fc1"}) {
    b.add(p + layer + ".weight", DType::F8_E4M3, {8, 16}, zeros(8 * 16));
    b.add_float(p + layer + ".scale_weight", DType::F32, {}, {0.5f});
  }
  b.add_float(p + "blocks.0.attn.qkv_proj.scale_input", DType::F32, {}, {input_scale});
  b.add_float(p + "blocks.0.mlp.fc1.scale_input", DType::F32, {}, {1.0f});
  b.add_float(p + "norm.weight", DType::F32, {16}, std::vector<float>(16, 1.0f));
  return b;
}

TEST(Markers, LegacyScaledFp8IsNormalised) {
  MarkerSet set = collect_markers(write_and_open(scaled_fp8(1, 0.25f), "scaled-fp8"));
  const std::string p = "model.diffusion_model.";
  ASSERT_EQ(set.markers.size(), 2u);
  const Marker& qkv = set.markers.at(p + "blocks.0.attn.qkv_proj");
  EXPECT_EQ(qkv.format, "float8_e4m3fn");
  EXPECT_FALSE(qkv.params.contains("full_precision_matrix_mult"));
  EXPECT_EQ(set.renamed.at(p + "blocks.0.attn.qkv_proj.weight_scale"),
            p + "blocks.0.attn.qkv_proj.scale_weight");
  // Input scale 0.25 is kept under its new name; 1.0 is dropped.
  EXPECT_EQ(set.renamed.at(p + "blocks.0.attn.qkv_proj.input_scale"),
            p + "blocks.0.attn.qkv_proj.scale_input");
  EXPECT_FALSE(set.renamed.count(p + "blocks.0.mlp.fc1.input_scale"));
  EXPECT_TRUE(set.consumed.count(p + "blocks.0.mlp.fc1.scale_input"));
  EXPECT_TRUE(set.consumed.count(p + "scaled_fp8"));
}

TEST(Markers, LegacyTwoElementSentinelMeansFullPrecision) {
  MarkerSet set = collect_markers(write_and_open(scaled_fp8(2, 0.25f), "scaled-fp8-fp"));
  for (const auto& [prefix, m] : set.markers) EXPECT_EQ(m.params.at("full_precision_matrix_mult"), true);
}

TEST(Markers, LegacyRulesDoNotApplyWhenHeaderMetadataExists) {
  auto b = scaled_fp8(1, 0.25f);
  b.metadata("_quantization_metadata", R"({"layers": {}})");
  MarkerSet set = collect_markers(write_and_open(b, "scaled-fp8-header"));
  EXPECT_TRUE(set.markers.empty());
  EXPECT_TRUE(set.renamed.empty());
}

}  // namespace
}  // namespace mixq
