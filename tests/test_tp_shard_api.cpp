// shard_layer's contract beyond the property test: bad ranks and degrees are
// refused naming the layer and the value; a split the plan rejects (sizes,
// format layout, SGLang MiniMax-H3's whole heads) is refused with the text
// `mixq plan --tp` prints; contiguous shares are views into the checkpoint;
// replicated layers and degree 1 are the layer itself; the shard keeps the
// source's names, marker parameters and per-tensor scales.
#include <gtest/gtest.h>

#include "mixq/checkpoint.hpp"
#include "mixq/format.hpp"
#include "mixq/plan.hpp"
#include "mixq/shard.hpp"
#include "test_format_svdquant_helpers.hpp"
#include "test_plan_fixtures.hpp"

namespace mixq::testing {
namespace {

std::string error_of(const Plan& plan, const std::string& prefix, int rank, int degree) {
  try {
    shard_layer(plan, *plan.find(prefix), rank, degree);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool inside(const TensorView& view, const TensorView& of) {
  return view.data.data() >= of.data.data() && view.data.data() + view.data.size() <= of.data.data() + of.data.size();
}

TEST(TpShardApi, RankAndDegreeOutOfRangeNameTheLayerAndValue) {
  PlanFixture f;
  f.dense("blocks.0.mlp.fc2", 64, 128);
  const Checkpoint ck = f.open();
  const Plan plan = plan_of(ck, "comfyui");
  EXPECT_EQ(error_of(plan, "blocks.0.mlp.fc2", 2, 2),
            "layer 'blocks.0.mlp.fc2': rank 2 is out of range for tensor-parallel degree 2 (ranks 0..1)");
  EXPECT_NE(error_of(plan, "blocks.0.mlp.fc2", -1, 4).find("rank -1 is out of range"), std::string::npos);
  EXPECT_NE(error_of(plan, "blocks.0.mlp.fc2", 0, 0).find("degree 0 is not >= 1"), std::string::npos);
  // 128 input features into 3 ranks: the plan's own reason.
  const std::string problem = plan.tp_problem(*plan.find("blocks.0.mlp.fc2"), 3);
  EXPECT_EQ(problem, "row-parallel: 128 input features do not split into 3 equal shards");
  EXPECT_EQ(error_of(plan, "blocks.0.mlp.fc2", 0, 3), "layer 'blocks.0.mlp.fc2' does not admit --tp 3: " + problem);
}

TEST(TpShardApi, RefusalsCarryThePlansReason) {
  PlanFixture f;
  f.quantized("blocks.0.attn.out_proj", "int8_tensorwise", 64, 1024, {{"convrot", true}, {"convrot_groupsize", 256}})
      .quantized("blocks.0.attn.qkv_proj", "int8_tensorwise", 3 * 256, 256, {{"convrot", true}, {"convrot_groupsize", 256}});
  const Checkpoint ck = f.open();
  for (const char* profile : {"comfyui", "sglang-minimax-h3"}) {
    SCOPED_TRACE(profile);
    const Plan plan = plan_of(ck, profile);
    // K 1024 over 8 ranks: 128 features, less than a ConvRot group of 256.
    const Plan at8 = Plan::build(ck, {.profile = profile, .tp = 8});
    const LayerPlan* out = at8.find("blocks.0.attn.out_proj");
    ASSERT_FALSE(out->admits_tp);
    EXPECT_NE(at8.error().find(out->reason), std::string::npos);  // what `mixq plan --tp 8` prints
    EXPECT_NE(error_of(plan, "blocks.0.attn.out_proj", 0, 8).find(out->reason), std::string::npos);
  }
  // MiniMax-H3 needs whole heads of 128 rows: 2 heads per part do not split into 4.
  const Plan h3 = plan_of(ck, "sglang-minimax-h3");
  const Plan h3at4 = Plan::build(ck, {.profile = "sglang-minimax-h3", .tp = 4});
  const std::string heads = h3at4.find("blocks.0.attn.qkv_proj")->reason;
  EXPECT_NE(heads.find("attention heads"), std::string::npos) << heads;
  EXPECT_NE(error_of(h3, "blocks.0.attn.qkv_proj", 3, 4).find(heads), std::string::npos);
  EXPECT_EQ(error_of(plan_of(ck, "comfyui"), "blocks.0.attn.qkv_proj", 3, 4), "");  // ComfyUI has no head rule
}

TEST(TpShardApi, ContiguousSharesAreViewsOthersArePackedCopies) {
  PlanFixture f;
  f.dense("final_layer.linear", 256, 64, DType::BF16, true)
      .quantized("blocks.0.mlp.fc1", "nvfp4", 2 * 256, 64)
      .quantized("blocks.0.mlp.fc2", "nvfp4", 64, 512)
      .quantized("head.proj", "nvfp4", 512, 64);
  const Checkpoint ck = f.open();
  const Plan plan = plan_of(ck, "comfyui");

  const LayerShard dense = shard_layer(plan, *plan.find("final_layer.linear"), 1, 2);
  EXPECT_EQ(dense.copied_bytes(), 0u);
  EXPECT_TRUE(inside(dense.layer().tensor("weight"), *ck.find("final_layer.linear.weight")));
  EXPECT_EQ(dense.layer().tensor("weight").shape, (Shape{128, 64}));
  EXPECT_EQ(dense.layer().tensor("weight").name, "final_layer.linear.weight");
  EXPECT_EQ(dense.layer().tensor("bias").shape, (Shape{128}));

  // Whole 128-row tiles of a single-part layer: weight and swizzled scales are views.
  const LayerShard tiles = shard_layer(plan, *plan.find("head.proj"), 1, 4);
  EXPECT_EQ(tiles.copied_bytes(), 0u);
  EXPECT_TRUE(inside(tiles.layer().tensor("weight_scale"), *ck.find("head.proj.weight_scale")));
  EXPECT_EQ(tiles.layer().tensor("weight_scale_2").data.data(), ck.find("head.proj.weight_scale_2")->data.data());

  // A fused layer takes a band of every part: a copy of this rank's rows only.
  const LayerShard fused = shard_layer(plan, *plan.find("blocks.0.mlp.fc1"), 0, 2);
  EXPECT_EQ(fused.layer().out_features, 256);
  EXPECT_EQ(fused.layer().tensor("weight").shape, (Shape{256, 32}));
  EXPECT_EQ(fused.copied_bytes(), 256u * 32 + 256 * 4);  // codes + swizzled [256, 4] scales

  // A K band of a row-parallel layer: copied codes and re-laid scales; the
  // global scale is the same tensor on every rank.
  const LayerShard band = shard_layer(plan, *plan.find("blocks.0.mlp.fc2"), 3, 4);
  EXPECT_EQ(band.layer().in_features, 128);
  EXPECT_EQ(band.layer().tensor("weight").shape, (Shape{64, 64}));
  EXPECT_EQ(band.layer().tensor("weight_scale").shape, (Shape{128, 8}));
  EXPECT_EQ(band.layer().params, plan.find("blocks.0.mlp.fc2")->layer.params);
  EXPECT_EQ(band.layer().marker_source, plan.find("blocks.0.mlp.fc2")->layer.marker_source);
}

// A column shard must fit the format's layout (FormatTraits::tp_output_unit):
// NVFP4 rows without a bias to give N stay in 16s, tile-packed SVDQuant keeps
// whole 128-row tiles; the natural layout and a bias lift the rule.
TEST(TpShardApi, ColumnSharesKeepTheFormatsRowUnit) {
  CheckpointBuilder b;
  for (const bool tile : {true, false}) {
    const std::string prefix = tile ? "tile.proj" : "natural.proj";
    for (OwnedTensor& t : svd_tensors(random_svd(256, 128, 4, 3, false), tile)) {
      t.name = prefix + "." + t.name;
      b.add(std::move(t));
    }
    b.add_marker(prefix, tile ? R"({"format": "svdquant_w4a4", "layout": "kitchen_tile_packed_w4a4"})"
                              : R"({"format": "svdquant_w4a4"})");
  }
  const std::vector<float> w = random_floats(352 * 64, 5, 0.05f);
  for (const bool bias : {true, false}) {
    const std::string prefix = bias ? "nv.biased" : "nv.plain";
    QuantizedLayer q = find_format("nvfp4")->quantize(w.data(), 352, 64, nlohmann::json::object());
    for (OwnedTensor& t : q.tensors) {
      t.name = prefix + "." + t.name;
      b.add(std::move(t));
    }
    b.add_marker(prefix, q.marker.dump());
    if (bias) b.add_float(prefix + ".bias", DType::F32, {352}, random_floats(352, 6));
  }
  const auto path = temp_dir("tp_row_unit") / "m.safetensors";
  b.write(path);
  const Checkpoint ck = Checkpoint::open(path.string());
  const Plan plan = plan_of(ck, "comfyui");
  EXPECT_EQ(plan.tp_problem(*plan.find("tile.proj"), 2), "");
  EXPECT_EQ(plan.tp_problem(*plan.find("tile.proj"), 4),
            "a column-parallel shard of 64 output features is not a multiple of 128 (svdquant_w4a4 layout)");
  EXPECT_EQ(plan.tp_problem(*plan.find("natural.proj"), 4), "");
  EXPECT_EQ(shard_layer(plan, *plan.find("natural.proj"), 3, 4).layer().out_features, 64);
  EXPECT_EQ(plan.tp_problem(*plan.find("nv.plain"), 2), "");
  EXPECT_EQ(plan.tp_problem(*plan.find("nv.plain"), 4),
            "a column-parallel shard of 88 output features is not a multiple of 16 (nvfp4 layout)");
  const LayerShard biased = shard_layer(plan, *plan.find("nv.biased"), 3, 4);
  EXPECT_EQ(biased.layer().out_features, 88);
  EXPECT_EQ(biased.layer().tensor("weight").shape, (Shape{96, 32}));  // rows padded to 16 again
}

TEST(TpShardApi, ReplicatedLayersAndDegreeOneAreTheLayerItself) {
  PlanFixture f;
  f.dense("model.embed_tokens", 100, 64).quantized("blocks.0.mlp.fc2", "mxfp8", 64, 256);
  const Checkpoint ck = f.open();
  const Plan plan = plan_of(ck, "comfyui");
  const LayerPlan& embed = *plan.find("model.embed_tokens");
  ASSERT_EQ(embed.parallel, Parallel::replicated);
  for (int rank = 0; rank < 8; ++rank) {
    const LayerShard s = shard_layer(plan, embed, rank, 8);
    EXPECT_EQ(s.copied_bytes(), 0u);
    EXPECT_EQ(s.layer().tensor("weight").data.data(), embed.layer.tensor("weight").data.data());
  }
  const LayerShard one = shard_layer(plan, *plan.find("blocks.0.mlp.fc2"), 0, 1);
  EXPECT_EQ(one.copied_bytes(), 0u);
  EXPECT_EQ(one.layer().tensors.size(), plan.find("blocks.0.mlp.fc2")->layer.tensors.size());
}

TEST(TpShardApi, InvalidLayersAreRefused) {
  PlanFixture f;
  f.zeros("blocks.0.mlp.fc2.weight", DType::I8, {64, 256})
      .zeros("blocks.0.mlp.fc2.weight_scale", DType::F32, {3})
      .mark("blocks.0.mlp.fc2", {{"format", "int8_tensorwise"}});
  const Checkpoint ck = f.open();
  const Plan plan = plan_of(ck, "comfyui");
  const std::string e = error_of(plan, "blocks.0.mlp.fc2", 0, 2);
  EXPECT_NE(e.find("cannot shard a layer that failed validation"), std::string::npos) << e;
}

}  // namespace
}  // namespace mixq::testing
