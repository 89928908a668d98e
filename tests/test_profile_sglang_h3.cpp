// The `sglang-minimax-h3` profile (docs/DISPATCH.md §3.3 and the H3 rows of
// §7.1): NVFP4 with INT8-ConvRot and FP8 companions, forced Comfy layout
// flags, fallback to the generic resolver without NVFP4.
#include "test_plan_fixtures.hpp"

namespace mixq::testing {
namespace {

using nlohmann::json;

const json kInt8 = {{"convrot", true}, {"convrot_groupsize", 256}};
constexpr const char* kH3 = "sglang-minimax-h3";

TEST(ProfileSglangH3, MixedNvfp4CompanionsDispatchEachLayer) {
  PlanFixture f;
  f.quantized("blocks.0.attn.qkv_proj", "nvfp4", 384, 256)
      .quantized("blocks.0.attn.out_proj", "int8_tensorwise", 128, 256, kInt8)
      .quantized("blocks.0.mlp.fc1", "float8_e4m3fn", 256, 128)
      .dense("blocks.0.mlp.fc2", 128, 128);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, kH3);
  expect_accepted(plan);
  for (std::string_view flag : {"ModelOptFp4Config", "group 16", "native QKV", "swizzled", "nibble swap",
                                "ConvRotInt8Config", "ComfyFp8Config"})
    EXPECT_NE(plan.runtime_config().find(flag), std::string::npos) << flag << " in " << plan.runtime_config();
  // ModelOpt FP4: no input_scale -> static activation scale 1.0.
  EXPECT_EQ(layer_of(plan, "blocks.0.attn.qkv_proj").method, "nvfp4:unit_scale");
  EXPECT_EQ(layer_of(plan, "blocks.0.attn.out_proj").method, "int8_convrot");
  EXPECT_EQ(layer_of(plan, "blocks.0.mlp.fc1").method, "fp8:dynamic");
  EXPECT_EQ(layer_of(plan, "blocks.0.mlp.fc2").method, "unquantized");
  // The generic resolver does not accept this set.
  expect_rejected(plan_of(ck, "sglang"),
                  {"NotImplementedError: Unsupported Comfy quantization format(s): float8_e4m3fn, "
                   "int8_tensorwise, nvfp4"});
  expect_accepted(plan_of(ck, "comfyui"));
}

TEST(ProfileSglangH3, Nvfp4WithInputScaleKeepsIt) {
  PlanFixture f;
  f.quantized("blocks.0.mlp.fc2", "nvfp4", 128, 128).f32("blocks.0.mlp.fc2.input_scale", {}, 0.02f);
  Checkpoint ck = f.open();
  EXPECT_EQ(layer_of(plan_of(ck, kH3), "blocks.0.mlp.fc2").method, "nvfp4");
}

TEST(ProfileSglangH3, OtherNvfp4CompanionsAreNotImplemented) {
  PlanFixture f;
  f.quantized("blocks.0.attn.qkv_proj", "nvfp4", 384, 256)
      .quantized("blocks.0.mlp.fc2", "convrot_w4a4", 128, 256);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, kH3);
  expect_rejected(plan, {"sglang would raise NotImplementedError: Unsupported Comfy NVFP4 companion format(s): "
                         "convrot_w4a4"});
  EXPECT_FALSE(layer_of(plan, "blocks.0.mlp.fc2").reason.empty());
  EXPECT_TRUE(layer_of(plan, "blocks.0.attn.qkv_proj").reason.empty());
}

TEST(ProfileSglangH3, Int8CompanionStillNeedsConvRot) {
  PlanFixture f;
  f.quantized("blocks.0.attn.qkv_proj", "nvfp4", 384, 256)
      .quantized("blocks.0.attn.out_proj", "int8_tensorwise", 128, 256, {{"convrot", false}}, Dialect::tensor,
                 {{"convrot", false}});
  Checkpoint ck = f.open();
  expect_rejected(plan_of(ck, kH3), {"ValueError", "convrot=true", "blocks.0.attn.out_proj"});
}

TEST(ProfileSglangH3, HeaderOnlyNvfp4InOneShardBf16InAnother) {
  PlanFixture a, b;
  a.quantized("blocks.0.attn.qkv_proj", "nvfp4", 384, 128, {}, Dialect::header);
  b.dense("blocks.0.mlp.fc1", 256, 128);
  const std::string path_a = a.write("shard-a"), path_b = b.write("shard-b");
  Checkpoint ck = Checkpoint::open(std::vector<std::string>{path_a, path_b});
  Plan plan = plan_of(ck, kH3);
  expect_accepted(plan);
  EXPECT_NE(plan.runtime_config().find("ModelOptFp4Config"), std::string::npos);
  EXPECT_EQ(layer_of(plan, "blocks.0.attn.qkv_proj").format_name(), "nvfp4");
  EXPECT_EQ(layer_of(plan, "blocks.0.mlp.fc1").method, "unquantized");  // excluded from the FP4 set
}

TEST(ProfileSglangH3, WithoutNvfp4FallsBackToTheGenericResolver) {
  PlanFixture f;
  f.quantized("blocks.0.attn.out_proj", "int8_tensorwise", 2, 256, kInt8).f32("adaln_t_table", {1025, 8}, 0.0f);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, kH3);
  expect_accepted(plan);
  EXPECT_NE(plan.runtime_config().find("ConvRotInt8Config"), std::string::npos);
  EXPECT_EQ(layer_of(plan, "blocks.0.attn.out_proj").format_name(), "int8_tensorwise");
  EXPECT_EQ(plan.find("adaln_t_table"), nullptr);  // the curve table is no linear and no orphan
}

TEST(ProfileSglangH3, Fp8PerLayerDispatchWithFullPrecisionFc2) {
  PlanFixture f;
  f.quantized("blocks.0.attn.qkv_proj", "float8_e4m3fn", 384, 64)
      .quantized("blocks.0.mlp.fc2", "float8_e4m3fn", 64, 128, {}, Dialect::tensor,
                 {{"full_precision_matrix_mult", true}})
      .dense("blocks.0.attn.out_proj", 64, 128);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, kH3);
  expect_accepted(plan);
  EXPECT_NE(plan.runtime_config().find("ComfyFp8Config"), std::string::npos);
  EXPECT_EQ(layer_of(plan, "blocks.0.attn.qkv_proj").method, "fp8:dynamic");
  EXPECT_EQ(layer_of(plan, "blocks.0.mlp.fc2").method, "fp8:full_precision");
  EXPECT_EQ(layer_of(plan, "blocks.0.attn.out_proj").method, "unquantized");
}

TEST(ProfileSglangH3, FullPrecisionFp8CompanionOnFusedQkvIsRefused) {
  PlanFixture f;
  f.quantized("blocks.0.mlp.fc2", "nvfp4", 128, 128)
      .quantized("blocks.0.attn.qkv_proj", "float8_e4m3fn", 384, 64, {}, Dialect::tensor,
                 {{"full_precision_matrix_mult", true}});
  Checkpoint ck = f.open();
  expect_rejected(plan_of(ck, kH3), {"ValueError", "does not support fused linears", "blocks.0.attn.qkv_proj"});
}

TEST(ProfileSglangH3, SeparateQkvMustFormCompleteTriplesWithOneMarker) {
  PlanFixture ok;
  for (const char* p : {"q_proj", "k_proj", "v_proj"})
    ok.quantized(std::string("blocks.0.attn.") + p, "int8_tensorwise", 256, 256, kInt8);
  Checkpoint ok_ck = ok.open();
  Plan plan = plan_of(ok_ck, kH3);
  expect_accepted(plan);
  // Each of q, k, v holds 2 heads of 128: tp 4 would split a head.
  EXPECT_EQ(plan.tp_problem(layer_of(plan, "blocks.0.attn.k_proj"), 2), "");
  EXPECT_NE(plan.tp_problem(layer_of(plan, "blocks.0.attn.k_proj"), 4).find("2 attention heads"), std::string::npos);

  PlanFixture partial;
  partial.quantized("blocks.0.attn.q_proj", "int8_tensorwise", 256, 256, kInt8)
      .quantized("blocks.0.attn.k_proj", "int8_tensorwise", 256, 256, kInt8);
  Checkpoint partial_ck = partial.open();
  expect_rejected(plan_of(partial_ck, kH3), {"ValueError", "expected q, k, and v", "found q_proj, k_proj"});
  expect_accepted(plan_of(partial_ck, "sglang"));  // only the H3 loader merges them

  PlanFixture mixed;
  mixed.quantized("blocks.0.attn.q_proj", "int8_tensorwise", 256, 256, kInt8)
      .quantized("blocks.0.attn.k_proj", "int8_tensorwise", 256, 256, kInt8)
      .quantized("blocks.0.attn.v_proj", "int8_tensorwise", 256, 256, {{"convrot", true}, {"convrot_groupsize", 64}});
  Checkpoint mixed_ck = mixed.open();
  expect_rejected(plan_of(mixed_ck, kH3), {"ValueError", "collide", "blocks.0.attn.qkv_proj"});
}

}  // namespace
}  // namespace mixq::testing
