// `mixq dequantize` end to end on a written mixed checkpoint: every layer's
// .npy equals the in-memory dequantization, both bases, and clear errors.
#include <gtest/gtest.h>

#include "numeric/hadamard.hpp"
#include "mixq/npy.hpp"
#include "support/test_support.hpp"
#include "test_format_helpers.hpp"

namespace mixq {
namespace {

using nlohmann::json;

struct Spec {
  std::string prefix, format;
  json params;
  int64_t n, k;
  bool bias;
};

const std::vector<Spec>& specs() {
  static const std::vector<Spec> s = {
      {"blocks.0.attn.qkv_proj", "nvfp4", json::object(), 48, 80, true},
      {"blocks.0.attn.out_proj", "int8_tensorwise", {{"convrot", true}, {"convrot_groupsize", 64}}, 40, 128, true},
      {"blocks.0.mlp.fc1", "convrot_w4a4", {{"convrot_groupsize", 64}, {"linear_dtype", "int8"}}, 24, 128, false},
      {"blocks.0.mlp.fc2", "float8_e4m3fn", json::object(), 20, 36, true},
      {"blocks.0.adaln.linear", "mxfp8", json::object(), 33, 64, true},
  };
  return s;
}

class CliDequantize : public ::testing::Test {
 protected:
  struct Expected {
    int64_t n, k;
    std::vector<float> original, stored;
  };

  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(testing::temp_dir("cli_dequantize"));
    expected_ = new std::vector<Expected>();
    testing::CheckpointBuilder builder;
    uint64_t seed = 1;
    for (const Spec& s : specs()) {
      const FormatTraits& f = *find_format(s.format);
      const auto w = testing::random_floats(s.n * s.k, seed++);
      const auto bias = s.bias ? testing::random_floats(s.n, seed++) : std::vector<float>{};
      const auto mem = testing::quantized_layer(f, w, s.n, s.k, s.params, bias);
      expected_->push_back({mem->layer.out_features, mem->layer.in_features,
                            testing::dequantized(mem->layer, Basis::original),
                            testing::dequantized(mem->layer, Basis::stored)});
      auto q = f.quantize(w.data(), s.n, s.k, apply_defaults(f, s.params));
      for (auto& t : q.tensors) {
        t.name = s.prefix + "." + t.name;
        builder.add(std::move(t));
      }
      if (s.bias) builder.add_float(s.prefix + ".bias", DType::BF16, {s.n}, bias);
      builder.add_marker(s.prefix, q.marker.dump());
    }
    builder.add_float("blocks.0.norm.weight", DType::F32, {16}, std::vector<float>(16, 1.0f));
    plain_ = new std::vector<float>(testing::random_floats(15, 99));
    builder.add_float("final.proj.weight", DType::F16, {3, 5}, *plain_);
    // A marked layer whose scale has the wrong shape: inspectable, not decodable.
    builder.add("broken.proj.weight", DType::I8, {4, 8}, std::vector<std::byte>(32));
    builder.add_float("broken.proj.weight_scale", DType::F32, {4, 2}, std::vector<float>(8, 1.0f));
    builder.add_marker("broken.proj", R"({"format": "int8_tensorwise"})");
    builder.write(*dir_ / "mixed.safetensors");
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete expected_;
    delete plain_;
  }

  static std::string checkpoint() { return (*dir_ / "mixed.safetensors").string(); }
  static std::string out(const std::string& name) { return (*dir_ / name).string(); }

  static std::filesystem::path* dir_;
  static std::vector<Expected>* expected_;
  static std::vector<float>* plain_;
};
std::filesystem::path* CliDequantize::dir_ = nullptr;
std::vector<CliDequantize::Expected>* CliDequantize::expected_ = nullptr;
std::vector<float>* CliDequantize::plain_ = nullptr;

TEST_F(CliDequantize, EveryLayerMatchesInMemoryDequantization) {
  for (size_t i = 0; i < specs().size(); ++i) {
    const Spec& s = specs()[i];
    const Expected& e = (*expected_)[i];
    for (const char* basis : {"original", "stored"}) {
      const std::string path = out(s.prefix + "." + basis + ".npy");
      const auto r = testing::run_cli({"dequantize", checkpoint(), "--layer", s.prefix, "-o", path, "--basis", basis});
      ASSERT_EQ(r.exit_code, 0) << s.prefix << ": " << r.err;
      EXPECT_NE(r.out.find(s.prefix), std::string::npos);
      const NpyArray a = read_npy(path);
      ASSERT_EQ(a.shape, (Shape{e.n, e.k})) << s.prefix;
      EXPECT_EQ(a.values, std::string(basis) == "original" ? e.original : e.stored) << s.prefix << " " << basis;
    }
  }
  // The bias gives the logical N of the padded formats.
  EXPECT_EQ((*expected_)[0].n, 48);
  EXPECT_EQ((*expected_)[4].n, 33);
  // ConvRot layers differ between the bases; the rest do not.
  EXPECT_NE((*expected_)[1].original, (*expected_)[1].stored);
  EXPECT_NE((*expected_)[2].original, (*expected_)[2].stored);
  EXPECT_EQ((*expected_)[3].original, (*expected_)[3].stored);
}

TEST_F(CliDequantize, DefaultBasisIsOriginalAndUnquantizedLayersWork) {
  const std::string path = out("default.npy");
  auto r = testing::run_cli({"dequantize", checkpoint(), "--layer", specs()[1].prefix, "-o", path, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(read_npy(path).values, (*expected_)[1].original);

  const std::string plain = out("plain.npy");
  r = testing::run_cli({"dequantize", checkpoint(), "--layer", "final.proj", "-o", plain});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const NpyArray a = read_npy(plain);
  ASSERT_EQ(a.shape, (Shape{3, 5}));
  for (size_t i = 0; i < a.values.size(); ++i) EXPECT_EQ(a.values[i], round_to(DType::F16, (*plain_)[i]));
}

TEST_F(CliDequantize, ErrorsAreOneLineWithContext) {
  auto r = testing::run_cli({"dequantize", checkpoint(), "--layer", "blocks.0.attn.qkv", "-o", out("x.npy")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("mixq: error: no layer 'blocks.0.attn.qkv'", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("blocks.0.attn.qkv_proj"), std::string::npos) << r.err;  // closest match

  r = testing::run_cli({"dequantize", checkpoint(), "--layer", "broken.proj", "-o", out("y.npy")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("broken.proj.weight_scale"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out("y.npy")));

  r = testing::run_cli({"dequantize", checkpoint(), "--layer", "final.proj", "-o", out("z.npy"), "--basis", "rotated"});
  EXPECT_EQ(r.exit_code, 2);
  r = testing::run_cli({"dequantize", checkpoint(), "-o", out("z.npy")});
  EXPECT_EQ(r.exit_code, 2);
  r = testing::run_cli({"dequantize", out("missing.safetensors"), "--layer", "a", "-o", out("z.npy")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("mixq: error: ", 0), 0u);
}

}  // namespace
}  // namespace mixq
