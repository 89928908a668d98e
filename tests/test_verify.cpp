// mixq verify: a good file passes; a corrupted scale, a NaN global scale, a
// nibble-swapped NVFP4 weight (with --against), linear-layout NVFP4 scales and
// an INT8 layer 40 % off are caught; every format's expected error (the basis
// of its default limit) is what its quantizer gives.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>

#include "mixq/checkpoint.hpp"
#include "mixq/format.hpp"
#include "mixq/layer.hpp"
#include "mixq/marker.hpp"
#include "mixq/quantize.hpp"
#include "mixq/recipe.hpp"
#include "mixq/safetensors_writer.hpp"
#include "numeric/swizzle.hpp"
#include "formats/block_checks.hpp"
#include "mixq/verify.hpp"
#include "support/test_support.hpp"
#include "test_format_helpers.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Files {
  fs::path dir, source, quantized;
};

// fc1 [96, 256] (N not a multiple of 128: the swizzled scales have padding),
// out_proj [64, 256] with a bias.
Files make_files(const std::string& name) {
  Files f;
  f.dir = testing::temp_dir(name);
  f.source = f.dir / "source.safetensors";
  f.quantized = f.dir / "q.safetensors";
  testing::CheckpointBuilder b;
  b.add_float("blocks.0.mlp.fc1.weight", DType::BF16, {96, 256}, testing::random_floats(96 * 256, 3, 0.05f));
  b.add_float("blocks.0.attn.out_proj.weight", DType::F32, {64, 256}, testing::random_floats(64 * 256, 4, 0.05f));
  b.add_float("blocks.0.attn.out_proj.bias", DType::F32, {64}, testing::random_floats(64, 5, 0.01f));
  b.write(f.source);
  Recipe recipe;
  recipe.rules.push_back(parse_rule("*.mlp.*=nvfp4"));
  recipe.rules.push_back(parse_rule("*.attn.*=int8_tensorwise:convrot=true,convrot_groupsize=64"));
  QuantizeOptions options;
  options.output = f.quantized.string();
  options.watchdog = false;
  quantize_checkpoint({f.source.string()}, recipe, options);
  return f;
}

// Copies `in` to `out`, letting `edit` change tensors on the way.
void rewrite(const fs::path& in, const fs::path& out, const std::function<void(OwnedTensor&)>& edit) {
  Checkpoint c = Checkpoint::open(in.string());
  std::vector<OwnedTensor> tensors;
  for (const TensorView& t : c.tensors()) {
    OwnedTensor o{t.name, t.dtype, t.shape, {t.data.begin(), t.data.end()}};
    edit(o);
    tensors.push_back(std::move(o));
  }
  write_safetensors(out.string(), tensors, c.files()[0].metadata);
}

const VerifiedLayer& layer_of(const VerifyReport& r, const std::string& prefix) {
  for (const auto& l : r.layers)
    if (l.prefix == prefix) return l;
  throw std::runtime_error("no layer " + prefix);
}

bool failed(const VerifiedLayer& l, const std::string& check) {
  for (const auto& c : l.checks)
    if (c.name == check && !c.ok) return true;
  return false;
}

TEST(Verify, QuantizedFilePassesWithErrorsReported) {
  Files f = make_files("verify_good");
  Checkpoint q = Checkpoint::open(f.quantized.string());
  Checkpoint s = Checkpoint::open(f.source.string());
  VerifyReport r = verify_checkpoint(q, &s);
  EXPECT_TRUE(r.ok());
  ASSERT_EQ(r.layers.size(), 2u);
  for (const auto& l : r.layers) {
    ASSERT_TRUE(l.rel_error.has_value());
    EXPECT_GT(*l.rel_error, 0.0);
    // Measured: NVFP4 0.094, INT8 ConvRot 0.0076 (random_floats' weights).
    EXPECT_LT(*l.rel_error, l.format == "nvfp4" ? 0.15 : 0.015) << l.prefix;
    EXPECT_DOUBLE_EQ(l.max_rel_error, kVerifyErrorFactor * find_format(l.format)->expected_rel_error);
  }
  // The NVFP4 layout check on a correct file: every block's max |code| is 6.
  LayerSet set = group_layers(q, collect_markers(q));
  for (const Layer& layer : set.layers)
    if (layer.prefix == "blocks.0.mlp.fc1") {
      auto checks = check_nvfp4_layout(layer);
      ASSERT_EQ(checks.size(), 1u);
      EXPECT_TRUE(checks[0].ok) << checks[0].detail;
    }
  json j = verify_report_json(r);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["summary"]["quantized_layers"], 2);
  EXPECT_DOUBLE_EQ(j["layers"][0]["max_rel_error"].get<double>(), r.layers[0].max_rel_error);
  fs::remove_all(f.dir);
}

// Each record's expected_rel_error is what the format's own quantizer gives
// on Gaussian weights (the coarsest setting: per-tensor INT8), neither less
// (verify would fail good layers) nor much more (the limit would be loose).
TEST(Verify, ExpectedErrorOfEveryFormatIsMeasured) {
  const int64_t n = 1536, k = 768;
  std::vector<float> w = testing::random_floats(n * k, 21, 0.02f);
  size_t checked = 0;
  for (const FormatTraits* f : all_formats()) {
    if (!f->from_marker) continue;
    SCOPED_TRACE(std::string(f->name));
    EXPECT_GT(f->expected_rel_error, 0.0);
    if (f->quantize == nullptr) continue;  // svdquant: no quantizer (see its record)
    nlohmann::json params = nlohmann::json::object();
    if (f->quantize_options.contains("per_channel")) params["per_channel"] = false;
    auto layer = testing::quantized_layer(*f, w, n, k, params);
    const std::vector<float> d = testing::dequantized(layer->layer);
    double err = 0, ref = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      err += (double(d[i]) - w[i]) * (double(d[i]) - w[i]);
      ref += double(w[i]) * w[i];
    }
    const double rel = std::sqrt(err / ref);
    EXPECT_LE(rel, f->expected_rel_error);
    EXPECT_GE(rel, f->expected_rel_error / 1.15);
    ++checked;
  }
  EXPECT_EQ(checked, 8u);
}

// An INT8 layer whose weight is 40 % off (its scale times 1.4: error 0.4)
// fails by default (limit 3 x 0.0125); --max-rel-error 0.5 lets it pass.
TEST(Verify, Int8LayerFortyPercentOffFailsUnlessTheLimitIsRaised) {
  Files f = make_files("verify_int8_off");
  fs::path bad = f.dir / "off.safetensors";
  rewrite(f.quantized, bad, [](OwnedTensor& t) {
    if (t.name != "blocks.0.attn.out_proj.weight_scale") return;
    for (size_t i = 0; i + 4 <= t.data.size(); i += 4) {
      float s;
      std::memcpy(&s, t.data.data() + i, 4);
      s *= 1.4f;
      std::memcpy(t.data.data() + i, &s, 4);
    }
  });
  Checkpoint q = Checkpoint::open(bad.string());
  Checkpoint s = Checkpoint::open(f.source.string());
  VerifyReport r = verify_checkpoint(q, &s);
  const VerifiedLayer& off = layer_of(r, "blocks.0.attn.out_proj");
  ASSERT_TRUE(off.rel_error.has_value());
  EXPECT_NEAR(*off.rel_error, 0.4, 0.01);
  EXPECT_NEAR(off.max_rel_error, 0.0375, 1e-12);
  EXPECT_TRUE(failed(off, "error"));
  EXPECT_FALSE(failed(layer_of(r, "blocks.0.mlp.fc1"), "error"));
  EXPECT_EQ(r.failed, 1u);

  VerifyReport relaxed = verify_checkpoint(q, &s, {.max_rel_error = 0.5});
  EXPECT_TRUE(relaxed.ok());
  EXPECT_EQ(layer_of(relaxed, "blocks.0.attn.out_proj").max_rel_error, 0.5);

  auto strict = testing::run_cli({"verify", bad.string(), "--against", f.source.string()});
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_NE(strict.err.find("blocks.0.attn.out_proj"), std::string::npos) << strict.err;
  EXPECT_NE(strict.err.find("limit 0.0375"), std::string::npos) << strict.err;
  auto loose = testing::run_cli({"verify", bad.string(), "--against", f.source.string(), "--max-rel-error", "0.5"});
  EXPECT_EQ(loose.exit_code, 0) << loose.err;
  auto bad_value = testing::run_cli({"verify", bad.string(), "--max-rel-error", "-1"});
  EXPECT_EQ(bad_value.exit_code, 2) << bad_value.err;
  fs::remove_all(f.dir);
}

TEST(Verify, CatchesCorruptedScales) {
  Files f = make_files("verify_scale");
  fs::path bad = f.dir / "bad.safetensors";
  rewrite(f.quantized, bad, [](OwnedTensor& t) {
    if (t.name == "blocks.0.attn.out_proj.weight_scale") {
      float negative = -0.01f;  // row 3 of the per-row INT8 scale
      std::memcpy(t.data.data() + 3 * sizeof(float), &negative, sizeof(float));
    }
    if (t.name == "blocks.0.mlp.fc1.weight_scale_2") {
      float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(t.data.data(), &nan, sizeof(float));
    }
  });
  Checkpoint q = Checkpoint::open(bad.string());
  VerifyReport r = verify_checkpoint(q, nullptr);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.failed, 2u);
  EXPECT_TRUE(failed(layer_of(r, "blocks.0.attn.out_proj"), "scales"));
  EXPECT_TRUE(failed(layer_of(r, "blocks.0.mlp.fc1"), "decode"));   // NaN everywhere
  EXPECT_TRUE(failed(layer_of(r, "blocks.0.mlp.fc1"), "scales"));

  auto cli = testing::run_cli({"verify", bad.string()});
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_EQ(cli.err.rfind("mixq: error: verify: 2 of 2", 0), 0u) << cli.err;
  fs::remove_all(f.dir);
}

TEST(Verify, CatchesNibbleSwappedNvfp4AgainstTheSource) {
  Files f = make_files("verify_nibbles");
  fs::path bad = f.dir / "swapped.safetensors";
  rewrite(f.quantized, bad, [](OwnedTensor& t) {
    if (t.name == "blocks.0.mlp.fc1.weight")
      swap_nibbles(reinterpret_cast<uint8_t*>(t.data.data()), t.data.size());
  });
  Checkpoint q = Checkpoint::open(bad.string());
  Checkpoint s = Checkpoint::open(f.source.string());
  VerifyReport r = verify_checkpoint(q, &s);
  const VerifiedLayer& fc1 = layer_of(r, "blocks.0.mlp.fc1");
  EXPECT_TRUE(failed(fc1, "error"));
  ASSERT_TRUE(fc1.rel_error.has_value());
  EXPECT_GT(*fc1.rel_error, 1.0);  // pairs swapped: uncorrelated, ~sqrt(2)
  EXPECT_FALSE(failed(layer_of(r, "blocks.0.attn.out_proj"), "error"));

  auto cli = testing::run_cli({"verify", bad.string(), "--against", f.source.string(), "--json"});
  EXPECT_EQ(cli.exit_code, 1);
  json j = json::parse(cli.out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["summary"]["failed"], 1);
  EXPECT_NE(cli.err.find("blocks.0.mlp.fc1"), std::string::npos) << cli.err;
  fs::remove_all(f.dir);
}

TEST(Verify, Nvfp4LayoutCheckCatchesLinearScales) {
  Files f = make_files("verify_linear_scales");
  fs::path bad = f.dir / "linear.safetensors";
  rewrite(f.quantized, bad, [](OwnedTensor& t) {
    if (t.name != "blocks.0.mlp.fc1.weight_scale") return;
    // Same bytes, linear [rows, cols] order in the padded buffer.
    const int64_t rows = 96, cols = 256 / 16;
    auto linear = unswizzle_scales(reinterpret_cast<const uint8_t*>(t.data.data()), rows, cols);
    std::vector<std::byte> padded(t.data.size(), std::byte{0});
    std::memcpy(padded.data(), linear.data(), linear.size());
    t.data = padded;
  });
  Checkpoint q = Checkpoint::open(bad.string());
  LayerSet set = group_layers(q, collect_markers(q));
  bool seen = false;
  for (const Layer& layer : set.layers) {
    if (layer.prefix != "blocks.0.mlp.fc1") continue;
    seen = true;
    auto checks = check_nvfp4_layout(layer);
    ASSERT_EQ(checks.size(), 1u);
    EXPECT_FALSE(checks[0].ok);
    EXPECT_NE(checks[0].detail.find("padding"), std::string::npos) << checks[0].detail;
  }
  EXPECT_TRUE(seen);
  Checkpoint s = Checkpoint::open(f.source.string());
  EXPECT_TRUE(failed(layer_of(verify_checkpoint(q, &s), "blocks.0.mlp.fc1"), "error"));
  fs::remove_all(f.dir);
}

TEST(Verify, Mxfp8LayoutCheck) {
  fs::path dir = testing::temp_dir("verify_mxfp8");
  testing::CheckpointBuilder b;
  b.add_float("l.weight", DType::F32, {64, 96}, testing::random_floats(64 * 96, 8, 0.05f));
  b.write(dir / "s.safetensors");
  Recipe recipe;
  recipe.rules.push_back(parse_rule("*=mxfp8"));
  QuantizeOptions options;
  options.output = (dir / "q.safetensors").string();
  options.watchdog = false;
  quantize_checkpoint({(dir / "s.safetensors").string()}, recipe, options);
  auto check = [&](const fs::path& path) {
    Checkpoint q = Checkpoint::open(path.string());
    LayerSet set = group_layers(q, collect_markers(q));
    return check_mxfp8_layout(set.layers.at(0)).at(0);
  };
  LayerCheck good = check(dir / "q.safetensors");
  EXPECT_TRUE(good.ok) << good.detail;
  // Halve every element code's magnitude: the block maxima fall below 224.
  rewrite(dir / "q.safetensors", dir / "bad.safetensors", [](OwnedTensor& t) {
    if (t.name != "l.weight") return;
    for (std::byte& x : t.data) {
      uint8_t v = static_cast<uint8_t>(x);
      uint8_t exponent = (v >> 3) & 0xF;
      if (exponent > 1) v = static_cast<uint8_t>((v & 0x87) | ((exponent - 1) << 3));
      x = static_cast<std::byte>(v);
    }
  });
  LayerCheck bad = check(dir / "bad.safetensors");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.detail.find("off"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mixq
