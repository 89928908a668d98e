// svdquant_w4a4 record (docs/FORMATS.md §3.8): the tile-pack mapping, both
// layouts and both companion spellings, the effective-weight formula, and
// validation errors.
#include <gtest/gtest.h>

#include <cmath>

#include "formats/svdquant.hpp"
#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/layer.hpp"
#include "mixq/marker.hpp"
#include "support/test_support.hpp"
#include "test_format_helpers.hpp"
#include "test_format_svdquant_helpers.hpp"

namespace mixq {
namespace {
using testing::bind_layer;

const FormatTraits& Svd() { return formats::svdquant_w4a4_format(); }

TEST(SvdquantTilePack, SpecMapping) {
  const int64_t n = 256, k = 192;  // 2 row tiles, 3 k-groups
  std::vector<uint8_t> natural(n * k / 2), packed(natural.size()), back(natural.size());
  for (size_t i = 0; i < natural.size(); ++i) natural[i] = static_cast<uint8_t>((i * 7 + i / 97) & 0xFF);
  formats::svdquant_tile_weight(natural.data(), packed.data(), n, k, false);
  // packed[t, kg, q, 32·i + b] = natural[row, 32·kg + b], t = row/128, q = (row%128)/4, i = row%4.
  for (int64_t row : {0, 1, 3, 4, 127, 128, 130, 255})
    for (int64_t kg = 0; kg < 3; ++kg)
      for (int64_t b : {0, 1, 31}) {
        const int64_t t = row / 128, q = (row % 128) / 4, i = row % 4;
        const int64_t at = ((t * 3 + kg) * 32 + q) * 128 + 32 * i + b;
        ASSERT_EQ(packed[at], natural[row * (k / 2) + 32 * kg + b]) << row << " " << kg << " " << b;
      }
  formats::svdquant_tile_weight(packed.data(), back.data(), n, k, true);
  EXPECT_EQ(back, natural);
  // scales_tile[t, g, j] = wscales[g, 128·t + j]; proj_up_tile[t, r, j] = proj_up[128·t + j, r].
  std::vector<float> s(3 * n), st(s.size()), u(n * 5), ut(u.size());
  for (size_t i = 0; i < s.size(); ++i) s[i] = float(i);
  for (size_t i = 0; i < u.size(); ++i) u[i] = float(i);
  formats::svdquant_tile_scales(s.data(), st.data(), n, k, false);
  formats::svdquant_tile_proj_up(u.data(), ut.data(), n, 5, false);
  EXPECT_EQ(st[(1 * 3 + 2) * 128 + 7], s[2 * n + 128 + 7]);
  EXPECT_EQ(ut[(1 * 5 + 4) * 128 + 9], u[(128 + 9) * 5 + 4]);
}

TEST(SvdquantRecord, EffectiveWeightFormula) {
  const testing::SvdParts p = testing::random_svd(8, 128, 3, 1);
  auto l = bind_layer(Svd(), testing::svd_tensors(p, false));
  validate_layer(l->layer);
  EXPECT_EQ(l->layer.out_features, 8);
  EXPECT_EQ(l->layer.in_features, 128);
  const std::vector<float> w = testing::dequantized(l->layer);
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t c = 0; c < 128; ++c) {
      const uint8_t byte = p.weight[r * 64 + c / 2];
      const int nib = (c & 1) ? byte >> 4 : byte & 15;
      const int q = nib >= 8 ? nib - 16 : nib;
      float low = 0;
      for (int64_t j = 0; j < 3; ++j) low += p.proj_down[c * 3 + j] * p.proj_up[r * 3 + j];
      ASSERT_EQ(w[r * 128 + c], float(q) * p.wscale[(c / 64) * 8 + r] / p.smooth[c] + low);
    }
  EXPECT_EQ(Svd().quantize, nullptr);  // needs calibration
  EXPECT_EQ(Svd().tp_input_unit(l->layer), 64);
  EXPECT_EQ(Svd().method(l->layer), "svdquant_w4a4");
}

TEST(SvdquantRecord, TilePackedEqualsNaturalInEveryDtype) {
  const testing::SvdParts p = testing::random_svd(256, 128, 4, 2);
  auto nat = bind_layer(Svd(), testing::svd_tensors(p, false));
  validate_layer(nat->layer);
  const std::vector<float> want = testing::dequantized(nat->layer);
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    auto tile = bind_layer(Svd(), testing::svd_tensors(p, true, false, dt), {{"layout", formats::kSvdquantTileLayout}});
    validate_layer(tile->layer);
    EXPECT_TRUE(tile->layer.warnings.empty());
    EXPECT_EQ(testing::dequantized(tile->layer), want) << dtype_name(dt);
  }
  // A 4-D weight without "layout" is read as tile-packed, with a warning.
  auto implicit = bind_layer(Svd(), testing::svd_tensors(p, true));
  validate_layer(implicit->layer);
  ASSERT_EQ(implicit->layer.warnings.size(), 1u);
  EXPECT_EQ(testing::dequantized(implicit->layer), want);
}

TEST(SvdquantRecord, BothCompanionSpellingsBindThroughACheckpoint) {
  const testing::SvdParts p = testing::random_svd(16, 64, 2, 3);
  const auto dir = testing::temp_dir("svd_alias");
  testing::CheckpointBuilder b;
  for (OwnedTensor& t : testing::svd_tensors(p, false, true)) {
    t.name = "blocks.0.long." + t.name;
    b.add(std::move(t));
  }
  for (OwnedTensor& t : testing::svd_tensors(p, false, false)) {
    t.name = "blocks.0.short." + t.name;
    b.add(std::move(t));
  }
  b.add_marker("blocks.0.long", R"({"format": "svdquant_w4a4", "act_unsigned": true, "lowrank_branch_input_basis": "raw", "proj_down_smooth_folded": true})");
  b.add_marker("blocks.0.short", R"({"format": "svdquant_w4a4"})");
  b.write(dir / "m.safetensors");
  const Checkpoint ck = Checkpoint::open((dir / "m.safetensors").string());
  const LayerSet set = group_layers(ck, collect_markers(ck));
  ASSERT_EQ(set.layers.size(), 2u);
  EXPECT_TRUE(set.other_tensors.empty());
  std::vector<float> first;
  for (const Layer& l : set.layers) {
    EXPECT_TRUE(l.problem.empty()) << l.problem;
    for (const char* role : {"weight_proj_down", "weight_proj_up", "weight_smooth_factor", "bias"})
      EXPECT_NE(l.find(role), nullptr) << l.prefix << " " << role;
    std::vector<float> w(16 * 64);
    Svd().dequantize(l, Basis::original, w.data());
    if (first.empty()) first = w; else EXPECT_EQ(w, first);
  }
  EXPECT_EQ(set.layers[0].params["act_unsigned"], true);
  EXPECT_EQ(set.layers[1].params["act_unsigned"], false);
}

void expect_rejected(std::vector<OwnedTensor> t, const nlohmann::json& params, const std::string& needle) {
  auto l = bind_layer(Svd(), std::move(t), params);
  try {
    validate_layer(l->layer);
    ADD_FAILURE() << "accepted; expected '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SvdquantRecord, ValidationErrors) {
  const testing::SvdParts p = testing::random_svd(128, 128, 2, 4);
  {
    auto t = testing::svd_tensors(testing::random_svd(8, 64, 2, 5), false);
    t[0] = testing::zero_tensor("weight", DType::I8, {8, 48});  // K = 96
    expect_rejected(std::move(t), {}, "K % 64");
  }
  expect_rejected(testing::svd_tensors(p, false), {{"group_size", 32}}, "fixed at 64");
  expect_rejected(testing::svd_tensors(p, false), {{"layout", "nunchaku"}}, "layout");
  expect_rejected(testing::svd_tensors(p, false), {{"layout", formats::kSvdquantTileLayout}}, "[N/128, K/64, 32, 128]");
  expect_rejected(testing::svd_tensors(p, false), {{"lowrank_branch_input_basis", "smoothed"}}, "not supported");
  expect_rejected(testing::svd_tensors(p, false), {{"proj_down_smooth_folded", false}}, "not supported");
  expect_rejected(testing::svd_tensors(p, false), {{"act_unsigned", "yes"}}, "boolean");
  {
    auto t = testing::svd_tensors(p, false);
    t[2] = testing::zero_tensor("weight_proj_up", DType::BF16, {2, 128});  // transposed
    expect_rejected(std::move(t), {}, "[128, 2]");
  }
  {
    auto t = testing::svd_tensors(p, false);
    t[1] = testing::zero_tensor("weight_scale", DType::BF16, {128, 2});
    expect_rejected(std::move(t), {}, "[2, 128]");
  }
  {
    auto t = testing::svd_tensors(p, false);
    t[4] = testing::zero_tensor("weight_smooth_factor", DType::I8, {128});
    expect_rejected(std::move(t), {}, "smooth_factor");
  }
  {
    auto t = testing::svd_tensors(p, false);
    t.erase(t.begin() + 3);  // proj_down
    expect_rejected(std::move(t), {}, "missing");
  }
}

}  // namespace
}  // namespace mixq
