// Layer grouping and `mixq inspect` on a scaled-down MiniMax-H3 mixed file:
// NVFP4 MLP + INT8-ConvRot attention, an unquantized AdaLN projection.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "mixq/checkpoint.hpp"
#include "mixq/format.hpp"
#include "mixq/inspect.hpp"
#include "mixq/layer.hpp"
#include "mixq/marker.hpp"
#include "support/test_support.hpp"

namespace mixq {
namespace {

using nlohmann::json;
using testing::CheckpointBuilder;
using testing::run_cli;
using testing::temp_dir;

std::vector<std::byte> zeros(size_t n) { return std::vector<std::byte>(n); }

// NVFP4 layer of logical [n, k] (multiples of 16): packed weight, swizzled
// block scales [roundup(n,128), roundup(k/16,4)], global scale, f32 bias.
void add_nvfp4(CheckpointBuilder& b, const std::string& p, int64_t n, int64_t k) {
  const int64_t rows = (n + 127) / 128 * 128, cols = (k / 16 + 3) / 4 * 4;
  b.add(p + ".weight", DType::U8, {n, k / 2}, zeros(n * k / 2));
  b.add(p + ".weight_scale", DType::F8_E4M3, {rows, cols}, zeros(rows * cols));
  b.add_float(p + ".weight_scale_2", DType::F32, {}, {0.001f});
  b.add_float(p + ".bias", DType::F32, {n}, std::vector<float>(n, 0.0f));
  b.add_marker(p, R"({"format": "nvfp4"})");
}

void add_int8_convrot(CheckpointBuilder& b, const std::string& p, int64_t n, int64_t k,
                      const std::string& marker) {
  b.add(p + ".weight", DType::I8, {n, k}, zeros(n * k));
  b.add_float(p + ".weight_scale", DType::F32, {n, 1}, std::vector<float>(n, 0.01f));
  b.add_marker(p, marker);
}

std::filesystem::path mixed_h3(const std::string& name) {
  CheckpointBuilder b;
  add_int8_convrot(b, "blocks.0.attn.qkv_proj", 768, 256,
                   R"({"format": "int8_tensorwise", "convrot": true, "convrot_groupsize": 256})");
  add_int8_convrot(b, "blocks.0.attn.out_proj", 256, 256, R"({"format": "int8_tensorwise", "convrot": true})");
  add_nvfp4(b, "blocks.0.mlp.fc1", 1024, 256);
  add_nvfp4(b, "blocks.0.mlp.fc2", 256, 512);
  b.add_float("blocks.0.adaln_proj.linear.weight", DType::BF16, {4608, 8}, std::vector<float>(4608 * 8, 0.5f));
  b.add_float("blocks.0.norm1.weight", DType::F32, {256}, std::vector<float>(256, 1.0f));
  b.add_float("adaln_t_table", DType::F32, {1025, 8}, std::vector<float>(1025 * 8, 0.0f));
  auto path = temp_dir(name) / "h3_mixed.safetensors";
  b.write(path);
  return path;
}

const json& layer_of(const json& report, const std::string& prefix) {
  for (const auto& l : report["layers"])
    if (l["prefix"] == prefix) return l;
  throw std::runtime_error("no layer " + prefix);
}

TEST(Layers, GroupsByPrefixAndClaimsCompanions) {
  Checkpoint ck = Checkpoint::open(mixed_h3("group").string());
  MarkerSet markers = collect_markers(ck);
  LayerSet set = group_layers(ck, markers);
  ASSERT_EQ(set.layers.size(), 5u);
  const Layer& fc1 = set.layers[3];  // sorted by prefix
  EXPECT_EQ(fc1.prefix, "blocks.0.mlp.fc1");
  ASSERT_NE(fc1.format, nullptr);
  EXPECT_EQ(fc1.format->name, "nvfp4");
  EXPECT_EQ(fc1.tensors.size(), 4u);  // weight, weight_scale, weight_scale_2, bias
  EXPECT_TRUE(fc1.problem.empty()) << fc1.problem;
  EXPECT_EQ(fc1.out_features, 1024);
  EXPECT_EQ(fc1.in_features, 256);
  const Layer& adaln = set.layers[0];
  EXPECT_EQ(adaln.prefix, "blocks.0.adaln_proj.linear");
  EXPECT_FALSE(adaln.format->from_marker);
  // Norms and tables are not linear layers.
  ASSERT_EQ(set.other_tensors.size(), 2u);
  EXPECT_EQ(set.other_tensors[0]->name, "adaln_t_table");
  EXPECT_EQ(set.other_tensors[1]->name, "blocks.0.norm1.weight");
}

TEST(Layers, UnknownFormatAndUnmarkedQuantizedWeightAreReported) {
  CheckpointBuilder b;
  add_int8_convrot(b, "a", 4, 256, R"({"format": "int3_magic"})");
  b.add("b.weight", DType::I8, {4, 16}, zeros(64));
  auto path = temp_dir("unknown") / "m.safetensors";
  b.write(path);
  Checkpoint ck = Checkpoint::open(path.string());
  LayerSet set = group_layers(ck, collect_markers(ck));
  ASSERT_EQ(set.layers.size(), 2u);
  EXPECT_EQ(set.layers[0].format, nullptr);
  EXPECT_NE(set.layers[0].problem.find("unknown quantization format 'int3_magic'"), std::string::npos);
  EXPECT_EQ(set.layers[0].tensors.count("weight_scale"), 1u);  // still claimed
  ASSERT_EQ(set.warnings.size(), 1u);
  EXPECT_NE(set.warnings[0].find("layer 'b': weight stored as I8 without a comfy_quant marker"),
            std::string::npos);
}

TEST(Inspect, ReportHasTheFieldsOfTheCliContract) {
  auto path = mixed_h3("report");
  Checkpoint ck = Checkpoint::open(path.string());
  json r = inspect_report(ck);

  ASSERT_EQ(r["files"].size(), 1u);
  const json& f = r["files"][0];
  EXPECT_EQ(f["path"], path.string());
  EXPECT_EQ(f["bytes"], std::filesystem::file_size(path));
  EXPECT_EQ(f["tensors"], 19);
  EXPECT_EQ(f["trailing_bytes"], 0);
  EXPECT_GT(f["header_bytes"].get<int64_t>(), 0);

  const json& out = layer_of(r, "blocks.0.attn.out_proj");
  EXPECT_EQ(out["format"], "int8_tensorwise");
  EXPECT_EQ(out["params"]["convrot"], true);
  EXPECT_EQ(out["params"]["convrot_groupsize"], 256);  // default applied
  EXPECT_EQ(out["out_features"], 256);
  EXPECT_EQ(out["in_features"], 256);
  EXPECT_EQ(out["tensors"]["weight"]["dtype"], "I8");
  EXPECT_EQ(out["tensors"]["weight_scale"]["shape"], json({256, 1}));
  EXPECT_EQ(out["bytes"], 256 * 256 + 256 * 4);

  const json& fc2 = layer_of(r, "blocks.0.mlp.fc2");
  EXPECT_EQ(fc2["format"], "nvfp4");
  EXPECT_EQ(fc2["out_features"], 256);
  EXPECT_EQ(fc2["in_features"], 512);  // 2 x packed columns
  EXPECT_EQ(fc2["tensors"]["weight_scale"]["bytes"], 256 * 32);

  const json& adaln = layer_of(r, "blocks.0.adaln_proj.linear");
  EXPECT_TRUE(adaln["format"].is_null());
  EXPECT_EQ(adaln["out_features"], 4608);

  // Per-format totals: NVFP4 = packed weights + block scales + global scales + f32 bias.
  const int64_t nvfp4_bytes = (1024 * 128 + 256 * 256) + (1024 * 16 + 256 * 32) + 2 * 4 + (1024 + 256) * 4;
  EXPECT_EQ(r["formats"]["nvfp4"]["layers"], 2);
  EXPECT_EQ(r["formats"]["nvfp4"]["bytes"], nvfp4_bytes);
  EXPECT_NEAR(r["formats"]["nvfp4"]["bits_per_weight"].get<double>(),
              8.0 * nvfp4_bytes / (1024 * 256 + 256 * 512), 1e-9);
  EXPECT_EQ(r["formats"]["int8_tensorwise"]["layers"], 2);
  EXPECT_EQ(r["formats"]["unquantized"]["layers"], 1);
  EXPECT_EQ(r["other_tensors"].size(), 2u);
  EXPECT_TRUE(r["warnings"].is_array());
}

TEST(Inspect, CliJsonMatchesLibraryAndTableNamesLayers) {
  auto path = mixed_h3("cli");
  auto result = run_cli({"inspect", path.string(), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  json from_cli = json::parse(result.out);
  EXPECT_EQ(from_cli, inspect_report(Checkpoint::open(path.string())));

  auto table = run_cli({"inspect", path.string()});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("blocks.0.mlp.fc1"), std::string::npos);
  EXPECT_NE(table.out.find("nvfp4"), std::string::npos);
  EXPECT_NE(table.out.find("1024 x 256"), std::string::npos);
}

TEST(Inspect, CliErrorsAndUsage) {
  auto missing = run_cli({"inspect", "/nonexistent/model.safetensors"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err.rfind("mixq: error: ", 0), 0u) << missing.err;
  EXPECT_NE(missing.err.find("/nonexistent/model.safetensors"), std::string::npos);

  auto usage = run_cli({"inspect"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_EQ(usage.err.rfind("mixq: error: ", 0), 0u) << usage.err;

  auto bad_flag = run_cli({"inspect", "--frobnicate"});
  EXPECT_EQ(bad_flag.exit_code, 2);
}

}  // namespace
}  // namespace mixq
