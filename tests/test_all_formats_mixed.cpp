// One checkpoint holding all eight quantized formats at once (fp8 e4m3,
// nvfp4, mxfp8, int8 ConvRot, convrot_w4a4, asym_w4a8_int8, awq_w4a16,
// svdquant_w4a4) plus an unquantized layer: it inspects with every format
// reported, plans under the comfyui profile with every layer accepted, and
// every layer runs through `mixq linear` with the same result as the
// in-process reference Linear, and within its format's activation-quantization
// error of a float linear over the dequantized weight (errors printed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "formats/svdquant.hpp"
#include "mixq/checkpoint.hpp"
#include "mixq/format.hpp"
#include "mixq/inspect.hpp"
#include "mixq/linear.hpp"
#include "mixq/npy.hpp"
#include "mixq/numeric.hpp"
#include "mixq/plan.hpp"
#include "support/test_support.hpp"
#include "test_format_svdquant_helpers.hpp"

namespace mixq {
namespace {

struct Entry {
  const char* prefix;
  const char* format;  // "" = unquantized, "svdquant_w4a4" = hand-built
  nlohmann::json params;
  // The fast kernels equal the reference bit for bit (exact integer block
  // dots, the same scaling in the same order); the float family differs by
  // summation order, and by bf16-rounded activations where its kernel name
  // says bf16.
  bool fast_is_exact;
  // The activation enters the GEMM as float (AWQ, unquantized): a kernel
  // named *bf16* multiplies bf16-rounded x.
  bool float_activation;
  // Bound on ‖y − x·Ŵᵀ − b‖ / ‖x·Ŵᵀ + b‖, Ŵ the dequantized weight: the error
  // of the format's activation quantization (FP8/MXFP8 3 mantissa bits, NVFP4
  // and int4 1-3 bits, int8 7 bits; AWQ's fast path rounds x to bf16; the
  // unquantized layer only sums in another order). About twice what was
  // measured (BENCHMARKS.md "Accuracy of mixq linear, every format").
  double max_rel_error;
};

const int64_t N = 128, K = 256;

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = {
      {"blocks.0.fp8", "float8_e4m3fn", nlohmann::json::object(), false, false, 0.06},
      {"blocks.0.nvfp4", "nvfp4", nlohmann::json::object(), true, false, 0.17},
      {"blocks.0.mxfp8", "mxfp8", nlohmann::json::object(), false, false, 0.06},
      {"blocks.0.int8", "int8_tensorwise", {{"convrot", true}, {"convrot_groupsize", 256}}, true, false, 0.013},
      {"blocks.0.w4a4", "convrot_w4a4", {{"convrot_groupsize", 64}}, true, false, 0.23},
      {"blocks.0.w4a8", "asym_w4a8_int8", nlohmann::json::object(), true, false, 0.013},
      {"blocks.0.awq", "awq_w4a16", {{"group_size", 64}}, false, true, 0.004},
      {"blocks.0.svdquant", "svdquant_w4a4", nlohmann::json::object(), true, false, 0.24},
      {"blocks.0.plain", "", nlohmann::json::object(), false, true, 1e-5},
  };
  return e;
}

std::filesystem::path write_mixed() {
  const auto dir = testing::temp_dir("all_formats_mixed");
  testing::CheckpointBuilder b;
  uint64_t seed = 1;
  for (const Entry& e : entries()) {
    const std::vector<float> w = testing::random_floats(N * K, seed++, 0.05f);
    const std::vector<float> bias = testing::random_floats(N, seed++, 0.1f);
    const std::string fmt = e.format;
    if (fmt.empty()) {
      b.add_float(std::string(e.prefix) + ".weight", DType::BF16, {N, K}, w);
    } else if (fmt == "svdquant_w4a4") {
      for (OwnedTensor& t : testing::svd_tensors(testing::random_svd(N, K, 4, seed++, false), true, true)) {
        t.name = std::string(e.prefix) + "." + t.name;
        b.add(std::move(t));
      }
      b.add_marker(e.prefix, R"({"format": "svdquant_w4a4", "act_unsigned": false, "layout": "kitchen_tile_packed_w4a4"})");
    } else {
      const FormatTraits* f = find_format(fmt);
      if (!f) throw std::runtime_error("no format " + fmt);
      QuantizedLayer q = f->quantize(w.data(), N, K, apply_defaults(*f, e.params));
      for (OwnedTensor& t : q.tensors) {
        t.name = std::string(e.prefix) + "." + t.name;
        b.add(std::move(t));
      }
      b.add_marker(e.prefix, q.marker.dump());
    }
    b.add_float(std::string(e.prefix) + ".bias", DType::F32, {N}, bias);
  }
  b.write(dir / "mixed.safetensors");
  return dir / "mixed.safetensors";
}

TEST(AllFormatsMixed, InspectsPlansAndRunsEveryLayer) {
  const auto path = write_mixed();
  const Checkpoint ck = Checkpoint::open(path.string());

  const nlohmann::json report = inspect_report(ck);
  ASSERT_EQ(report["layers"].size(), entries().size());
  for (const Entry& e : entries()) {
    if (std::string(e.format).empty()) continue;
    ASSERT_TRUE(report["formats"].contains(e.format)) << e.format << "\n" << report.dump(1);
    EXPECT_EQ(report["formats"][e.format]["layers"], 1);
  }
  for (const auto& l : report["layers"]) {
    EXPECT_EQ(l["out_features"], N) << l.dump();
    EXPECT_EQ(l["in_features"], K) << l.dump();
  }

  const Plan plan = Plan::build(ck, {.profile = "comfyui"});
  EXPECT_TRUE(plan.accepted()) << plan.error();
  EXPECT_EQ(plan.layers().size(), entries().size());
  for (const LayerPlan& lp : plan.layers()) {
    EXPECT_TRUE(lp.reason.empty()) << lp.prefix() << ": " << lp.reason;
    EXPECT_NE(lp.method, "invalid") << lp.prefix();
  }

  const auto dir = path.parent_path();
  const int64_t m = 3;
  const std::vector<float> x = testing::random_floats(m * K, 99, 1.0f);
  const std::string xin = (dir / "x.npy").string();
  write_npy(xin, {m, K}, x.data());
  for (const Entry& e : entries()) {
    SCOPED_TRACE(e.prefix);
    const LayerPlan* lp = plan.find(e.prefix);
    ASSERT_NE(lp, nullptr);
    auto ref = Linear::create(lp->layer, {KernelChoice::reference});
    std::vector<float> want(m * N);
    ref->forward(x.data(), m, want.data());
    const std::string fast_kernel(Linear::create(lp->layer, {KernelChoice::automatic})->kernel_name());
    // Per output: sum_k |x_k·w_k| + |b|, the scale of what rounding can move;
    // and sum_k (bf16(x_k) - x_k)·w_k, what bf16-rounded activations move.
    std::vector<float> w_deq(static_cast<size_t>(N * K));
    lp->layer.format->dequantize(lp->layer, Basis::original, w_deq.data());
    const std::vector<float> b_deq = to_f32(lp->layer.tensor("bias"));
    std::vector<double> magnitude(static_cast<size_t>(m * N)), bf16_shift(magnitude.size());
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < N; ++c) {
        double sum = std::fabs(b_deq[c]), shift = 0;
        for (int64_t i = 0; i < K; ++i) {
          const float xi = x[r * K + i];
          sum += std::fabs(double(xi) * w_deq[c * K + i]);
          shift += (double(round_to(DType::BF16, xi)) - xi) * w_deq[c * K + i];
        }
        magnitude[static_cast<size_t>(r * N + c)] = sum;
        bf16_shift[static_cast<size_t>(r * N + c)] = std::fabs(shift);
      }
    for (const char* kernel : {"ref", "auto"}) {
      const std::string yout = (dir / (std::string(e.prefix) + "." + kernel + ".npy")).string();
      const auto r = testing::run_cli({"linear", path.string(), "--layer", e.prefix, "-i", xin, "-o", yout,
                                       "--kernel", kernel});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const NpyArray y = read_npy(yout);
      ASSERT_EQ(y.shape, (Shape{m, N}));
      // Float family: the fast kernels sum in another order (measured on the
      // avx2 FMA cores: at most 5.7e-8 of the magnitude; bound 2e-7), and a
      // kernel named *bf16* on a format with float activations (AWQ) multiplies
      // bf16-rounded x, which moves y by bf16_shift (its f32 rounding within
      // the same 2e-7). FP8/MXFP8 activations are FP8 codes, exact in bf16.
      const bool bf16_x = fast_kernel.find("bf16") != std::string::npos && e.float_activation;
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, std::fabs(double(y.values[i]) - want[i]) / magnitude[i]);
      std::printf("%-18s %-5s (%s) max |y - y_ref| / sum |x·w|: %.3g\n", e.prefix, kernel, fast_kernel.c_str(), worst);
      for (size_t i = 0; i < want.size(); ++i) {
        if (std::string(kernel) == "ref" || e.fast_is_exact)
          ASSERT_EQ(y.values[i], want[i]) << i << " kernel " << fast_kernel;  // the reference's arithmetic
        else
          ASSERT_NEAR(y.values[i], want[i], 2e-7 * magnitude[i] + (bf16_x ? bf16_shift[i] : 0.0))
              << i << " kernel " << fast_kernel;
      }
      // Against a float linear over the dequantized weight.
      const std::vector<float>& w = w_deq;
      const std::vector<float>& bias = b_deq;
      double err = 0, norm = 0;
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < N; ++c) {
          double f = bias[c];
          for (int64_t i = 0; i < K; ++i) f += double(x[r * K + i]) * w[c * K + i];
          err += (y.values[r * N + c] - f) * (y.values[r * N + c] - f);
          norm += f * f;
        }
      const double rel = std::sqrt(err / norm);
      std::printf("%-18s %-5s relative L2 error vs float linear over the dequantized weight: %.3g\n", e.prefix,
                  kernel, rel);
      EXPECT_LT(rel, e.max_rel_error) << kernel;
    }
  }
}

}  // namespace
}  // namespace mixq
