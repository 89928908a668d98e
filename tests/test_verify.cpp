// mixq verify: a good file passes; a corrupted scale, a NaN global scale, a
// nibble-swapped NVFP4 weight (with --against) and linear-layout NVFP4 scales
// are caught.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>

#include "mixq/checkpoint.hpp"
#include "mixq/layer.hpp"
#include "mixq/marker.hpp"
#include "mixq/quantize.hpp"
#include "mixq/recipe.hpp"
#include "mixq/safetensors_writer.hpp"
#include "numeric/swizzle.hpp"
#include "formats/block_checks.hpp"
#include "mixq/verify.hpp"
#include "support/test_support.hpp"

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
    EXPECT_LT(*l.rel_error, 0.15) << l.prefix;
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
