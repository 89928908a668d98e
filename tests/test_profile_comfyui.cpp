// The `comfyui` profile, mirroring ComfyUI's tests-unit/comfy_quant rows
// (docs/DISPATCH.md §7.2): per-layer loading of any mixture, its defaults,
// nested params, unknown formats, unrecognized scale tensors, embeddings.
#include "test_plan_fixtures.hpp"

namespace mixq::testing {
namespace {

using nlohmann::json;

TEST(ProfileComfyui, MetadataDrivenFp8OnLayers1And3Bf16OnLayer2) {
  PlanFixture f;
  f.quantized("layer1", "float8_e4m3fn", 16, 32, {}, Dialect::header)
      .dense("layer2", 16, 16)
      .quantized("layer3", "float8_e4m3fn", 8, 16, {}, Dialect::header)
      .f32("layer3.input_scale", {}, 0.5f);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "comfyui");
  expect_accepted(plan);
  EXPECT_EQ(plan.layers().size(), 3u);
  EXPECT_EQ(layer_of(plan, "layer1").method, "fp8:unit_scale");
  EXPECT_EQ(layer_of(plan, "layer2").method, "unquantized");
  EXPECT_EQ(layer_of(plan, "layer3").method, "fp8:static");
  EXPECT_TRUE(layer_of(plan, "layer3").layer.find("input_scale"));
  EXPECT_EQ(layer_of(plan, "layer1").layer.out_features, 16);
  EXPECT_EQ(layer_of(plan, "layer1").layer.in_features, 32);
  EXPECT_NE(plan.runtime_config().find("mixed_ops"), std::string::npos);
}

TEST(ProfileComfyui, UnknownFormatIsKeyError) {
  PlanFixture f;
  f.dense("layer1", 4, 8).mark("layer1", json{{"format", "not_a_format"}});
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "comfyui");
  expect_rejected(plan, {"comfyui would raise KeyError: 'not_a_format'", "layer1"});
  EXPECT_EQ(layer_of(plan, "layer1").method, "invalid");
}

TEST(ProfileComfyui, Int8ConvRotMetadataReachesParams) {
  PlanFixture f;
  f.quantized("layer", "int8_tensorwise", 4, 256, {{"convrot", true}, {"convrot_groupsize", 256}}, Dialect::none)
      .mark("layer", json{{"format", "int8_tensorwise"}, {"convrot", true}});  // group from the default
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "comfyui");
  expect_accepted(plan);
  const LayerPlan& layer = layer_of(plan, "layer");
  EXPECT_EQ(layer.layer.params["convrot"], true);
  EXPECT_EQ(layer.layer.params["convrot_groupsize"], 256);
  EXPECT_EQ(layer.method, "int8_convrot");
}

TEST(ProfileComfyui, ConvRotW4a4KeepsLinearDtypeAndGroup) {
  PlanFixture f;
  f.quantized("layer", "convrot_w4a4", 4, 256, {{"linear_dtype", "int8"}});
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "comfyui");
  expect_accepted(plan);
  const LayerPlan& layer = layer_of(plan, "layer");
  EXPECT_EQ(layer.layer.params["linear_dtype"], "int8");
  EXPECT_EQ(layer.layer.params["convrot_groupsize"], 256);
  EXPECT_EQ(layer.method, "convrot_w4a4:int8");
}

TEST(ProfileComfyui, NestedParamsAreHonoured) {
  PlanFixture f;
  f.quantized("layer", "int8_tensorwise", 4, 256, {{"convrot", true}, {"convrot_groupsize", 64}}, Dialect::none)
      .mark("layer", json{{"format", "int8_tensorwise"}, {"params", {{"convrot", true}, {"convrot_groupsize", 64}}}});
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "comfyui");
  expect_accepted(plan);
  EXPECT_EQ(layer_of(plan, "layer").layer.params["convrot_groupsize"], 64);
  EXPECT_EQ(layer_of(plan, "layer").method, "int8_convrot");
}

TEST(ProfileComfyui, UnrecognizedQuantMetadataIsRuntimeError) {
  PlanFixture f;
  f.dense("layer1", 4, 8).f32("layer1.weight_scale", {}, 1.0f).dense("layer2", 4, 8).f32("layer2.input_scale", {}, 1.0f);
  Checkpoint ck = f.open();
  expect_rejected(plan_of(ck, "comfyui"), {"comfyui would raise RuntimeError: unrecognized quantization scale "
                                           "tensors: ['layer1.weight_scale', 'layer2.input_scale']"});
}

TEST(ProfileComfyui, EmbeddingsHonourOnlyFp8AndInt8) {
  PlanFixture ok;
  ok.quantized("text.embed_tokens", "int8_tensorwise", 16, 64, {{"convrot", false}}, Dialect::tensor,
               {{"convrot", false}});
  Checkpoint ok_ck = ok.open();
  Plan plan = plan_of(ok_ck, "comfyui");
  expect_accepted(plan);
  EXPECT_EQ(layer_of(plan, "text.embed_tokens").method.rfind("embedding:", 0), 0u);

  PlanFixture bad;
  bad.quantized("text.embed_tokens", "nvfp4", 128, 64);
  Checkpoint bad_ck = bad.open();
  expect_rejected(plan_of(bad_ck, "comfyui"), {"embedding", "text.embed_tokens", "nvfp4"});
}

}  // namespace
}  // namespace mixq::testing
