// The float-family Linear layers hold their weights at the stored width:
// Linear::packed_bytes() (the packed panels, or the reference's copies, plus
// scales and bias) is at most 1.05x the bytes of the layer's tensors in the
// file, for FP8 (1 byte per weight, decoded in the kernel), MXFP8 (1 + 1/32),
// unquantized BF16 / F16 / F32 and the full-precision FP8 / MXFP8 / NVFP4
// layers, on every kernel path this CPU runs (the reference, avx2, and
// avx512 with each float dot). N is a multiple of 16 here: the panels pad N
// to 16 columns. Before the weights stayed 8-bit, FP8 / MXFP8 layers held
// bf16 panels (2x the file) and full-precision ones f32 copies (4x).
// The integer family's fast kernels too: INT8 + ConvRot, ConvRot W4A4 and
// asym_w4a8_int8, whose kernels keep the 4-bit codes and s_rel as stored and
// decode them in the GEMM (before: the codes decoded to int8, 2x the file).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/calibrate.hpp"
#include "kernels/cpu.hpp"
#include "linear/synthetic_layer.hpp"
#include "mixq/format.hpp"
#include "mixq/linear.hpp"
#include "mixq/numeric.hpp"
#include "support/test_support.hpp"
#include "test_format_helpers.hpp"

namespace mixq {
namespace {

using testing::random_floats;

constexpr int64_t kN = 256, kK = 512;

struct Built {
  std::unique_ptr<linear::SyntheticLayer> synthetic;  // quantized formats
  std::unique_ptr<testing::OwnedLayer> owned;         // unquantized 16-bit weights
  const Layer& layer() const { return synthetic ? synthetic->layer : owned->layer; }
};

Built quantized(const char* format, bool full_precision) {
  Built b;
  b.synthetic = linear::make_random_layer(*find_format(format), nlohmann::json::object(), kN, kK, 7);
  if (full_precision) b.synthetic->layer.params["full_precision_matrix_mult"] = true;
  return b;
}

Built unquantized(DType dtype) {
  const std::vector<float> w = random_floats(static_cast<size_t>(kN * kK), 3, 0.05f);
  std::vector<std::byte> bytes(w.size() * dtype_size(dtype));
  for (size_t i = 0; i < w.size(); ++i) {
    if (dtype == DType::F32) {
      std::memcpy(bytes.data() + 4 * i, &w[i], 4);
    } else {
      const uint16_t h = dtype == DType::BF16 ? f32_to_bf16(w[i]) : f32_to_f16(w[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  std::vector<OwnedTensor> t;
  t.push_back(OwnedTensor{"weight", dtype, {kN, kK}, std::move(bytes)});
  t.push_back(testing::f32_tensor("bias", {kN}, random_floats(kN, 4, 0.1f)));
  Built b;
  b.owned = testing::bind_layer(unquantized_format(), std::move(t));
  validate_layer(b.owned->layer);
  return b;
}

TEST(LinearPackedBytes, FloatLayersHoldAtMostTheStoredBytes) {
  struct Case {
    std::string name;
    Built built;
  };
  std::vector<Case> cases;
  cases.push_back({"float8_e4m3fn", quantized("float8_e4m3fn", false)});
  cases.push_back({"float8_e5m2", quantized("float8_e5m2", false)});
  cases.push_back({"float8_e4m3fn:full_precision", quantized("float8_e4m3fn", true)});
  cases.push_back({"mxfp8", quantized("mxfp8", false)});
  cases.push_back({"mxfp8:full_precision", quantized("mxfp8", true)});
  cases.push_back({"nvfp4:full_precision", quantized("nvfp4", true)});
  cases.push_back({"unquantized:BF16", unquantized(DType::BF16)});
  cases.push_back({"unquantized:F16", unquantized(DType::F16)});
  cases.push_back({"unquantized:F32", unquantized(DType::F32)});

  struct Path {
    kernels::Isa isa;
    std::optional<kernels::FloatDot> dot;
  };
  std::vector<Path> paths = {{kernels::Isa::reference, std::nullopt}};
  if (kernels::best_isa() >= kernels::Isa::avx2) paths.push_back({kernels::Isa::avx2, std::nullopt});
  if (kernels::best_isa() >= kernels::Isa::avx512) {
    paths.push_back({kernels::Isa::avx512, kernels::FloatDot::fma});
    if (kernels::has_avx512_vnni_bf16()) paths.push_back({kernels::Isa::avx512, kernels::FloatDot::bf16});
  }
  for (const Path& path : paths) {
    kernels::set_isa(path.isa);
    kernels::set_float_dot(path.dot);
    for (const Case& c : cases) {
      const Layer& layer = c.built.layer();
      const auto lin = Linear::create(layer);
      const std::optional<int64_t> held = lin->packed_bytes();
      ASSERT_TRUE(held.has_value()) << c.name;
      const double file = static_cast<double>(layer.bytes());
      std::printf("%-30s %-12s packed %9lld B, file %9.0f B: %.3fx\n", c.name.c_str(),
                  std::string(lin->kernel_name()).c_str(), static_cast<long long>(*held), file, *held / file);
      EXPECT_LE(static_cast<double>(*held), 1.05 * file) << c.name << " on " << lin->kernel_name();
      // The weight itself is there: not a layer that forgot to count it.
      EXPECT_GE(static_cast<double>(*held), 0.5 * file) << c.name << " on " << lin->kernel_name();
    }
  }
  kernels::set_isa(kernels::best_isa());
  kernels::set_float_dot(std::nullopt);
}

TEST(LinearPackedBytes, IntegerFastKernelsHoldAtMostTheStoredBytes) {
  // 1024 x 1024: asym_w4a8_int8's kernel adds a fixed 4 KiB table (the decode
  // of every E4M3 s_rel byte), 0.7% of this layer's file.
  constexpr int64_t n = 1024, k = 1024;
  struct Case {
    const char* format;
    nlohmann::json params;
  };
  const Case cases[] = {
      {"asym_w4a8_int8", nlohmann::json::object()},  // codebook, E4M3 s_rel
      {"asym_w4a8_int8", {{"mode", "uniform"}, {"scale_dtype", "f32"}}},
      {"int8_tensorwise", {{"convrot", true}}},
      {"convrot_w4a4", nlohmann::json::object()},
  };
  std::vector<kernels::Isa> paths;  // the reference holds int8 [n, k] copies: not bounded here
  if (kernels::best_isa() >= kernels::Isa::avx2) paths.push_back(kernels::Isa::avx2);
  if (kernels::best_isa() >= kernels::Isa::avx512) paths.push_back(kernels::Isa::avx512);
  for (const kernels::Isa isa : paths) {
    kernels::set_isa(isa);
    for (const Case& c : cases) {
      const auto built = linear::make_random_layer(*find_format(c.format), c.params, n, k, 11);
      const Layer& layer = built->layer;
      const auto lin = Linear::create(layer);
      const std::optional<int64_t> held = lin->packed_bytes();
      ASSERT_TRUE(held.has_value()) << c.format;
      const double file = static_cast<double>(layer.bytes());
      std::printf("%-16s %-40s %-12s packed %9lld B, file %9.0f B: %.3fx\n", c.format, c.params.dump().c_str(),
                  std::string(lin->kernel_name()).c_str(), static_cast<long long>(*held), file, *held / file);
      EXPECT_LE(static_cast<double>(*held), 1.05 * file) << c.format << " on " << lin->kernel_name();
      EXPECT_GE(static_cast<double>(*held), 0.9 * file) << c.format << " on " << lin->kernel_name();
    }
  }
  kernels::set_isa(kernels::best_isa());
}

}  // namespace
}  // namespace mixq
