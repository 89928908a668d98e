// Issue 15, "SGLang parity gaps": files whose header says quant_format mxfp8
// (SGLang's global MXFP8 rule: unmarked F8_E4M3 weights, row-major U8
// [N, K/32] exponents) through inspect, every plan profile, dequantize,
// linear and verify; parameters with every format's defaults applied;
// conflicting markers in SGLang's words under the sglang profiles.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "mixq/inspect.hpp"
#include "mixq/linear.hpp"
#include "mixq/marker.hpp"
#include "mixq/npy.hpp"
#include "numeric/swizzle.hpp"
#include "mixq/verify.hpp"
#include "test_format_helpers.hpp"
#include "test_plan_fixtures.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CheckpointBuilder;
using testing::expect_accepted;
using testing::expect_rejected;
using testing::layer_of;
using testing::plan_of;

constexpr int64_t kN = 64, kK = 96;  // N not a multiple of 128: swizzled and row-major sizes differ

// An MXFP8 layer as SGLang's global rule expects it, made by mixq's own
// quantizer (swizzled exponents) and unswizzled to row-major [N, K/32].
struct GlobalLayer {
  std::vector<uint8_t> codes, row_major, swizzled;
  std::vector<float> bias;
};

GlobalLayer make_global_layer(uint64_t seed) {
  const FormatTraits& f = *find_format("mxfp8");
  const std::vector<float> w = testing::random_floats(kN * kK, seed, 0.05f);
  QuantizedLayer q = f.quantize(w.data(), kN, kK, apply_defaults(f, json::object()));
  GlobalLayer g;
  for (const OwnedTensor& t : q.tensors) {
    const auto* p = reinterpret_cast<const uint8_t*>(t.data.data());
    if (t.name == "weight") g.codes.assign(p, p + t.data.size());
    if (t.name == "weight_scale") g.swizzled.assign(p, p + t.data.size());
  }
  g.row_major = unswizzle_scales(g.swizzled.data(), kN, kK / 32);
  g.bias = testing::random_floats(kN, seed + 100);
  return g;
}

std::vector<std::byte> bytes_of(const std::vector<uint8_t>& v) {
  std::vector<std::byte> out(v.size());
  std::memcpy(out.data(), v.data(), v.size());
  return out;
}

// blocks.0.attn.out_proj: global mxfp8; token_refiner...: BF16 (stays unquantized).
std::string write_global_file(const GlobalLayer& g, const std::string& quant_format = "MXFP8",
                              const std::string& extra_marked = "") {
  CheckpointBuilder b;
  b.add("blocks.0.attn.out_proj.weight", DType::F8_E4M3, {kN, kK}, bytes_of(g.codes));
  b.add("blocks.0.attn.out_proj.weight_scale", DType::U8, {kN, kK / 32}, bytes_of(g.row_major));
  b.add_float("blocks.0.attn.out_proj.bias", DType::F32, {kN}, g.bias);
  b.add_float("token_refiner.blocks.0.attn.out_proj.weight", DType::BF16, {32, 64},
              testing::random_floats(32 * 64, 9, 0.05f));
  if (extra_marked == "nvfp4") {
    const FormatTraits& f = *find_format("nvfp4");
    const std::vector<float> w = testing::random_floats(32 * 64, 10, 0.05f);
    QuantizedLayer q = f.quantize(w.data(), 32, 64, apply_defaults(f, json::object()));
    for (OwnedTensor& t : q.tensors) {
      t.name = "blocks.1.mlp.fc1." + t.name;
      b.add(std::move(t));
    }
    b.add_marker("blocks.1.mlp.fc1", q.marker.dump());
  }
  b.metadata("quant_format", quant_format);
  const fs::path path = testing::temp_dir("global-mxfp8") / "model.safetensors";
  b.write(path);
  return path.string();
}

// e4m3(code) · 2^(e - 127), row-major exponents: the rule written out.
std::vector<float> expected_weight(const GlobalLayer& g) {
  std::vector<float> w(kN * kK);
  for (int64_t r = 0; r < kN; ++r)
    for (int64_t c = 0; c < kK; ++c)
      w[r * kK + c] = e4m3_to_f32(g.codes[r * kK + c]) * e8m0_to_f32(g.row_major[r * (kK / 32) + c / 32]);
  return w;
}

TEST(GlobalMxfp8, MarkersAreImpliedForFittingUnmarkedWeights) {
  const GlobalLayer g = make_global_layer(1);
  const Checkpoint c = Checkpoint::open(write_global_file(g));
  const MarkerSet markers = collect_markers(c);
  EXPECT_EQ(markers.global_quant_formats, (std::set<std::string>{"mxfp8"}));  // lower-cased
  ASSERT_EQ(markers.implied, (std::set<std::string>{"blocks.0.attn.out_proj"}));
  const Marker& m = markers.markers.at("blocks.0.attn.out_proj");
  EXPECT_EQ(m.format, "mxfp8");
  EXPECT_EQ(m.params, (json{{"_scale_layout", "linear"}}));
  EXPECT_NE(m.source.find("quant_format"), std::string::npos);
  EXPECT_FALSE(markers.markers.count("token_refiner.blocks.0.attn.out_proj"));
  // Without the header key nothing is implied (and the plan refuses the F8 weight).
  CheckpointBuilder b;
  b.add("x.weight", DType::F8_E4M3, {kN, kK}, bytes_of(g.codes));
  b.add("x.weight_scale", DType::U8, {kN, kK / 32}, bytes_of(g.row_major));
  const fs::path plain = testing::temp_dir("no-global") / "m.safetensors";
  b.write(plain);
  EXPECT_TRUE(collect_markers(Checkpoint::open(plain.string())).implied.empty());
  // A file marker cannot set the internal key.
  CheckpointBuilder forged;
  forged.add("x.weight", DType::F8_E4M3, {kN, kK}, bytes_of(g.codes));
  forged.add("x.weight_scale", DType::U8, {128, 4}, std::vector<std::byte>(512));
  forged.add_marker("x", R"({"format": "mxfp8", "_scale_layout": "linear"})");
  forged.write(plain);
  const MarkerSet f = collect_markers(Checkpoint::open(plain.string()));
  EXPECT_FALSE(f.markers.at("x").params.contains("_scale_layout"));
  ASSERT_FALSE(f.warnings.empty());
  EXPECT_NE(f.warnings[0].find("ignored"), std::string::npos);
}

TEST(GlobalMxfp8, InspectShowsTheLayer) {
  const GlobalLayer g = make_global_layer(2);
  const json report = inspect_report(Checkpoint::open(write_global_file(g)));
  const json* layer = nullptr;
  for (const json& l : report["layers"])
    if (l["prefix"] == "blocks.0.attn.out_proj") layer = &l;
  ASSERT_NE(layer, nullptr);
  EXPECT_EQ((*layer)["format"], "mxfp8");
  EXPECT_EQ((*layer)["out_features"], kN);
  EXPECT_EQ((*layer)["in_features"], kK);
  EXPECT_EQ((*layer)["params"], (json{{"_scale_layout", "linear"}, {"full_precision_matrix_mult", false}}));
  EXPECT_FALSE(layer->contains("problem")) << layer->dump();
  bool warned = false;
  for (const json& w : report["warnings"]) warned = warned || w.get<std::string>().find("quant_format") != std::string::npos;
  EXPECT_TRUE(warned) << report["warnings"].dump();
}

TEST(GlobalMxfp8, DequantizeReadsRowMajorExponents) {
  const GlobalLayer g = make_global_layer(3);
  const Checkpoint c = Checkpoint::open(write_global_file(g));
  const LayerSet set = group_layers(c, collect_markers(c));
  const Layer* layer = nullptr;
  for (const Layer& l : set.layers)
    if (l.prefix == "blocks.0.attn.out_proj") layer = &l;
  ASSERT_NE(layer, nullptr);
  ASSERT_TRUE(layer->problem.empty()) << layer->problem;
  EXPECT_EQ(testing::dequantized(*layer), expected_weight(g));  // exact: every value is e4m3 · 2^e
}

TEST(GlobalMxfp8, LinearMatchesTheSameLayerWithSwizzledScales) {
  const GlobalLayer g = make_global_layer(4);
  const Checkpoint c = Checkpoint::open(write_global_file(g));
  const LayerSet set = group_layers(c, collect_markers(c));
  const Layer* global = nullptr;
  for (const Layer& l : set.layers)
    if (l.prefix == "blocks.0.attn.out_proj") global = &l;
  ASSERT_NE(global, nullptr);
  // The same codes and exponents as a marked (ComfyUI-layout) mxfp8 layer.
  auto marked = testing::bind_layer(*find_format("mxfp8"),
                                    {OwnedTensor{"weight", DType::F8_E4M3, {kN, kK}, bytes_of(g.codes)},
                                     OwnedTensor{"weight_scale", DType::U8, {swizzled_rows(kN), swizzled_cols(kK / 32)},
                                                 bytes_of(g.swizzled)},
                                     testing::f32_tensor("bias", {kN}, g.bias)});
  validate_layer(marked->layer);
  const std::vector<float> x = testing::random_floats(5 * kK, 77);
  for (KernelChoice kernel : {KernelChoice::reference, KernelChoice::automatic}) {
    auto a = Linear::create(*global, LinearOptions{kernel});
    auto b = Linear::create(marked->layer, LinearOptions{kernel});
    std::vector<float> ya(5 * kN), yb(5 * kN);
    a->forward(x.data(), 5, ya.data());
    b->forward(x.data(), 5, yb.data());
    EXPECT_EQ(ya, yb) << a->kernel_name();  // same arithmetic, bit for bit
  }
}

TEST(GlobalMxfp8, VerifyPassesAndChecksTheRowMajorLayout) {
  const GlobalLayer g = make_global_layer(5);
  const Checkpoint c = Checkpoint::open(write_global_file(g));
  const VerifyReport report = verify_checkpoint(c, nullptr, VerifyOptions{});
  EXPECT_TRUE(report.ok()) << verify_report_json(report).dump();
  ASSERT_EQ(report.layers.size(), 1u);
  bool block_check = false;
  for (const LayerCheck& check : report.layers[0].checks) block_check = block_check || check.name == "block_scales";
  EXPECT_TRUE(block_check);
}

TEST(GlobalMxfp8, EachProfileSaysWhatItsRuntimeWouldDo) {
  const GlobalLayer g = make_global_layer(6);
  const Checkpoint c = Checkpoint::open(write_global_file(g));
  for (const char* profile : {"sglang", "sglang-minimax-h3"}) {
    SCOPED_TRACE(profile);
    const Plan plan = plan_of(c, profile);
    expect_accepted(plan);
    EXPECT_NE(plan.runtime_config().find("MXFP8Config"), std::string::npos) << plan.runtime_config();
    EXPECT_EQ(layer_of(plan, "blocks.0.attn.out_proj").method, "mxfp8:row_major_scales");
    EXPECT_EQ(layer_of(plan, "token_refiner.blocks.0.attn.out_proj").method, "unquantized");
    bool risk = false;
    for (const std::string& w : plan.warnings()) risk = risk || w.find("FlashInfer") != std::string::npos;
    EXPECT_TRUE(risk);
  }
  const Plan comfy = plan_of(c, "comfyui");
  expect_rejected(comfy, {"comfyui ignores the header's quant_format",
                          "RuntimeError: unrecognized quantization scale tensors: ['blocks.0.attn.out_proj.weight_scale']"});
  EXPECT_EQ(layer_of(comfy, "blocks.0.attn.out_proj").method, "unmarked");
}

TEST(GlobalMxfp8, SglangRaisesForWeightsTheRuleCannotRead) {
  const GlobalLayer g = make_global_layer(7);
  // A marked NVFP4 layer (U8 weight) next to the global rule: SGLang checks
  // every U8/I8/F8 weight, marked or not.
  const Checkpoint c = Checkpoint::open(write_global_file(g, "mxfp8", "nvfp4"));
  for (const char* profile : {"sglang", "sglang-minimax-h3"})
    expect_rejected(plan_of(c, profile),
                    {"sglang would raise ValueError: MXFP8 layer 'blocks.1.mlp.fc1' has incompatible weight/scale "
                     "metadata: ('U8', (32, 32)) and ('F8_E4M3', ("});
  // An unmarked F8 weight without its scale: no marker is implied.
  CheckpointBuilder b;
  b.add("x.weight", DType::F8_E4M3, {kN, kK}, bytes_of(g.codes));
  b.metadata("quant_format", "mxfp8");
  const fs::path path = testing::temp_dir("global-bad") / "m.safetensors";
  b.write(path);
  const Checkpoint bad = Checkpoint::open(path.string());
  expect_rejected(plan_of(bad, "sglang"),
                  {"MXFP8 layer 'x' has incompatible weight/scale metadata: ('F8_E4M3', (64, 96)) and None"});
  expect_rejected(plan_of(bad, "comfyui"), {"quantized weights without a comfy_quant marker: ['x']"});
}

TEST(GlobalMxfp8, CommandLineDequantizeLinearVerifyPlan) {
  const GlobalLayer g = make_global_layer(8);
  const std::string path = write_global_file(g);
  const fs::path dir = testing::temp_dir("global-cli");
  auto r = testing::run_cli({"dequantize", path, "--layer", "blocks.0.attn.out_proj", "-o", (dir / "w.npy").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_npy((dir / "w.npy").string()).values, expected_weight(g));
  const std::vector<float> x = testing::random_floats(3 * kK, 5);
  write_npy((dir / "x.npy").string(), {3, kK}, x.data());
  r = testing::run_cli({"linear", path, "--layer", "blocks.0.attn.out_proj", "-i", (dir / "x.npy").string(), "-o",
                        (dir / "y.npy").string(), "--kernel", "ref"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_npy((dir / "y.npy").string()).shape, (Shape{3, kN}));
  r = testing::run_cli({"verify", path});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = testing::run_cli({"plan", path, "--profile", "sglang"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("mxfp8:row_major_scales"), std::string::npos) << r.out;
  r = testing::run_cli({"plan", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("comfyui ignores the header's quant_format"), std::string::npos) << r.err;
}

// ---- params after defaults ---------------------------------------------------

TEST(ParamsDefaults, EveryMarkerFormatDefaultsFullPrecisionToFalse) {
  for (const FormatTraits* f : all_formats()) {
    if (!f->from_marker) continue;
    const json p = apply_defaults(*f, json::object());
    EXPECT_EQ(p.value("full_precision_matrix_mult", json()), false) << f->name;
  }
}

TEST(ParamsDefaults, InspectShowsThemForW4A8AndAwq) {
  testing::PlanFixture fx;
  fx.quantized("blocks.0.mlp.fc1", "asym_w4a8_int8", 16, 256).quantized("blocks.0.mlp.fc2", "awq_w4a16", 16, 128);
  const json report = inspect_report(fx.open());
  for (const json& l : report["layers"]) {
    SCOPED_TRACE(l["prefix"].get<std::string>());
    EXPECT_EQ(l["params"].value("full_precision_matrix_mult", json()), false) << l["params"].dump();
  }
  EXPECT_EQ(report["layers"][1]["params"]["group_size"], 64);  // awq's own default alongside
}

// ---- conflicting markers ----------------------------------------------------------

TEST(MarkerConflicts, SglangProfilesNameTheValueError) {
  testing::PlanFixture fx;
  // The tensor marker says false, the header true: one key, two values.
  fx.quantized("blocks.0.mlp.fc1", "float8_e4m3fn", 16, 64, json::object(), testing::Dialect::tensor,
               {{"full_precision_matrix_mult", false}})
      .mark("blocks.0.mlp.fc1", json{{"format", "float8_e4m3fn"}, {"full_precision_matrix_mult", true}},
            testing::Dialect::header);
  const Checkpoint c = fx.open();
  for (const char* profile : {"sglang", "sglang-minimax-h3"})
    expect_rejected(plan_of(c, profile),
                    {"sglang would raise ValueError: Conflicting Comfy quantization markers for 'blocks.0.mlp.fc1'"});
  const Plan comfy = plan_of(c, "comfyui");
  expect_rejected(comfy, {"Conflicting Comfy quantization markers for 'blocks.0.mlp.fc1'"});
  EXPECT_EQ(comfy.error().find("would raise"), std::string::npos) << comfy.error();
}

TEST(MarkerConflicts, MarkersSglangWouldMergeAreNotBlamedOnIt) {
  testing::PlanFixture fx;
  // The header adds a key the tensor marker lacks: SGLang merges the two.
  fx.quantized("blocks.0.mlp.fc1", "float8_e4m3fn", 16, 64)
      .mark("blocks.0.mlp.fc1", json{{"format", "float8_e4m3fn"}, {"full_precision_matrix_mult", false}},
            testing::Dialect::header);
  const Plan plan = plan_of(fx.open(), "sglang");
  expect_rejected(plan, {"Conflicting Comfy quantization markers", "sglang would merge"});
  EXPECT_EQ(plan.error().find("would raise"), std::string::npos) << plan.error();
}

}  // namespace
}  // namespace mixq
