// `mixq linear` end to end: a written checkpoint with an int8 ConvRot layer and
// a W4A4 layer, X as .npy (<f4 and <f2), Y compared bit for bit with the same
// Linear run in-process; usage and input errors give exit 2 / 1.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "linear/synthetic_layer.hpp"
#include "mixq/format.hpp"
#include "mixq/linear.hpp"
#include "mixq/npy.hpp"
#include "mixq/numeric.hpp"
#include "support/test_support.hpp"

namespace {

using mixq::testing::run_cli;

struct Fixture {
  std::filesystem::path dir, ckpt;
  std::unique_ptr<mixq::linear::SyntheticLayer> int8, w4;
};

Fixture make_fixture(const std::string& name) {
  Fixture fx;
  fx.dir = mixq::testing::temp_dir(name);
  fx.ckpt = fx.dir / "model.safetensors";
  fx.int8 = mixq::linear::make_random_layer(*mixq::find_format("int8_tensorwise"),
                                            {{"convrot", true}, {"convrot_groupsize", 64}}, 24, 128, 3);
  fx.w4 = mixq::linear::make_random_layer(*mixq::find_format("convrot_w4a4"), {{"convrot_groupsize", 64}},
                                          40, 128, 4);
  mixq::testing::CheckpointBuilder b;
  for (auto [prefix, layer] : {std::pair{"blocks.0.qkv", fx.int8.get()}, std::pair{"blocks.0.mlp", fx.w4.get()}}) {
    for (const mixq::OwnedTensor& t : layer->tensors) {
      mixq::OwnedTensor copy = t;
      copy.name = std::string(prefix) + "." + t.name;
      b.add(std::move(copy));
    }
    nlohmann::json marker = layer->layer.params;
    marker["format"] = layer->layer.format->name;
    b.add_marker(prefix, marker.dump());
  }
  b.write(fx.ckpt);
  return fx;
}

std::vector<float> expected(const mixq::linear::SyntheticLayer& l, const std::vector<float>& x, int64_t m) {
  auto lin = mixq::Linear::create(l.layer);
  std::vector<float> y(static_cast<size_t>(m * lin->out_features()));
  lin->forward(x.data(), m, y.data());
  return y;
}

TEST(CliLinear, MatchesInProcessLinearBitForBit) {
  Fixture fx = make_fixture("cli_linear_exact");
  const int64_t m = 5;
  auto x = mixq::testing::random_floats(static_cast<size_t>(m * 128), 9);
  const auto xin = (fx.dir / "x.npy").string();
  mixq::write_npy(xin, {m, 128}, x.data());
  for (auto [prefix, layer, n] : {std::tuple{"blocks.0.qkv", fx.int8.get(), 24}, std::tuple{"blocks.0.mlp", fx.w4.get(), 40}}) {
    for (const char* kernel : {"auto", "ref"}) {
      const auto yout = (fx.dir / (std::string(kernel) + "_y.npy")).string();
      auto r = run_cli({"linear", fx.ckpt.string(), "--layer", prefix, "-i", xin, "-o", yout, "--kernel", kernel,
                        "--threads", "2"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const mixq::NpyArray y = mixq::read_npy(yout);
      ASSERT_EQ(y.shape, (mixq::Shape{m, n}));
      const auto want = expected(*layer, x, m);
      EXPECT_EQ(0, std::memcmp(y.values.data(), want.data(), want.size() * 4)) << prefix << " " << kernel;
    }
  }
}

TEST(CliLinear, AcceptsHalfPrecisionInput) {
  Fixture fx = make_fixture("cli_linear_f16");
  const int64_t m = 3;
  auto x = mixq::testing::random_floats(static_cast<size_t>(m * 128), 10);
  for (float& v : x) v = mixq::f16_to_f32(mixq::f32_to_f16(v));  // representable in f16
  // Write <f2 by hand: header + payload.
  const auto path = (fx.dir / "x16.npy").string();
  std::string header = "{'descr': '<f2', 'fortran_order': False, 'shape': (3, 128), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(header.size() & 0xFF);
  file += static_cast<char>(header.size() >> 8);
  file += header;
  for (float v : x) {
    const uint16_t h = mixq::f32_to_f16(v);
    file += static_cast<char>(h & 0xFF);
    file += static_cast<char>(h >> 8);
  }
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(file.data(), 1, file.size(), f);
  std::fclose(f);
  const auto yout = (fx.dir / "y.npy").string();
  auto r = run_cli({"linear", fx.ckpt.string(), "--layer", "blocks.0.mlp", "-i", path, "-o", yout});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto want = expected(*fx.w4, x, m);
  const mixq::NpyArray y = mixq::read_npy(yout);
  EXPECT_EQ(0, std::memcmp(y.values.data(), want.data(), want.size() * 4));
}

TEST(CliLinear, ErrorsNameTheProblem) {
  Fixture fx = make_fixture("cli_linear_errors");
  auto x = mixq::testing::random_floats(2 * 100, 1);
  const auto bad = (fx.dir / "bad.npy").string();
  mixq::write_npy(bad, {2, 100}, x.data());
  const auto yout = (fx.dir / "y.npy").string();
  auto r = run_cli({"linear", fx.ckpt.string(), "--layer", "blocks.0.qkv", "-i", bad, "-o", yout});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("100 columns"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.rfind("mixq: error: ", 0), 0u) << r.err;
  r = run_cli({"linear", fx.ckpt.string(), "--layer", "blocks.9.nope", "-i", bad, "-o", yout});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("blocks.9.nope"), std::string::npos) << r.err;
  r = run_cli({"linear", fx.ckpt.string(), "--layer", "blocks.0.qkv", "-i", bad, "-o", yout, "--kernel", "fastest"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(yout));
}

// An NVFP4 layer without pre_quant_scale reports the stored K (40 padded to
// 48): X may have 40 columns (the rest are the zero padding) but not 32, and an
// INT8 layer (K known) takes exactly its K.
TEST(CliLinear, PaddedKAcceptsTheLogicalColumnsOnly) {
  const auto dir = mixq::testing::temp_dir("cli_linear_padded_k");
  const auto ckpt = dir / "nvfp4.safetensors";
  auto nv = mixq::linear::make_random_layer(*mixq::find_format("nvfp4"), {}, 32, 40, 5);
  ASSERT_EQ(nv->layer.in_features, 48);
  EXPECT_EQ(nv->layer.k_pad_unit, 16);
  mixq::testing::CheckpointBuilder b;
  for (const mixq::OwnedTensor& t : nv->tensors) {
    mixq::OwnedTensor copy = t;
    copy.name = "l." + t.name;
    b.add(std::move(copy));
  }
  b.add_marker("l", R"({"format": "nvfp4"})");
  b.write(ckpt);
  const int64_t m = 3;
  auto x = mixq::testing::random_floats(static_cast<size_t>(m * 40), 2);
  const auto xin = (dir / "x40.npy").string(), yout = (dir / "y.npy").string();
  mixq::write_npy(xin, {m, 40}, x.data());
  auto r = run_cli({"linear", ckpt.string(), "--layer", "l", "-i", xin, "-o", yout});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<float> padded(static_cast<size_t>(m * 48), 0.0f);
  for (int64_t i = 0; i < m; ++i) std::copy_n(x.begin() + i * 40, 40, padded.begin() + i * 48);
  const auto want = expected(*nv, padded, m);
  const mixq::NpyArray y = mixq::read_npy(yout);
  ASSERT_EQ(y.values.size(), want.size());
  EXPECT_EQ(0, std::memcmp(y.values.data(), want.data(), want.size() * 4));

  const auto x32 = (dir / "x32.npy").string();
  mixq::write_npy(x32, {m, 32}, x.data());
  r = run_cli({"linear", ckpt.string(), "--layer", "l", "-i", x32, "-o", yout});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("32 columns"), std::string::npos) << r.err;

  Fixture fx = make_fixture("cli_linear_exact_k");
  const auto x120 = (fx.dir / "x120.npy").string();
  mixq::write_npy(x120, {1, 120}, x.data());
  r = run_cli({"linear", fx.ckpt.string(), "--layer", "blocks.0.qkv", "-i", x120, "-o", yout});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("120 columns"), std::string::npos) << r.err;
}

}  // namespace
