// Tensor-parallel shards of layers that SGLang's global MXFP8 rule makes mxfp8
// (header quant_format "mxfp8", unmarked F8_E4M3 weights, row-major U8
// [N, K/32] exponents): the exponents are cut like the codes, so every rank's
// layer is again a global-rule layer of exactly [rows, K/32]. Over degrees 1,
// 2, 4, 8: the shards' dequantized weights put back in place equal the layer's
// bit for bit; column shards' outputs equal the layer's bit for bit; row
// shards' outputs sum to it up to float32 summation order (MXFP8 quantizes
// activations per 32-block, inside one rank's band). `mixq shard --profile
// sglang` writes rank files that SGLang's rule reads the same way.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "mixq/checkpoint.hpp"
#include "mixq/format.hpp"
#include "mixq/linear.hpp"
#include "mixq/marker.hpp"
#include "mixq/plan.hpp"
#include "mixq/shard.hpp"
#include "numeric/swizzle.hpp"
#include "test_format_helpers.hpp"
#include "test_plan_fixtures.hpp"

namespace mixq::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct GlobalSpec {
  const char* prefix;
  int64_t n, k;
  Parallel parallel;
  int parts;
};

// Row (K band), fused column (2 parts), plain column; N a multiple of 32 (the
// quantizer pads rows to 32, the global rule stores none).
const std::vector<GlobalSpec> kLayers = {
    {"blocks.0.attn.out_proj", 96, 256, Parallel::row, 1},
    {"blocks.0.mlp.fc1", 2 * 48, 96, Parallel::column, 2},
    {"blocks.0.adaln_proj.linear", 64, 64, Parallel::column, 1},
};

std::vector<std::byte> bytes_of(const std::vector<uint8_t>& v) {
  std::vector<std::byte> out(v.size());
  std::memcpy(out.data(), v.data(), v.size());
  return out;
}

// mixq's MXFP8 quantizer (swizzled exponents), unswizzled to the rule's [N, K/32].
fs::path write_global_file(const fs::path& dir) {
  CheckpointBuilder b;
  const FormatTraits& f = *find_format("mxfp8");
  uint64_t seed = 11;
  for (const GlobalSpec& l : kLayers) {
    const std::vector<float> w = random_floats(static_cast<size_t>(l.n * l.k), seed++, 0.05f);
    QuantizedLayer q = f.quantize(w.data(), l.n, l.k, apply_defaults(f, json::object()));
    for (const OwnedTensor& t : q.tensors) {
      const auto* p = reinterpret_cast<const uint8_t*>(t.data.data());
      if (t.name == "weight")
        b.add(std::string(l.prefix) + ".weight", DType::F8_E4M3, {l.n, l.k}, t.data);
      if (t.name == "weight_scale")
        b.add(std::string(l.prefix) + ".weight_scale", DType::U8, {l.n, l.k / 32},
              bytes_of(unswizzle_scales(p, l.n, l.k / 32)));
    }
    b.add_float(std::string(l.prefix) + ".bias", DType::F32, {l.n}, random_floats(static_cast<size_t>(l.n), seed++));
  }
  b.add_float("blocks.0.norm1.weight", DType::F32, {96}, random_floats(96, seed++));
  b.metadata("quant_format", "mxfp8");
  const fs::path path = dir / "global.safetensors";
  b.write(path);
  return path;
}

std::vector<float> forward(const Layer& layer, const std::vector<float>& x, int64_t m, KernelChoice kernel) {
  auto linear = Linear::create(layer, LinearOptions{kernel});
  std::vector<float> y(static_cast<size_t>(m * linear->out_features()));
  linear->forward(x.data(), m, y.data());
  return y;
}

TEST(TpShardGlobalMxfp8, SharesReassembleAndRunLikeTheLayer) {
  const Checkpoint ck = Checkpoint::open(write_global_file(temp_dir("tp-global")).string());
  const Plan plan = plan_of(ck, "sglang");
  expect_accepted(plan);
  constexpr int64_t m = 5;
  for (const GlobalSpec& spec : kLayers) {
    const LayerPlan& lp = layer_of(plan, spec.prefix);
    ASSERT_EQ(lp.layer.params.value("_scale_layout", ""), "linear") << spec.prefix;
    ASSERT_EQ(lp.parallel, spec.parallel);
    ASSERT_EQ(lp.parts, spec.parts);
    const int64_t n = spec.n, k = spec.k;
    const std::vector<float> w = dequantized(lp.layer);
    const std::vector<float> x = random_floats(static_cast<size_t>(m * k), 3);
    for (int degree : {1, 2, 4, 8}) {
      SCOPED_TRACE(std::string(spec.prefix) + " degree " + std::to_string(degree));
      ASSERT_EQ(plan.tp_problem(lp, degree), "");  // unpadded rows: no row unit; K bands of whole 32-blocks
      std::vector<float> put_back(w.size());
      for (KernelChoice kernel : {KernelChoice::reference, KernelChoice::automatic}) {
        const std::vector<float> y = forward(lp.layer, x, m, kernel);
        std::vector<double> sum(y.size(), 0.0);
        std::vector<float> total(y.size(), 0.0f);
        for (int rank = 0; rank < degree; ++rank) {
          const LayerShard shard = shard_layer(plan, lp, rank, degree);
          const Layer& s = shard.layer();
          const TensorView& scale = s.tensor("weight_scale");
          ASSERT_EQ(scale.dtype, DType::U8);
          ASSERT_EQ(scale.shape, (Shape{s.tensor("weight").shape[0], s.in_features / 32}));  // the rule's layout
          const std::vector<float> ws = dequantized(s);
          if (spec.parallel == Parallel::row) {
            const int64_t band = k / degree;
            ASSERT_EQ(s.in_features, band);
            for (int64_t r = 0; r < n; ++r)
              std::memcpy(&put_back[r * k + rank * band], &ws[r * band], band * sizeof(float));
            std::vector<float> xs(static_cast<size_t>(m * band));
            for (int64_t i = 0; i < m; ++i)
              std::memcpy(&xs[i * band], &x[i * k + rank * band], band * sizeof(float));
            const std::vector<float> ys = forward(s, xs, m, kernel);
            for (size_t i = 0; i < ys.size(); ++i) total[i] += ys[i];
          } else {
            const int64_t part = n / spec.parts, rows = part / degree;
            ASSERT_EQ(s.out_features, rows * spec.parts);
            const std::vector<float> ys = forward(s, x, m, kernel);
            for (int p = 0; p < spec.parts; ++p)
              for (int64_t r = 0; r < rows; ++r) {
                const int64_t src = p * part + rank * rows + r, dst = p * rows + r;
                std::memcpy(&put_back[src * k], &ws[dst * k], k * sizeof(float));
                for (int64_t i = 0; i < m; ++i) total[i * n + src] = ys[i * s.out_features + dst];
              }
          }
        }
        EXPECT_EQ(put_back, w);  // every exponent and code where it was
        if (spec.parallel == Parallel::column) {
          EXPECT_EQ(total, y);  // bit for bit: every rank sees the whole activation
          continue;
        }
        // Row: each rank quantizes its band per 32-block exactly as the layer
        // does, so only the float32 summation order differs: bounded by
        // (k + 2)·2^-24·Σ|x·ŵ| + |b|, times 4 for the quantized activation.
        const TensorView& bias = lp.layer.tensor("bias");
        const auto* b = reinterpret_cast<const float*>(bias.data.data());
        for (int64_t i = 0; i < m; ++i)
          for (int64_t r = 0; r < n; ++r) {
            double mag = std::fabs(b[r]);
            for (int64_t c = 0; c < k; ++c) mag += std::fabs(x[i * k + c] * w[r * k + c]);
            EXPECT_LE(std::fabs(total[i * n + r] - y[i * n + r]), 4.0 * (k + 2) * std::ldexp(1.0, -24) * mag)
                << "row " << i << " output " << r;
          }
      }
    }
  }
}

TEST(TpShardGlobalMxfp8, ColumnSharesOfWholeRowsAreViews) {
  const Checkpoint ck = Checkpoint::open(write_global_file(temp_dir("tp-global-views")).string());
  const Plan plan = plan_of(ck, "sglang");
  const LayerPlan& col = layer_of(plan, "blocks.0.adaln_proj.linear");
  EXPECT_EQ(shard_layer(plan, col, 1, 2).copied_bytes(), 0u);  // a band of whole rows of codes and exponents
  const LayerPlan& row = layer_of(plan, "blocks.0.attn.out_proj");
  const LayerShard r = shard_layer(plan, row, 1, 2);
  // A K band is strided: the rank's codes and exponents only (96 x 128 + 96 x 4).
  EXPECT_EQ(r.copied_bytes(), 96u * 128 + 96u * 4);
  EXPECT_EQ(r.layer().find("bias"), nullptr);  // the bias stays on rank 0
}

TEST(TpShardGlobalMxfp8, ShardCommandWritesRankFilesTheRuleReads) {
  const fs::path dir = temp_dir("tp-global-cli");
  const fs::path source = write_global_file(dir);
  // ComfyUI does not read quant_format, so the comfyui plan (the default) refuses.
  CliResult r = run_cli({"shard", source.string(), "--tp", "2", "-o", (dir / "comfy").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("comfyui ignores the header's quant_format"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "comfy"));

  r = run_cli({"shard", source.string(), "--tp", "2", "--profile", "sglang", "-o", (dir / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Checkpoint ck = Checkpoint::open(source.string());
  const Plan plan = plan_of(ck, "sglang");
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    const Checkpoint part = Checkpoint::open((dir / "out" / ("rank" + std::to_string(rank) + ".safetensors")).string());
    EXPECT_EQ(collect_markers(part).implied.size(), kLayers.size());  // no marker written: the rule applies again
    const Plan rank_plan = plan_of(part, "sglang");
    expect_accepted(rank_plan);
    for (const GlobalSpec& spec : kLayers) {
      const LayerPlan& mine = layer_of(rank_plan, spec.prefix);
      EXPECT_EQ(mine.method, "mxfp8:row_major_scales");
      EXPECT_EQ(dequantized(mine.layer), dequantized(shard_layer(plan, layer_of(plan, spec.prefix), rank, 2).layer()));
    }
  }
}

}  // namespace
}  // namespace mixq::testing
