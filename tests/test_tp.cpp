// Tensor-parallel admission (docs/DISPATCH.md §4): the partition predicates
// with its numbers, row / column / fused splits, the H3 worked example
// of §4.4 on the real layer widths, diffusers FLUX names, and --tp rejections.
#include "test_plan_fixtures.hpp"

namespace mixq::testing {
namespace {

using nlohmann::json;

const json kInt8 = {{"convrot", true}, {"convrot_groupsize", 256}};

TEST(TensorParallel, Int8Group256AdmitsA6400SplitAndRejects3200) {
  PlanFixture f;
  f.quantized("blocks.0.attn.out_proj", "int8_tensorwise", 2, 256, kInt8);
  Checkpoint ck = f.open();
  for (const char* profile : {"comfyui", "sglang", "sglang-minimax-h3"}) {
    Plan plan = plan_of(ck, profile);
    const LayerPlan& layer = layer_of(plan, "blocks.0.attn.out_proj");
    EXPECT_EQ(plan.input_partition_problem(layer, 6400), "") << profile;
    EXPECT_NE(plan.input_partition_problem(layer, 3200).find("256"), std::string::npos) << profile;
  }
  Plan sglang = plan_of(ck, "sglang");
  EXPECT_NE(sglang.input_partition_problem(layer_of(sglang, "blocks.0.attn.out_proj"), 3200).find("ValueError"),
            std::string::npos);
}

TEST(TensorParallel, Int8Group64AdmitsSmallerShards) {
  PlanFixture f;
  f.quantized("x", "int8_tensorwise", 2, 256, {{"convrot", true}, {"convrot_groupsize", 64}});
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "sglang");
  EXPECT_EQ(plan.input_partition_problem(layer_of(plan, "x"), 896), "");
  EXPECT_NE(plan.input_partition_problem(layer_of(plan, "x"), 32), "");
}

TEST(TensorParallel, W4a4AdmitsA256SplitAndRejects128) {
  PlanFixture f;
  f.quantized("blocks.0.mlp.fc2", "convrot_w4a4", 2, 256, {{"linear_dtype", "int8"}});
  Checkpoint ck = f.open();
  for (const char* profile : {"comfyui", "sglang"}) {
    Plan plan = plan_of(ck, profile);
    const LayerPlan& layer = layer_of(plan, "blocks.0.mlp.fc2");
    EXPECT_EQ(plan.input_partition_problem(layer, 256), "") << profile;
    EXPECT_NE(plan.input_partition_problem(layer, 128), "") << profile;
  }
  // The quantization group of 64 applies even with a smaller ConvRot group.
  PlanFixture g;
  g.quantized("y", "convrot_w4a4", 2, 256, {{"convrot_groupsize", 16}});
  Checkpoint ck16 = g.open();
  Plan plan = plan_of(ck16, "sglang");
  EXPECT_EQ(plan.input_partition_problem(layer_of(plan, "y"), 64), "");
  const std::string problem = plan.input_partition_problem(layer_of(plan, "y"), 48);
  EXPECT_NE(problem.find("64"), std::string::npos) << problem;
}

TEST(TensorParallel, W4a8AdmitsA256SplitAndRejects128) {
  if (!find_format("asym_w4a8_int8") || !find_format("asym_w4a8_int8")->quantize)
    GTEST_SKIP() << "no asym_w4a8_int8 quantizer in the format table yet";
  PlanFixture f;
  f.quantized("x", "asym_w4a8_int8", 2, 256, {{"group_size", 16}, {"convrot_groupsize", 256}}, Dialect::tensor,
              {{"convrot", true}});
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "sglang");
  EXPECT_EQ(plan.input_partition_problem(layer_of(plan, "x"), 256), "");
  EXPECT_NE(plan.input_partition_problem(layer_of(plan, "x"), 128), "");
}

TEST(TensorParallel, Nvfp4NeedsShardsOf16AndUnquantizedAnything) {
  PlanFixture f;
  f.quantized("a", "nvfp4", 128, 64).dense("b", 8, 60);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "sglang");
  EXPECT_EQ(plan.input_partition_problem(layer_of(plan, "a"), 32), "");
  EXPECT_NE(plan.input_partition_problem(layer_of(plan, "a"), 24).find("not multiple of 16"), std::string::npos);
  EXPECT_EQ(plan.input_partition_problem(layer_of(plan, "b"), 15), "");
}

// §4.4 on the real widths: out_proj K = 7168, fc2 K = 14336; N kept tiny.
TEST(TensorParallel, MiniMaxH3WorkedExample) {
  PlanFixture f;
  f.quantized("blocks.0.attn.out_proj", "int8_tensorwise", 2, 7168, kInt8)
      .quantized("blocks.0.mlp.fc2", "nvfp4", 16, 14336);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "comfyui");
  expect_accepted(plan);
  const LayerPlan& out = layer_of(plan, "blocks.0.attn.out_proj");
  const LayerPlan& fc2 = layer_of(plan, "blocks.0.mlp.fc2");
  EXPECT_EQ(out.parallel, Parallel::row);
  EXPECT_EQ(fc2.parallel, Parallel::row);
  std::vector<int> out_ok, fc2_ok;
  for (int tp = 1; tp <= 64; ++tp) {
    if (plan.tp_problem(out, tp).empty()) out_ok.push_back(tp);
    if (plan.tp_problem(fc2, tp).empty()) fc2_ok.push_back(tp);
  }
  EXPECT_EQ(out_ok, (std::vector<int>{1, 2, 4, 7, 14, 28}));  // TP 8 fails: 896 % 256 != 0
  EXPECT_EQ(fc2_ok, (std::vector<int>{1, 2, 4, 7, 8, 14, 16, 28, 32, 56, 64}));
  EXPECT_NE(plan.tp_problem(out, 8).find("896"), std::string::npos) << plan.tp_problem(out, 8);
  EXPECT_EQ(plan.admitted_tp(), out_ok);
}

// Whole heads per rank: 56 heads of 128 in each of q, k, v.
TEST(TensorParallel, MiniMaxH3HeadsLimitTheDegree) {
  PlanFixture f;
  f.dense("blocks.0.attn.qkv_proj", 3 * 7168, 8)
      .quantized("blocks.0.attn.out_proj", "int8_tensorwise", 2, 7168, kInt8);
  Checkpoint ck = f.open();
  Plan h3 = plan_of(ck, "sglang-minimax-h3");
  const LayerPlan& qkv = layer_of(h3, "blocks.0.attn.qkv_proj");
  EXPECT_EQ(qkv.parts, 3);
  std::vector<int> qkv_ok;
  for (int tp = 1; tp <= 64; ++tp)
    if (h3.tp_problem(qkv, tp).empty()) qkv_ok.push_back(tp);
  EXPECT_EQ(qkv_ok, (std::vector<int>{1, 2, 4, 7, 8, 14, 28, 56}));
  EXPECT_NE(h3.tp_problem(qkv, 16).find("56 attention heads"), std::string::npos);
  EXPECT_EQ(h3.admitted_tp(), (std::vector<int>{1, 2, 4, 7, 14, 28}));  // §8.3
  // Without the H3 head rule, any divisor of each 7168-row part splits.
  EXPECT_EQ(plan_of(ck, "comfyui").tp_problem(layer_of(plan_of(ck, "comfyui"), "blocks.0.attn.qkv_proj"), 16), "");
}

TEST(TensorParallel, FusedColumnLayersSplitEachPart) {
  PlanFixture f;
  f.dense("blocks.0.mlp.fc1", 2 * 12, 16).dense("blocks.0.adaln_proj.linear", 24, 16);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "comfyui");
  const LayerPlan& fc1 = layer_of(plan, "blocks.0.mlp.fc1");
  const LayerPlan& adaln = layer_of(plan, "blocks.0.adaln_proj.linear");
  EXPECT_EQ(fc1.parts, 2);
  EXPECT_EQ(adaln.parts, 1);
  EXPECT_EQ(plan.tp_problem(fc1, 4), "");  // 12 rows per part split in 4
  EXPECT_NE(plan.tp_problem(fc1, 8).find("each of the 2 fused parts"), std::string::npos);
  EXPECT_EQ(plan.tp_problem(adaln, 8), "");  // 24 rows, not fused
  EXPECT_NE(plan.tp_problem(adaln, 5), "");

  // A "qkv_proj" of another model whose rows do not form 3 parts: fine unsplit, refused when split.
  PlanFixture odd;
  odd.dense("layers.0.attn.qkv_proj", 10, 16);
  Checkpoint odd_ck = odd.open();
  Plan odd_plan = plan_of(odd_ck, "comfyui");
  expect_accepted(odd_plan);
  EXPECT_NE(odd_plan.tp_problem(layer_of(odd_plan, "layers.0.attn.qkv_proj"), 2).find("3 equal parts"),
            std::string::npos);
}

TEST(TensorParallel, TpOptionRejectsLayersThatDoNotAdmitIt) {
  PlanFixture f;
  f.quantized("blocks.0.attn.out_proj", "int8_tensorwise", 2, 7168, kInt8);
  Checkpoint ck = f.open();
  expect_accepted(plan_of(ck, "sglang-minimax-h3", 4));
  Plan plan = plan_of(ck, "sglang-minimax-h3", 8);
  expect_rejected(plan, {"--tp 8", "blocks.0.attn.out_proj", "896"});
  const LayerPlan& layer = layer_of(plan, "blocks.0.attn.out_proj");
  EXPECT_FALSE(layer.admits_tp);
  EXPECT_NE(layer.reason.find("896"), std::string::npos);
  EXPECT_EQ(plan.to_json()["layers"][0]["admits_tp"], false);
}

TEST(TensorParallel, EmbeddingsAreReplicated) {
  PlanFixture f;
  f.dense("text.embed_tokens", 10, 16).dense("time_embedder.proj_in", 10, 16);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "comfyui");
  EXPECT_EQ(layer_of(plan, "text.embed_tokens").parallel, Parallel::replicated);
  EXPECT_TRUE(layer_of(plan, "text.embed_tokens").embedding);
  EXPECT_FALSE(layer_of(plan, "time_embedder.proj_in").embedding);  // "embedder" is a linear
  EXPECT_EQ(plan.tp_problem(layer_of(plan, "text.embed_tokens"), 3), "");
  EXPECT_NE(plan.tp_problem(layer_of(plan, "time_embedder.proj_in"), 3), "");
}

// Diffusers FLUX names: attention and feed-forward pairs split column into row
// as H3's do; a single block's proj_out reads cat(attention, MLP) and stays
// column-parallel, as does every other linear (docs/TP.md).
TEST(TensorParallel, DiffusersFluxNamesPairColumnIntoRow) {
  PlanFixture f;
  const std::string block = "transformer_blocks.0.", single = "single_transformer_blocks.0.";
  for (const char* name : {"attn.to_q", "attn.to_k", "attn.to_v", "attn.add_q_proj", "attn.add_k_proj",
                           "attn.add_v_proj", "ff.net.0.proj", "ff_context.net.0.proj", "norm1.linear"})
    f.dense(block + name, 64, 32);
  for (const char* name : {"attn.to_out.0", "attn.to_add_out", "ff.net.2", "ff_context.net.2"})
    f.dense(block + name, 32, 64);
  f.dense(single + "attn.to_q", 64, 32).dense(single + "proj_mlp", 128, 32).dense(single + "proj_out", 32, 192);
  f.dense("proj_out", 16, 32).dense("x_embedder", 32, 16);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "comfyui");
  expect_accepted(plan);
  for (const LayerPlan& layer : plan.layers()) {
    SCOPED_TRACE(layer.prefix());
    const std::string& p = layer.prefix();
    const bool row = p.ends_with("to_out.0") || p.ends_with("to_add_out") || p.ends_with("net.2");
    EXPECT_EQ(layer.parallel, row ? Parallel::row : Parallel::column);
    EXPECT_EQ(layer.parts, 1);
  }
  EXPECT_EQ(layer_of(plan, block + "ff.net.2").parallel, Parallel::row);
  EXPECT_EQ(layer_of(plan, single + "proj_out").parallel, Parallel::column);
  EXPECT_EQ(layer_of(plan, "x_embedder").parallel, Parallel::column);
}

// FLUX.1's attention output projection at its real K = 3072 with ConvRot INT8
// (group 256): 8 ranks would hold 384 input features, not whole groups.
TEST(TensorParallel, FluxInt8AttentionOutputAdmits1To4Not8) {
  PlanFixture f;
  f.quantized("transformer_blocks.0.attn.to_out.0", "int8_tensorwise", 2, 3072, kInt8);
  Checkpoint ck = f.open();
  Plan plan = plan_of(ck, "comfyui");
  const LayerPlan& out = layer_of(plan, "transformer_blocks.0.attn.to_out.0");
  ASSERT_EQ(out.parallel, Parallel::row);
  EXPECT_EQ(plan.admitted_tp(8), (std::vector<int>{1, 2, 3, 4, 6}));
  EXPECT_NE(plan.tp_problem(out, 8).find("384"), std::string::npos) << plan.tp_problem(out, 8);
}

}  // namespace
}  // namespace mixq::testing
