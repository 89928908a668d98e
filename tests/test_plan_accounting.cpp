// Plan::build: any mixture is a list of independent layers; strict accounting
// (orphan markers, quantized weights without markers, unclaimed companions);
// both marker dialects; validation failures never fall back silently.
#include "test_plan_fixtures.hpp"

namespace mixq::testing {
namespace {

using nlohmann::json;

const json kInt8 = {{"convrot", true}, {"convrot_groupsize", 256}};
const json kW4a4Int8 = {{"linear_dtype", "int8"}};

PlanFixture mixed(Dialect dialect) {
  PlanFixture f;
  f.quantized("blocks.0.attn.qkv_proj", "nvfp4", 384, 128, {}, dialect)
      .quantized("blocks.0.attn.out_proj", "int8_tensorwise", 128, 256, kInt8, dialect)
      .quantized("blocks.0.mlp.fc1", "float8_e4m3fn", 256, 128, {}, dialect)
      .quantized("blocks.0.mlp.fc2", "convrot_w4a4", 128, 256, kW4a4Int8, dialect)
      .dense("final_layer.linear", 64, 128, DType::BF16, true)
      .f32("blocks.0.norm1.weight", {128}, 1.0f);
  return f;
}

TEST(PlanAccounting, AnyMixtureIsAcceptedLayerByLayerUnderComfyui) {
  Checkpoint ck = mixed(Dialect::tensor).open();
  Plan plan = plan_of(ck, "comfyui");
  expect_accepted(plan);
  ASSERT_EQ(plan.layers().size(), 5u);
  EXPECT_EQ(layer_of(plan, "blocks.0.attn.qkv_proj").method, "nvfp4");
  EXPECT_EQ(layer_of(plan, "blocks.0.attn.out_proj").method, "int8_convrot");
  EXPECT_EQ(layer_of(plan, "blocks.0.mlp.fc1").method, "fp8:unit_scale");  // no input_scale: ComfyUI uses 1.0
  EXPECT_EQ(layer_of(plan, "blocks.0.mlp.fc2").method, "convrot_w4a4:int8");
  EXPECT_EQ(layer_of(plan, "final_layer.linear").method, "unquantized");
  EXPECT_EQ(layer_of(plan, "final_layer.linear").format_name(), "");
  EXPECT_EQ(layer_of(plan, "blocks.0.mlp.fc2").layer.in_features, 256);
  EXPECT_EQ(layer_of(plan, "blocks.0.mlp.fc2").layer.params["convrot_groupsize"], 256);
  EXPECT_TRUE(layer_of(plan, "final_layer.linear").layer.find("bias"));
  // Exact-prefix lookup, no globbing or prefix matching.
  EXPECT_EQ(plan.find("blocks.0.attn"), nullptr);
  EXPECT_EQ(plan.find("blocks.0.attn.qkv_proj.weight"), nullptr);
  EXPECT_NO_THROW(plan.require_accepted());
}

TEST(PlanAccounting, HeaderOnlyAndBothDialectsPlanLikeTensorMarkers) {
  Checkpoint tensor_ck = mixed(Dialect::tensor).open();
  Checkpoint header_ck = mixed(Dialect::header).open();
  Checkpoint both_ck = mixed(Dialect::both).open();
  Plan a = plan_of(tensor_ck, "comfyui"), b = plan_of(header_ck, "comfyui"), c = plan_of(both_ck, "comfyui");
  expect_accepted(b);
  expect_accepted(c);
  ASSERT_EQ(a.layers().size(), b.layers().size());
  ASSERT_EQ(a.layers().size(), c.layers().size());
  for (size_t i = 0; i < a.layers().size(); ++i) {
    EXPECT_EQ(a.layers()[i].prefix(), b.layers()[i].prefix());
    EXPECT_EQ(a.layers()[i].method, b.layers()[i].method);
    EXPECT_EQ(a.layers()[i].method, c.layers()[i].method);
    EXPECT_EQ(a.layers()[i].layer.params, b.layers()[i].layer.params);
  }
}

TEST(PlanAccounting, ConflictingDialectsAreRejectedNamingThePrefix) {
  PlanFixture f;
  f.quantized("blocks.0.attn.out_proj", "int8_tensorwise", 16, 256, kInt8)
      .mark("blocks.0.attn.out_proj", json{{"format", "int8_tensorwise"}, {"convrot", true}, {"convrot_groupsize", 64}},
            Dialect::header);
  Checkpoint ck = f.open();
  expect_rejected(plan_of(ck, "comfyui"), {"Conflicting", "blocks.0.attn.out_proj"});
}

TEST(PlanAccounting, OrphanMarkerIsRejectedWithItsName) {
  PlanFixture f;
  f.quantized("blocks.0.mlp.fc1", "float8_e4m3fn", 32, 64)
      .mark("blocks.7.mlp.fc1", json{{"format", "float8_e4m3fn"}})
      .mark("blocks.8.mlp.fc2", json{{"format", "nvfp4"}}, Dialect::header);
  Checkpoint ck = f.open();
  for (const char* profile : {"comfyui", "sglang", "sglang-minimax-h3"}) {
    Plan plan = plan_of(ck, profile);
    expect_rejected(plan, {"orphan", "'blocks.7.mlp.fc1'", "'blocks.8.mlp.fc2'"});
    EXPECT_EQ(plan.error().find("blocks.0.mlp.fc1"), std::string::npos) << plan.error();
    EXPECT_FALSE(layer_of(plan, "blocks.7.mlp.fc1").reason.empty());
  }
}

TEST(PlanAccounting, UnclaimedScaleWithoutMarkerIsComfyRuntimeError) {
  PlanFixture f;
  f.dense("blocks.0.mlp.fc1", 32, 64).f32("blocks.0.mlp.fc1.weight_scale", {}, 0.5f);
  Checkpoint ck = f.open();
  expect_rejected(plan_of(ck, "comfyui"),
                  {"comfyui would raise RuntimeError", "unrecognized quantization scale tensors",
                   "'blocks.0.mlp.fc1.weight_scale'"});
  expect_rejected(plan_of(ck, "sglang"), {"no layer claims", "'blocks.0.mlp.fc1.weight_scale'"});
}

TEST(PlanAccounting, CompanionTheMarkedFormatDoesNotUseIsUnclaimed) {
  PlanFixture f;
  f.quantized("blocks.0.mlp.fc1", "float8_e4m3fn", 32, 64)
      .zeros("blocks.0.mlp.fc1.weight_s_rel", DType::F8_E4M3, {32, 4});
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "comfyui");
  expect_rejected(plan, {"no layer claims", "'blocks.0.mlp.fc1.weight_s_rel'"});
  EXPECT_EQ(plan.error().find("RuntimeError"), std::string::npos) << "the layer has a marker";
}

TEST(PlanAccounting, QuantizedWeightsWithoutMarkersAreDetected) {
  PlanFixture f;
  for (int i = 0; i < 7; ++i) f.zeros(fmt::format("blocks.{}.mlp.fc1.weight", i), DType::I8, {4, 64});
  f.zeros("blocks.0.attn.qkv_proj.weight", DType::F8_E4M3, {12, 64});
  Checkpoint ck = f.open();
  Plan sglang = plan_of(ck, "sglang");
  expect_rejected(sglang, {"sglang would raise ValueError: Quantized weights are missing comfy_quant metadata: "
                           "['blocks.0.attn.qkv_proj', 'blocks.0.mlp.fc1', 'blocks.1.mlp.fc1', "
                           "'blocks.2.mlp.fc1', 'blocks.3.mlp.fc1'] and 3 more"});
  EXPECT_FALSE(layer_of(sglang, "blocks.6.mlp.fc1").reason.empty());
  // ComfyUI would cast the integers to the compute dtype; mixq refuses.
  expect_rejected(plan_of(ck, "comfyui"), {"without a comfy_quant marker", "'blocks.6.mlp.fc1'"});
}

TEST(PlanAccounting, QuantizedWeightWithScaleButNoMarkerUnderComfyui) {
  PlanFixture f;
  f.zeros("blocks.0.mlp.fc1.weight", DType::I8, {4, 64}).f32("blocks.0.mlp.fc1.weight_scale", {4, 1}, 1.0f);
  Checkpoint ck = f.open();
  expect_rejected(plan_of(ck, "comfyui"),
                  {"RuntimeError", "unrecognized quantization scale tensors", "blocks.0.mlp.fc1.weight_scale"});
}

TEST(PlanAccounting, TensorsThatDoNotFitTheMarkerAreAnErrorNotAFallback) {
  PlanFixture f;
  // Marked INT8 but stored as BF16 (what an unquantized layer looks like).
  f.dense("blocks.0.mlp.fc1", 16, 256).f32("blocks.0.mlp.fc1.weight_scale", {16, 1}, 1.0f)
      .mark("blocks.0.mlp.fc1", json{{"format", "int8_tensorwise"}, {"convrot", true}, {"convrot_groupsize", 256}});
  Checkpoint ck = f.open();
  for (const char* profile : {"comfyui", "sglang"}) {
    Plan plan = plan_of(ck, profile);
    expect_rejected(plan, {"blocks.0.mlp.fc1"});
    const LayerPlan& layer = layer_of(plan, "blocks.0.mlp.fc1");
    EXPECT_EQ(layer.method, "invalid");
    EXPECT_EQ(layer.reason, layer.layer.problem);
    EXPECT_FALSE(layer.reason.empty());
  }
}

TEST(PlanAccounting, UnknownFormatNamesTheRuntimeException) {
  PlanFixture f;
  f.dense("blocks.0.mlp.fc1", 16, 64).mark("blocks.0.mlp.fc1", json{{"format", "int3_magic"}});
  Checkpoint ck = f.open();
  expect_rejected(plan_of(ck, "comfyui"), {"comfyui would raise KeyError", "int3_magic", "blocks.0.mlp.fc1"});
  expect_rejected(plan_of(ck, "sglang"),
                  {"sglang would raise NotImplementedError: Unsupported Comfy quantization format(s): int3_magic"});
  EXPECT_EQ(layer_of(plan_of(ck, "sglang"), "blocks.0.mlp.fc1").format_name(), "int3_magic");
}

TEST(PlanAccounting, InvalidMarkerJsonIsARejectionNotACrash) {
  PlanFixture f;
  f.dense("blocks.0.mlp.fc1", 16, 64).mark_text("blocks.0.mlp.fc1", "{\"format\": ");
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "sglang");
  expect_rejected(plan, {"Invalid Comfy quantization marker"});
  EXPECT_THROW(plan.require_accepted(), Error);
}

TEST(PlanAccounting, LegacyScaledFp8IsComfyuiOnly) {
  PlanFixture f;
  f.zeros("model.diffusion_model.blocks.0.mlp.fc1.weight", DType::F8_E4M3, {16, 64})
      .f32("model.diffusion_model.blocks.0.mlp.fc1.scale_weight", {}, 0.25f)
      .zeros("model.diffusion_model.scaled_fp8", DType::F8_E4M3, {0});
  Checkpoint ck = f.open();
  Plan comfy = plan_of(ck, "comfyui");
  expect_accepted(comfy);
  EXPECT_EQ(layer_of(comfy, "model.diffusion_model.blocks.0.mlp.fc1").format_name(), "float8_e4m3fn");
  expect_rejected(plan_of(ck, "sglang"), {"ValueError: Quantized weights are missing comfy_quant metadata",
                                          "model.diffusion_model.blocks.0.mlp.fc1", "legacy scaled_fp8"});
}

TEST(PlanAccounting, JsonFollowsTheCliContract) {
  Checkpoint ck = mixed(Dialect::tensor).open();
  json j = plan_of(ck, "comfyui").to_json();
  EXPECT_EQ(j["profile"], "comfyui");
  EXPECT_EQ(j["tp"], 1);
  EXPECT_EQ(j["accepted"], true);
  EXPECT_TRUE(j["error"].is_null());
  ASSERT_EQ(j["layers"].size(), 5u);
  // tp 2 leaves W4A4's fc2 (K 256, group 256) a shard of 128: not admitted.
  json j2 = plan_of(ck, "comfyui", 2).to_json();
  EXPECT_EQ(j2["tp"], 2);
  EXPECT_EQ(j2["accepted"], false);
  EXPECT_NE(j2["error"].get<std::string>().find("--tp 2"), std::string::npos);
  EXPECT_EQ(j2["layers"][3]["prefix"], "blocks.0.mlp.fc2");
  EXPECT_EQ(j2["layers"][3]["admits_tp"], false);
  EXPECT_TRUE(j2["layers"][3]["reason"].is_string());
  EXPECT_EQ(j2["layers"][2]["admits_tp"], true);
  EXPECT_TRUE(j2["layers"][2]["reason"].is_null());
  for (const json& l : j["layers"]) {
    for (const char* key : {"prefix", "format", "method", "admits_tp", "reason"})
      EXPECT_TRUE(l.contains(key)) << key;
  }
  EXPECT_TRUE(j["layers"][4]["format"].is_null());  // final_layer.linear, unquantized
  EXPECT_EQ(j["layers"][0]["format"], "int8_tensorwise");  // sorted: attn.out_proj first
  EXPECT_EQ(j["layers"][1]["format"], "nvfp4");
}

TEST(PlanAccounting, UsageErrorsThrow) {
  Checkpoint ck = mixed(Dialect::tensor).open();
  EXPECT_THROW(Plan::build(ck, PlanOptions{"vllm", 1}), UsageError);
  EXPECT_THROW(Plan::build(ck, PlanOptions{"comfyui", 0}), UsageError);
}

}  // namespace
}  // namespace mixq::testing
