// Library-level quantize round trips: every quantizable format, both marker
// dialects and both together, sharded output, fallback, atomicity on errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/layer.hpp"
#include "mixq/marker.hpp"
#include "mixq/numeric.hpp"
#include "mixq/plan.hpp"
#include "mixq/quantize.hpp"
#include "mixq/recipe.hpp"
#include "support/test_support.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CheckpointBuilder;

struct SourceLayer {
  std::string prefix;
  int64_t n, k;
  DType dtype;
  bool bias;
};

// Small H3-like layers; K multiples of 256 except the AdaLN projection (K=24).
const std::vector<SourceLayer> kLayers = {
    {"blocks.0.attn.qkv_proj", 96, 256, DType::BF16, false},
    {"blocks.0.attn.out_proj", 32, 256, DType::F32, true},
    {"blocks.0.mlp.fc1", 64, 256, DType::F16, false},
    {"blocks.0.mlp.fc2", 32, 512, DType::F32, true},
    {"blocks.0.adaln_proj.linear", 40, 24, DType::BF16, true},
};

fs::path make_source(const fs::path& dir) {
  CheckpointBuilder b;
  uint64_t seed = 1;
  for (const SourceLayer& l : kLayers) {
    b.add_float(l.prefix + ".weight", l.dtype, {l.n, l.k}, testing::random_floats(l.n * l.k, seed++, 0.05f));
    if (l.bias) b.add_float(l.prefix + ".bias", DType::F32, {l.n}, testing::random_floats(l.n, seed++, 0.01f));
  }
  b.add_float("blocks.0.norm1.weight", DType::F32, {32}, testing::random_floats(32, 99, 1.0f));
  b.add_float("adaln_t_table", DType::F32, {5, 8}, testing::random_floats(40, 98, 1.0f));
  b.metadata("modelspec", "test");
  fs::path path = dir / "source.safetensors";
  b.write(path);
  return path;
}

Recipe recipe_of(std::vector<std::string> rules) {
  Recipe recipe;
  for (const auto& r : rules) recipe.rules.push_back(parse_rule(r));
  return recipe;
}

std::vector<std::byte> bytes_of(const Checkpoint& c, const std::string& name) {
  const TensorView* t = c.find(name);
  if (t == nullptr) return {};
  return {t->data.begin(), t->data.end()};
}

double rel_error(const Layer& layer, const TensorView& source) {
  std::vector<float> deq(static_cast<size_t>(layer.out_features * layer.in_features));
  layer.format->dequantize(layer, Basis::original, deq.data());
  std::vector<float> w = to_f32(source);
  double err = 0, ref = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    err += (deq[i] - w[i]) * static_cast<double>(deq[i] - w[i]);
    ref += static_cast<double>(w[i]) * w[i];
  }
  return std::sqrt(err / ref);
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Relative weight error per format on these layers (random_floats · 0.05):
// about 1.5x the largest measured over the four quantized layers (in the
// comment), so that a coarser quantizer than the format's fails.
const std::map<std::string, double> kMaxWeightError = {
    {"float8_e4m3fn", 0.04},    // measured 0.0263-0.0266
    {"float8_e5m2", 0.08},      // 0.0522-0.0528
    {"nvfp4", 0.14},            // 0.0939-0.0955
    {"mxfp8", 0.04},            // 0.0263-0.0265
    {"int8_tensorwise", 0.012}, // 0.0068-0.0075 (per row)
    {"convrot_w4a4", 0.2},      // 0.126-0.139
    {"asym_w4a8_int8", 0.11},   // 0.0720-0.0734
    {"awq_w4a16", 0.135},       // 0.0893-0.0900
};

// Every quantizable format x every marker dialect: what we write reads back
// as that format, validates, plans, dequantizes close to the source, and every
// other tensor is byte-identical.
TEST(Quantize, RoundTripEveryFormatAndDialect) {
  fs::path dir = testing::temp_dir("quantize_roundtrip");
  fs::path source_path = make_source(dir);
  Checkpoint source = Checkpoint::open(source_path.string());
  const std::vector<std::pair<MarkerDialect, const char*>> dialects = {
      {MarkerDialect::tensor, "tensor"}, {MarkerDialect::header, "header"}, {MarkerDialect::both, "both"}};
  for (const std::string& name : quantizable_format_names()) {
    if (name == "keep") continue;
    for (const auto& [dialect, dialect_name] : dialects) {
      SCOPED_TRACE(name + " / " + dialect_name);
      QuantizeOptions options;
      options.output = (dir / (name + "-" + dialect_name + ".safetensors")).string();
      options.markers = dialect;
      options.watchdog = false;
      QuantizeReport report = quantize_checkpoint(
          {source_path.string()}, recipe_of({"blocks.0.{attn,mlp}.*=" + name + ":fallback=keep"}), options);
      ASSERT_EQ(report.files.size(), 1u);
      EXPECT_EQ(report.layers.size(), kLayers.size());

      Checkpoint out = Checkpoint::open(options.output);
      MarkerSet markers = collect_markers(out);
      LayerSet set = group_layers(out, markers);
      int quantized = 0;
      for (const Layer& layer : set.layers) {
        SCOPED_TRACE(layer.prefix);
        EXPECT_TRUE(layer.problem.empty()) << layer.problem;
        if (layer.format == &unquantized_format()) {
          EXPECT_EQ(bytes_of(out, layer.prefix + ".weight"), bytes_of(source, layer.prefix + ".weight"));
          continue;
        }
        ++quantized;
        EXPECT_EQ(layer.format->name, name);
        const TensorView* src = source.find(layer.prefix + ".weight");
        ASSERT_NE(src, nullptr);
        EXPECT_EQ(layer.out_features, src->shape[0]);
        EXPECT_EQ(layer.in_features, src->shape[1]);
        double err = rel_error(layer, *src);
        EXPECT_GT(err, 0.0);  // it really was quantized
        ASSERT_TRUE(kMaxWeightError.count(name)) << "no error bound for " << name;
        EXPECT_LT(err, kMaxWeightError.at(name));
        bool has_tensor_marker = out.find(layer.prefix + ".comfy_quant") != nullptr;
        EXPECT_EQ(has_tensor_marker, dialect != MarkerDialect::header);
      }
      // The four K=256/512 layers at least, unless the format refuses them all.
      EXPECT_GE(quantized, 4);
      const auto& meta = out.files()[0].metadata;
      auto header = meta.find("_quantization_metadata");
      EXPECT_EQ(header != meta.end(), dialect != MarkerDialect::tensor);
      if (header != meta.end()) {
        json doc = json::parse(header->second);
        EXPECT_EQ(doc["format_version"], "1.0");
        EXPECT_EQ(static_cast<int>(doc["layers"].size()), quantized);
      }
      EXPECT_EQ(meta.at("modelspec"), "test");
      for (const char* other : {"blocks.0.norm1.weight", "adaln_t_table", "blocks.0.attn.out_proj.bias",
                                "blocks.0.mlp.fc2.bias", "blocks.0.adaln_proj.linear.bias"})
        EXPECT_EQ(bytes_of(out, other), bytes_of(source, other)) << other;
      EXPECT_TRUE(Plan::build(out, {"comfyui", 1}).accepted());
    }
  }
  fs::remove_all(dir);
}

TEST(Quantize, MarkerTensorIsComfyJson) {
  EXPECT_EQ(marker_json(json{{"format", "int8_tensorwise"}, {"convrot", true}, {"convrot_groupsize", 256}}),
            R"({"format": "int8_tensorwise", "convrot": true, "convrot_groupsize": 256})");
  EXPECT_EQ(marker_json(json{{"format", "nvfp4"}}).size(), 19u);  // docs/DISPATCH.md §1.1
}

TEST(Quantize, MixedRecipeShardedWithIndex) {
  fs::path dir = testing::temp_dir("quantize_sharded");
  fs::path source_path = make_source(dir);
  QuantizeOptions options;
  options.output = (dir / "out").string();
  options.shard_size = 20000;
  options.watchdog = false;
  options.markers = MarkerDialect::both;
  Recipe recipe = recipe_of({"*.mlp.*=nvfp4", "*.attn.*=int8_tensorwise:convrot=true,convrot_groupsize=64",
                             "*.adaln_proj.*=float8_e4m3fn"});
  QuantizeReport report = quantize_checkpoint({source_path.string()}, recipe, options);
  ASSERT_GT(report.files.size(), 2u);  // several shards + index
  EXPECT_TRUE(fs::exists(dir / "out" / "model.safetensors.index.json"));
  json index = json::parse(std::ifstream(dir / "out" / "model.safetensors.index.json"));
  // A layer's tensors never straddle shards.
  std::map<std::string, std::string> shard_of_layer;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    std::string prefix = tensor.substr(0, tensor.rfind('.'));
    auto [it, fresh] = shard_of_layer.emplace(prefix, file.get<std::string>());
    EXPECT_EQ(it->second, file.get<std::string>()) << tensor;
  }
  for (const std::string& open_as : {(dir / "out").string(), (dir / "out" / "model.safetensors.index.json").string()}) {
    Checkpoint out = Checkpoint::open(open_as);
    EXPECT_EQ(out.files().size(), report.files.size() - 1);
    LayerSet set = group_layers(out, collect_markers(out));
    std::map<std::string, std::string> formats;
    for (const Layer& l : set.layers) {
      EXPECT_TRUE(l.problem.empty()) << l.prefix << ": " << l.problem;
      formats[l.prefix] = std::string(l.format->name);
    }
    EXPECT_EQ(formats["blocks.0.mlp.fc1"], "nvfp4");
    EXPECT_EQ(formats["blocks.0.mlp.fc2"], "nvfp4");
    EXPECT_EQ(formats["blocks.0.attn.qkv_proj"], "int8_tensorwise");
    EXPECT_EQ(formats["blocks.0.adaln_proj.linear"], "float8_e4m3fn");
    Plan plan = Plan::build(out, {"comfyui", 1});
    EXPECT_TRUE(plan.accepted()) << plan.error();
    const LayerPlan* qkv = plan.find("blocks.0.attn.qkv_proj");
    ASSERT_NE(qkv, nullptr);
    EXPECT_EQ(qkv->layer.param_int("convrot_groupsize"), 64);
  }
  fs::remove_all(dir);
}

TEST(Quantize, FormatThatCannotHoldALayerFailsNamingItAndLeavesNothing) {
  fs::path dir = testing::temp_dir("quantize_refuse");
  fs::path source_path = make_source(dir);
  auto before = files_in(dir);
  QuantizeOptions options;
  options.output = (dir / "out.safetensors").string();
  options.watchdog = false;
  try {
    quantize_checkpoint({source_path.string()}, recipe_of({"*=int8_tensorwise:convrot=true"}), options);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.0.adaln_proj.linear"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fallback=keep"), std::string::npos) << e.what();
  }
  EXPECT_EQ(files_in(dir), before);  // no output, no staging folder

  QuantizeReport report = quantize_checkpoint(
      {source_path.string()}, recipe_of({"*=int8_tensorwise:convrot=true,fallback=keep"}), options);
  bool saw_fallback = false;
  for (const auto& l : report.layers)
    if (l.prefix == "blocks.0.adaln_proj.linear") {
      saw_fallback = l.fell_back;
      EXPECT_EQ(l.format, "keep");
    }
  EXPECT_TRUE(saw_fallback);
  fs::remove_all(dir);
}

// A NaN or an infinity in a source weight is refused for every format (it
// would come out as some finite code, or as undefined behaviour in the 4-bit
// quantizers: UBSan found it), naming the layer, the value and its place;
// fallback=keep keeps that layer as it is and quantizes the rest.
TEST(Quantize, NonFiniteWeightIsRefusedForEveryFormat) {
  fs::path dir = testing::temp_dir("quantize_nonfinite");
  for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    CheckpointBuilder b;
    std::vector<float> w = testing::random_floats(16 * 256, 3, 0.05f);
    w[2 * 256 + 7] = bad;
    b.add_float("bad.weight", DType::F32, {16, 256}, w);
    b.add_float("good.weight", DType::F32, {16, 256}, testing::random_floats(16 * 256, 4, 0.05f));
    const fs::path source = dir / "source.safetensors";
    b.write(source);
    QuantizeOptions options;
    options.output = (dir / "out.safetensors").string();
    options.watchdog = false;
    for (const FormatTraits* format : all_formats()) {
      if (!format->quantize || !format->from_marker) continue;  // the formats a rule can name
      const std::string name(format->name);
      try {
        quantize_checkpoint({source.string()}, recipe_of({"*=" + name}), options);
        ADD_FAILURE() << name << " quantized a weight holding " << bad;
      } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("layer 'bad'"), std::string::npos) << what;
        EXPECT_NE(what.find(std::isnan(bad) ? "a NaN at [2, 7]" : "an infinity at [2, 7]"), std::string::npos) << what;
      }
      const QuantizeReport report = quantize_checkpoint({source.string()}, recipe_of({"*=" + name + ":fallback=keep"}),
                                                        options);
      for (const auto& l : report.layers) EXPECT_EQ(l.fell_back, l.prefix == "bad") << name << " " << l.prefix;
      fs::remove(options.output);
    }
  }
  fs::remove_all(dir);
}

// Finite weights whose scales a format cannot hold are refused too: a layer
// with a magnitude outside [2^-64, 2^64] is decoded again after quantizing.
// FP8 of weights all near 1e-40 and zeros (1 / s overflows: 0 * inf is a NaN
// code), AWQ of +-3e38
// (its range (hi - lo) / 15 overflows; UBSan found the NaN cast that
// followed), MXFP8 with one 3.4e38 among 1e-3 (its block scale overflows).
// Out of the band but representable (INT8 of weights near 1e-30) still
// quantizes.
TEST(Quantize, WeightsBeyondWhatTheScalesHoldAreRefused) {
  fs::path dir = testing::temp_dir("quantize_range");
  struct Case {
    std::string format;
    std::vector<float> weight;
    bool refused;
  };
  const int64_t n = 16, k = 256;
  std::vector<float> tiny(n * k), huge(n * k), one_huge(n * k, 1e-3f), small(n * k);
  for (int64_t i = 0; i < n * k; ++i) {
    tiny[i] = i % 5 == 0 ? 0.0f : (i % 2 ? 1.0f : -1.0f) * 1e-40f * static_cast<float>(1 + i % 7);  // 0 * inf
    huge[i] = i % 3 == 0 ? 3e38f : i % 3 == 1 ? -3e38f : 1.0f;
    small[i] = (i % 2 ? 1.0f : -1.0f) * 1e-30f * static_cast<float>(1 + i % 7);
  }
  one_huge[5 * k + 9] = 3.4e38f;
  for (const Case& c : {Case{"float8_e4m3fn", tiny, true}, Case{"awq_w4a16", huge, true},
                        Case{"mxfp8", one_huge, true}, Case{"int8_tensorwise", small, false}}) {
    CheckpointBuilder b;
    b.add_float("l.weight", DType::F32, {n, k}, c.weight);
    const fs::path source = dir / "source.safetensors";
    b.write(source);
    QuantizeOptions options;
    options.output = (dir / "out.safetensors").string();
    options.watchdog = false;
    try {
      quantize_checkpoint({source.string()}, recipe_of({"*=" + c.format}), options);
      EXPECT_FALSE(c.refused) << c.format << " wrote a layer that does not decode to finite values";
    } catch (const Error& e) {
      EXPECT_TRUE(c.refused) << e.what();
      EXPECT_NE(std::string(e.what()).find("decodes to a non-finite value"), std::string::npos) << e.what();
    }
    fs::remove(options.output);
  }
  fs::remove_all(dir);
}

TEST(Quantize, RefusesToOverwriteTheSourceOrAFullFolder) {
  fs::path dir = testing::temp_dir("quantize_source_safe");
  fs::path source_path = make_source(dir);
  std::ifstream in(source_path, std::ios::binary);
  std::string original((std::istreambuf_iterator<char>(in)), {});
  QuantizeOptions options;
  options.output = source_path.string();
  options.watchdog = false;
  EXPECT_THROW(quantize_checkpoint({source_path.string()}, recipe_of({"*=nvfp4"}), options), Error);
  std::ifstream again(source_path, std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), {}), original);

  options.output = dir.string();  // non-empty folder
  EXPECT_THROW(quantize_checkpoint({source_path.string()}, recipe_of({"*=nvfp4"}), options), Error);
  options.output = (dir / "x.safetensors").string();
  options.shard_size = 1000;
  EXPECT_THROW(quantize_checkpoint({source_path.string()}, recipe_of({"*=nvfp4"}), options), UsageError);
  fs::remove_all(dir);
}

TEST(Quantize, UnmatchedRuleWarnsAndKeepCopiesExactly) {
  fs::path dir = testing::temp_dir("quantize_keep");
  fs::path source_path = make_source(dir);
  QuantizeOptions options;
  options.output = (dir / "same.safetensors").string();
  options.watchdog = false;
  QuantizeReport report = quantize_checkpoint({source_path.string()}, recipe_of({"nothing.*=nvfp4"}), options);
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("nothing.*"), std::string::npos);
  Checkpoint a = Checkpoint::open(source_path.string());
  Checkpoint b = Checkpoint::open(options.output);
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    EXPECT_EQ(a.tensors()[i].name, b.tensors()[i].name);
    EXPECT_EQ(bytes_of(a, a.tensors()[i].name), bytes_of(b, b.tensors()[i].name));
  }
  fs::remove_all(dir);
}

TEST(Quantize, ByteSizes) {
  EXPECT_EQ(parse_byte_size("2GB"), 2000000000u);
  EXPECT_EQ(parse_byte_size("1.5GiB"), 1610612736u);
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("500mb"), 500000000u);
  EXPECT_THROW(parse_byte_size("GB"), UsageError);
  EXPECT_THROW(parse_byte_size("-1"), UsageError);
  EXPECT_THROW(parse_byte_size("3 parsecs"), UsageError);
  EXPECT_THROW(parse_byte_size("0"), UsageError);
  EXPECT_THROW(parse_marker_dialect("tensors"), UsageError);
}

}  // namespace
}  // namespace mixq
