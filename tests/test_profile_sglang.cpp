// The `sglang` profile: every row of docs/DISPATCH.md §3.2 (accepted format
// sets with their config, rejected sets with the exception kind), the §2.2
// inspection checks that are stricter than ComfyUI, and the §7.1 test rows.
#include "test_plan_fixtures.hpp"

namespace mixq::testing {
namespace {

using nlohmann::json;

const json kInt8 = {{"convrot", true}, {"convrot_groupsize", 256}};

void expect_config(const Plan& plan, std::string_view config) {
  expect_accepted(plan);
  EXPECT_NE(plan.runtime_config().find(config), std::string::npos) << plan.runtime_config();
}

TEST(ProfileSglang, NoMarkersMeansUnquantized) {
  PlanFixture f;
  f.dense("blocks.0.mlp.fc1", 32, 64);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "sglang");
  expect_config(plan, "none");
  EXPECT_EQ(layer_of(plan, "blocks.0.mlp.fc1").method, "unquantized");
}

TEST(ProfileSglang, Int8ConvRotResolvesSerializedConvRotInt8) {
  PlanFixture f;
  f.quantized("blocks.0.attn.out_proj", "int8_tensorwise", 2, 256, kInt8).dense("blocks.0.mlp.fc1", 8, 64);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "sglang");
  expect_config(plan, "ConvRotInt8Config");
  EXPECT_EQ(layer_of(plan, "blocks.0.attn.out_proj").method, "int8_convrot");
  EXPECT_EQ(layer_of(plan, "blocks.0.mlp.fc1").method, "unquantized");  // unmarked -> unquantized
}

TEST(ProfileSglang, Int8WithoutConvRotIsRejectedForLinears) {
  PlanFixture f;
  f.quantized("blocks.0.mlp.fc1", "int8_tensorwise", 4, 64, {{"convrot", false}}, Dialect::tensor,
              {{"convrot", false}});
  Checkpoint ck = f.open();
  expect_accepted(plan_of(ck, "comfyui"));  // ComfyUI: plain per-row INT8 GEMM
  EXPECT_EQ(layer_of(plan_of(ck, "comfyui"), "blocks.0.mlp.fc1").method, "int8_rowwise");
  Plan plan = plan_of(ck, "sglang");
  expect_rejected(plan, {"sglang would raise ValueError", "convrot=true", "blocks.0.mlp.fc1"});
  EXPECT_NE(layer_of(plan, "blocks.0.mlp.fc1").reason.find("convrot=true"), std::string::npos);
}

TEST(ProfileSglang, Int8NeedsAnExplicitConvRotGroup) {
  PlanFixture f;
  f.quantized("blocks.0.mlp.fc2", "int8_tensorwise", 4, 256, kInt8);
  // Same tensors, marker without convrot_groupsize (ComfyUI defaults it to 256).
  f.quantized("blocks.1.mlp.fc2", "int8_tensorwise", 4, 256, kInt8, Dialect::none);
  f.mark("blocks.1.mlp.fc2", json{{"format", "int8_tensorwise"}, {"convrot", true}});
  Checkpoint ck = f.open();
  Plan comfy = plan_of(ck, "comfyui");
  expect_accepted(comfy);
  EXPECT_EQ(layer_of(comfy, "blocks.1.mlp.fc2").layer.params["convrot_groupsize"], 256);
  expect_rejected(plan_of(ck, "sglang"),
                  {"ValueError", "must declare convrot_groupsize in (16, 64, 256)", "blocks.1.mlp.fc2"});
}

TEST(ProfileSglang, NestedParamsAreNotReadBySglang) {
  PlanFixture f;
  f.quantized("blocks.0.mlp.fc2", "int8_tensorwise", 4, 256, kInt8, Dialect::none);
  f.mark("blocks.0.mlp.fc2", json{{"format", "int8_tensorwise"}, {"params", kInt8}});
  Checkpoint ck = f.open();
  Plan comfy = plan_of(ck, "comfyui");
  expect_accepted(comfy);
  EXPECT_EQ(layer_of(comfy, "blocks.0.mlp.fc2").method, "int8_convrot");
  Plan sglang = plan_of(ck, "sglang");
  ASSERT_EQ(sglang.markers().nested_keys.count("blocks.0.mlp.fc2"), 1u);
  expect_rejected(sglang, {"ValueError", "convrot=true"});
  EXPECT_EQ(layer_of(sglang, "blocks.0.mlp.fc2").method, "int8_rowwise");  // what SGLang reads
}

TEST(ProfileSglang, NestedW4a4GroupWouldBeSilentlyMisread) {
  PlanFixture f;
  f.quantized("blocks.0.mlp.fc2", "convrot_w4a4", 4, 256, {{"convrot_groupsize", 64}}, Dialect::none);
  f.mark("blocks.0.mlp.fc2", json{{"format", "convrot_w4a4"}, {"params", {{"convrot_groupsize", 64}}}});
  Checkpoint ck = f.open();
  expect_accepted(plan_of(ck, "comfyui"));
  Plan sglang = plan_of(ck, "sglang");
  ASSERT_EQ(sglang.markers().nested_keys.count("blocks.0.mlp.fc2"), 1u);
  expect_rejected(sglang, {"silently", "convrot_groupsize", "64", "256"});
}

TEST(ProfileSglang, W4a4MarkerResolvesKitchenW4a4) {
  PlanFixture f;
  f.quantized("blocks.0.mlp.fc2", "convrot_w4a4", 2, 256, {{"linear_dtype", "int8"}});
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "sglang");
  expect_config(plan, "KitchenW4A4Config");
  const LayerPlan& layer = layer_of(plan, "blocks.0.mlp.fc2");
  EXPECT_EQ(layer.method, "convrot_w4a4:int8");
  EXPECT_EQ(layer.layer.find("weight")->shape, (Shape{2, 128}));
  EXPECT_EQ(layer.layer.find("weight_scale")->shape, (Shape{2}));
}

TEST(ProfileSglang, MixedW4a4AndInt8DispatchEachLayer) {
  PlanFixture f;
  f.quantized("w4a4", "convrot_w4a4", 3, 256, {{"linear_dtype", "int8"}})
      .quantized("int8", "int8_tensorwise", 3, 256, kInt8);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "sglang");
  expect_config(plan, "KitchenW4A4Config");
  EXPECT_NE(plan.runtime_config().find("ConvRotInt8Config"), std::string::npos);
  EXPECT_EQ(layer_of(plan, "w4a4").method, "convrot_w4a4:int8");
  EXPECT_EQ(layer_of(plan, "w4a4").layer.find("weight")->shape, (Shape{3, 128}));
  EXPECT_EQ(layer_of(plan, "int8").method, "int8_convrot");
  EXPECT_EQ(layer_of(plan, "int8").layer.find("weight")->shape, (Shape{3, 256}));
  EXPECT_EQ(layer_of(plan, "int8").layer.find("weight_scale")->shape, (Shape{3, 1}));
}

TEST(ProfileSglang, MixedW4a4WithNonConvRotInt8IsRejected) {
  PlanFixture f;
  f.quantized("w4a4", "convrot_w4a4", 3, 256)
      .quantized("int8", "int8_tensorwise", 3, 256, {{"convrot", false}}, Dialect::tensor, {{"convrot", false}});
  Checkpoint ck = f.open();
  expect_rejected(plan_of(ck, "sglang"), {"ValueError", "convrot=true", "'int8'"});
}

TEST(ProfileSglang, W4a8HeaderOnlyMarkerResolvesKitchenW4a8) {
  if (!find_format("asym_w4a8_int8") || !find_format("asym_w4a8_int8")->quantize)
    GTEST_SKIP() << "no asym_w4a8_int8 quantizer in the format table yet";
  PlanFixture f;
  f.quantized("blocks.0.mlp.fc2", "asym_w4a8_int8", 2, 256, {{"group_size", 16}, {"convrot_groupsize", 256}},
              Dialect::header, {{"convrot", true}});
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "sglang");
  expect_config(plan, "KitchenW4A8Config");
  const LayerPlan& layer = layer_of(plan, "blocks.0.mlp.fc2");
  EXPECT_EQ(layer.layer.find("weight")->shape, (Shape{2, 128}));
  EXPECT_EQ(layer.layer.find("weight_s_rel")->shape, (Shape{2, 16}));
  EXPECT_EQ(plan.input_partition_problem(layer, 256), "");
  EXPECT_NE(plan.input_partition_problem(layer, 128), "");
}

TEST(ProfileSglang, Fp8StaticAndDynamicSchemesPerLayer) {
  PlanFixture f;
  f.quantized("blocks.0.attn.qkv_proj", "float8_e4m3fn", 12, 64)
      .quantized("blocks.0.mlp.fc1", "float8_e4m3fn", 8, 64)
      .f32("blocks.0.mlp.fc1.input_scale", {}, 0.5f)
      .quantized("blocks.0.mlp.fc2", "float8_e4m3fn", 8, 64, {}, Dialect::tensor, {{"full_precision_matrix_mult", true}})
      .dense("refiner.linear", 8, 64);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "sglang");
  expect_config(plan, "ComfyFp8Config");
  EXPECT_EQ(layer_of(plan, "blocks.0.attn.qkv_proj").method, "fp8:dynamic");
  EXPECT_EQ(layer_of(plan, "blocks.0.mlp.fc1").method, "fp8:static");
  EXPECT_EQ(layer_of(plan, "blocks.0.mlp.fc2").method, "fp8:full_precision");
  EXPECT_EQ(layer_of(plan, "refiner.linear").method, "unquantized");
  // ComfyUI quantizes the activation with scale 1.0 when input_scale is absent.
  EXPECT_EQ(layer_of(plan_of(ck, "comfyui"), "blocks.0.attn.qkv_proj").method, "fp8:unit_scale");
}

TEST(ProfileSglang, FullPrecisionFp8RefusesFusedLinears) {
  PlanFixture f;
  f.quantized("blocks.0.mlp.fc1", "float8_e4m3fn", 8, 64, {}, Dialect::tensor, {{"full_precision_matrix_mult", true}});
  Checkpoint ck = f.open();
  expect_accepted(plan_of(ck, "comfyui"));
  expect_rejected(plan_of(ck, "sglang"), {"ValueError", "does not support fused linears", "blocks.0.mlp.fc1"});
}

TEST(ProfileSglang, Nvfp4AloneAndWithInt8EmbeddingCompanion) {
  PlanFixture f;
  f.quantized("blocks.0.attn.qkv_proj", "nvfp4", 384, 64)
      .quantized("text.embed_tokens", "int8_tensorwise", 16, 64, {{"convrot", false}}, Dialect::tensor,
                 {{"convrot", false}});
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "sglang");
  expect_config(plan, "ComfyNvfp4Config");
  EXPECT_EQ(layer_of(plan, "blocks.0.attn.qkv_proj").method, "nvfp4");
  EXPECT_TRUE(layer_of(plan, "text.embed_tokens").embedding);
  EXPECT_EQ(layer_of(plan, "text.embed_tokens").method.rfind("embedding:int8", 0), 0u)
      << layer_of(plan, "text.embed_tokens").method;
}

TEST(ProfileSglang, Nvfp4WithInt8LinearIsAnUnsupportedCompanion) {
  PlanFixture f;
  f.quantized("blocks.0.attn.qkv_proj", "nvfp4", 384, 64)
      .quantized("blocks.0.attn.out_proj", "int8_tensorwise", 128, 256, kInt8);
  Checkpoint ck = f.open();
  expect_rejected(plan_of(ck, "sglang"),
                  {"ValueError", "Unsupported Comfy NVFP4 companion", "blocks.0.attn.out_proj"});
}

TEST(ProfileSglang, Nvfp4InputScaleIsIgnoredByTheGenericPath) {
  PlanFixture f;
  f.quantized("blocks.0.mlp.fc2", "nvfp4", 128, 64).f32("blocks.0.mlp.fc2.input_scale", {}, 0.01f);
  Checkpoint ck = f.open();
  EXPECT_EQ(layer_of(plan_of(ck, "sglang"), "blocks.0.mlp.fc2").method, "nvfp4:dynamic");
  EXPECT_EQ(layer_of(plan_of(ck, "comfyui"), "blocks.0.mlp.fc2").method, "nvfp4");
}

TEST(ProfileSglang, Nvfp4ScaleMustBeExactlyNByKOver16) {
  PlanFixture f;
  // N = 32: Comfy's swizzled scale is padded to 128 rows, which SGLang refuses.
  f.quantized("blocks.0.mlp.fc2", "nvfp4", 32, 64);
  Checkpoint ck = f.open();
  expect_accepted(plan_of(ck, "comfyui"));
  expect_rejected(plan_of(ck, "sglang"), {"ValueError", "weight_scale must be exactly [32, 4]"});
}

TEST(ProfileSglang, Int8ScaleOfShapeNIsRejectedByInspection) {
  PlanFixture f;
  f.zeros("blocks.0.mlp.fc2.weight", DType::I8, {4, 256}).f32("blocks.0.mlp.fc2.weight_scale", {4}, 0.1f)
      .mark("blocks.0.mlp.fc2", json{{"format", "int8_tensorwise"}, {"convrot", true}, {"convrot_groupsize", 256}});
  Checkpoint ck = f.open();
  expect_accepted(plan_of(ck, "comfyui"));  // ComfyUI takes a per-row scale of shape [N]
  expect_rejected(plan_of(ck, "sglang"), {"ValueError", "incompatible weight/scale shapes", "[4]"});
}

TEST(ProfileSglang, Mxfp8MarkersResolveMxfp8) {
  PlanFixture f;
  f.quantized("blocks.0.mlp.fc2", "mxfp8", 128, 128).dense("refiner.linear", 8, 64);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "sglang");
  expect_config(plan, "MXFP8Config");
  EXPECT_EQ(layer_of(plan, "blocks.0.mlp.fc2").method, "mxfp8");
}

// SGLang's global MXFP8 rule (more in test_sglang_parity.cpp): unmarked F8
// weights with U8 [N, K/32] scales run as mxfp8 with row-major scales.
TEST(ProfileSglang, GlobalMxfp8HeaderIsPlannedAsSglangReadsIt) {
  PlanFixture f;
  f.zeros("blocks.0.mlp.fc2.weight", DType::F8_E4M3, {32, 64})
      .zeros("blocks.0.mlp.fc2.weight_scale", DType::U8, {32, 2})
      .dense("refiner.linear", 8, 64)
      .metadata("quant_format", "mxfp8");
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "sglang");
  expect_accepted(plan);
  EXPECT_EQ(layer_of(plan, "blocks.0.mlp.fc2").method, "mxfp8:row_major_scales");
  EXPECT_EQ(layer_of(plan, "refiner.linear").method, "unquantized");
}

struct UnsupportedSet {
  std::vector<std::pair<std::string, json>> layers;  // format, params
  std::string listed;
};

TEST(ProfileSglang, UnsupportedFormatSetsRaiseNotImplementedError) {
  const std::vector<UnsupportedSet> cases{
      {{{"float8_e4m3fn", json::object()}, {"nvfp4", json::object()}}, "float8_e4m3fn, nvfp4"},
      {{{"float8_e5m2", json::object()}}, "float8_e5m2"},
      {{{"float8_e4m3fn", json::object()}, {"int8_tensorwise", kInt8}}, "float8_e4m3fn, int8_tensorwise"},
      {{{"convrot_w4a4", json::object()}, {"nvfp4", json::object()}}, "convrot_w4a4, nvfp4"},
      {{{"float8_e4m3fn", json::object()}, {"int8_tensorwise", kInt8}, {"nvfp4", json::object()}},
       "float8_e4m3fn, int8_tensorwise, nvfp4"},
  };
  for (const UnsupportedSet& c : cases) {
    PlanFixture f;
    int i = 0;
    for (const auto& [format, params] : c.layers)
      f.quantized(fmt::format("blocks.{}.mlp.fc2", i++), format, 128, 256, params);
    Checkpoint ck = f.open();
    expect_accepted(plan_of(ck, "comfyui"));
    Plan plan = plan_of(ck, "sglang");
    expect_rejected(plan, {"sglang would raise NotImplementedError: Unsupported Comfy quantization format(s): " +
                           c.listed});
    for (const LayerPlan& layer : plan.layers()) EXPECT_FALSE(layer.reason.empty()) << layer.prefix();
  }
}

}  // namespace
}  // namespace mixq::testing
