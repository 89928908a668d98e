// `mixq plan` end to end on a scaled-down MiniMax-H3-named mixed checkpoint:
// 2 blocks, hidden 256, 8 heads of 128 (attention width 1024), FFN 512, with
// NVFP4, INT8-ConvRot (groups 256 and 64) and FP8 layers, BF16 and FP32 rest.
#include "test_plan_fixtures.hpp"

namespace mixq::testing {
namespace {

using nlohmann::json;

std::string h3_mixed() {
  const json g256 = {{"convrot", true}, {"convrot_groupsize", 256}};
  const json g64 = {{"convrot", true}, {"convrot_groupsize", 64}};
  PlanFixture f;
  f.quantized("blocks.0.attn.qkv_proj", "nvfp4", 3 * 1024, 256)
      .quantized("blocks.0.attn.out_proj", "int8_tensorwise", 256, 1024, g256)  // K/tp % 256: tp 1, 2, 4
      .quantized("blocks.0.mlp.fc1", "float8_e4m3fn", 2 * 512, 256)
      .quantized("blocks.0.mlp.fc2", "nvfp4", 256, 512)
      .quantized("blocks.1.attn.qkv_proj", "int8_tensorwise", 3 * 1024, 256, g256)
      .quantized("blocks.1.attn.out_proj", "nvfp4", 256, 1024)
      .quantized("blocks.1.mlp.fc1", "nvfp4", 2 * 512, 256)
      .quantized("blocks.1.mlp.fc2", "int8_tensorwise", 256, 512, g64)
      .dense("final_layer.adaln_proj.linear", 512, 8, DType::F16, true)
      .f32("adaln_t_table", {1025, 8}, 0.0f)
      .f32("blocks.0.norm1.weight", {256}, 1.0f)
      .f32("blocks.1.norm1.weight", {256}, 1.0f);
  return f.write("h3_mixed");
}

TEST(CliPlan, MiniMaxH3MixedMaxTp) {
  const std::string path = h3_mixed();
  CliResult r = run_cli({"plan", path, "--profile", "sglang-minimax-h3", "--max-tp", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  json j = json::parse(r.out);
  EXPECT_EQ(j["profile"], "sglang-minimax-h3");
  EXPECT_EQ(j["tp"], 1);
  EXPECT_EQ(j["accepted"], true);
  EXPECT_TRUE(j["error"].is_null());
  // out_proj of block 0 (INT8 g256, K 1024) allows 1, 2, 4; 8 heads allow 8 but not 16.
  EXPECT_EQ(j["max_tp"], json::array({1, 2, 4}));
  ASSERT_EQ(j["layers"].size(), 9u);
  std::map<std::string, json> by_prefix;
  for (const json& l : j["layers"]) by_prefix[l["prefix"].get<std::string>()] = l;
  EXPECT_EQ(by_prefix["blocks.0.attn.qkv_proj"]["method"], "nvfp4:unit_scale");
  EXPECT_EQ(by_prefix["blocks.0.attn.out_proj"]["method"], "int8_convrot");
  EXPECT_EQ(by_prefix["blocks.0.mlp.fc1"]["method"], "fp8:dynamic");
  EXPECT_EQ(by_prefix["blocks.1.mlp.fc2"]["format"], "int8_tensorwise");
  EXPECT_TRUE(by_prefix["final_layer.adaln_proj.linear"]["format"].is_null());
  EXPECT_EQ(by_prefix["final_layer.adaln_proj.linear"]["method"], "unquantized");
  EXPECT_NE(j["runtime_config"].get<std::string>().find("ModelOptFp4Config"), std::string::npos);

  CliResult table = run_cli({"plan", path, "--profile", "sglang-minimax-h3", "--max-tp"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("admitted tp degrees (1..64): 1 2 4"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("blocks.1.mlp.fc1"), std::string::npos);
}

TEST(CliPlan, RejectionsExitOneWithTheReason) {
  const std::string path = h3_mixed();
  CliResult generic = run_cli({"plan", path, "--profile", "sglang", "--json"});
  EXPECT_EQ(generic.exit_code, 1);
  EXPECT_EQ(json::parse(generic.out)["accepted"], false);
  EXPECT_NE(generic.err.find("mixq: error: sglang would raise NotImplementedError: Unsupported Comfy quantization "
                             "format(s): float8_e4m3fn, int8_tensorwise, nvfp4"),
            std::string::npos)
      << generic.err;

  CliResult tp8 = run_cli({"plan", path, "--profile", "sglang-minimax-h3", "--tp", "8", "--json"});
  EXPECT_EQ(tp8.exit_code, 1);
  json j = json::parse(tp8.out);
  EXPECT_EQ(j["tp"], 8);
  EXPECT_EQ(j["accepted"], false);
  EXPECT_NE(tp8.err.find("blocks.0.attn.out_proj"), std::string::npos) << tp8.err;
  for (const json& l : j["layers"])
    if (l["prefix"] == "blocks.0.attn.out_proj") {
      EXPECT_EQ(l["admits_tp"], false);
    }

  EXPECT_EQ(run_cli({"plan", path}).exit_code, 0);  // comfyui accepts any mixture
  EXPECT_EQ(run_cli({"plan", path, "--profile", "vllm"}).exit_code, 2);
  EXPECT_EQ(run_cli({"plan", path, "--tp", "0"}).exit_code, 2);
}

TEST(CliPlan, OrphanMarkerAndUnclaimedScaleListTheNames) {
  PlanFixture orphan;
  orphan.quantized("blocks.0.mlp.fc2", "float8_e4m3fn", 16, 64)
      .mark("blocks.3.mlp.fc2", json{{"format", "float8_e4m3fn"}});
  CliResult r = run_cli({"plan", orphan.write("orphan"), "--profile", "sglang-minimax-h3"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("mixq: error: "), std::string::npos);
  EXPECT_NE(r.err.find("'blocks.3.mlp.fc2'"), std::string::npos) << r.err;

  PlanFixture stray;
  stray.quantized("blocks.0.mlp.fc2", "float8_e4m3fn", 16, 64)
      .dense("blocks.0.mlp.fc1", 32, 64)
      .f32("blocks.0.mlp.fc1.weight_scale", {}, 1.0f);
  CliResult s = run_cli({"plan", stray.write("stray"), "--json"});
  EXPECT_EQ(s.exit_code, 1);
  EXPECT_NE(s.err.find("'blocks.0.mlp.fc1.weight_scale'"), std::string::npos) << s.err;
  EXPECT_NE(json::parse(s.out)["error"].get<std::string>().find("unrecognized quantization scale tensors"),
            std::string::npos);
}

}  // namespace
}  // namespace mixq::testing
