// awq_w4a16 linear. Reference = fp32 dequantize + fp32 GEMM (docs/FORMATS.md §3.9's
// recommended CUDA-naive semantics). Fast (AVX-512 BF16, "awq:avx512_bf16",
// at every row count) rounds the activations to bf16 (relative 2^-9 each) and keeps (q − 8) exact, so per
// output |fast − ref| <= 2^-9·Σ_k |x_k·(q−8)·s| + fp32 accumulation noise;
// the test allows 2^-8·Σ_k |x_k·W_nk| + 1e-5, computed from the data.
// Fast (AVX2 + FMA, and AVX-512 "awq:avx512_fma" with the same math in zmm,
// kernels::set_float_dot forcing it) decodes w = q·s + (z − 8s) in f32 and keeps x exact: only
// fp32 rounding (z − 8s, the FMA, a different summation order) separates it
// from the reference; the test allows 2^-15·Σ_k |x_k|·(|W_nk| + |z| + 8|s|) +
// 1e-6 (a single wrong code costs |x_k·s|, far above that for these K).
// The reference ISA path runs the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "formats/awq.hpp"
#include "kernels/calibrate.hpp"
#include "kernels/cpu.hpp"
#include "mixq/linear.hpp"
#include "mixq/numeric.hpp"
#include "support/kernel_paths.hpp"
#include "support/test_support.hpp"
#include "test_format_helpers.hpp"

namespace mixq {
namespace {

struct IsaGuard {
  ~IsaGuard() {
    kernels::set_isa(kernels::best_isa());
    kernels::set_float_dot(std::nullopt);
  }
};

TEST(AwqLinear, FastMatchesReferenceOnEveryIsa) {
  IsaGuard guard;
  for (auto [n, k, g] :
       {std::tuple<int64_t, int64_t, int64_t>{40, 192, 64}, {17, 96, 32}, {64, 128, 128}, {13, 64, 64}}) {
    const std::vector<float> w = testing::random_floats(n * k, 51 + n, 0.05f);
    const std::vector<float> b = testing::random_floats(n, 52, 0.1f);
    auto l = testing::quantized_layer(formats::awq_w4a16_format(), w, n, k, {{"group_size", g}}, b);
    const std::vector<float> deq = testing::dequantized(l->layer);
    const formats::AwqTensors t = formats::awq_tensors(l->layer);
    auto ref = Linear::create(l->layer, {KernelChoice::reference});
    for (int64_t m : {1, 2, 3, 7, 16, 33, 64, 257}) {
      const std::vector<float> x = testing::random_floats(m * k, 200 + m, 1.0f);
      std::vector<float> yr(m * n), yf(m * n), yr_bf16(m * n), x_bf16(x.size());
      ref->forward(x.data(), m, yr.data());
      // The vdpbf16ps core is a linear over bf16(x): the reference over the
      // rounded x, up to f32 summation order.
      for (size_t i = 0; i < x.size(); ++i) x_bf16[i] = round_to(DType::BF16, x[i]);
      ref->forward(x_bf16.data(), m, yr_bf16.data());
      // Paths: ref, avx2, avx512 with vdpbf16ps, avx512 with the FMA core.
      for (int path = 0; path < 4; ++path) {
        const int isa = std::min(path, 2);
        const bool fma512 = path == 3;
        const char* want_kernel[] = {"awq_dequant:ref", "awq:avx2_fma", "awq:avx512_bf16", "awq:avx512_fma"};
        const bool bf16_core = path == 2;
        if (!testing::kernel_path(want_kernel[path], static_cast<kernels::Isa>(isa))) continue;
        kernels::set_isa(static_cast<kernels::Isa>(isa));
        kernels::set_float_dot(fma512 ? kernels::FloatDot::fma : kernels::FloatDot::bf16);
        auto fast = Linear::create(l->layer, {KernelChoice::automatic});
        ASSERT_EQ(fast->kernel_name(), want_kernel[path]);
        fast->forward(x.data(), m, yf.data());
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double mag = 0, mag2 = 0;
            for (int64_t c = 0; c < k; ++c) {
              const int64_t idx = (c / g) * n + j;
              mag += std::fabs(double(x[i * k + c]) * deq[j * k + c]);
              mag2 += std::fabs(double(x[i * k + c])) *
                      (std::fabs(deq[j * k + c]) + std::fabs(t.zeros[idx]) + 8 * std::fabs(t.scale[idx]));
            }
            // f32 decode and summation order: 2^-15 of the magnitude the
            // decoded terms and zero points can reach.
            const double bound = std::ldexp(mag2, -15) + 1e-6;
            const std::vector<float>& want = bf16_core ? yr_bf16 : yr;
            ASSERT_LE(std::fabs(yf[i * n + j] - want[i * n + j]), bound)
                << "n=" << n << " m=" << m << " path=" << path << " kernel " << fast->kernel_name();
            if (bf16_core) {  // and bf16(x) moves it by at most 2^-8 of the magnitude from the f32-x result
              ASSERT_LE(std::fabs(yf[i * n + j] - yr[i * n + j]), std::ldexp(mag, -8) + 1e-5);
            }
          }
      }
      kernels::set_isa(kernels::best_isa());
    }
  }
}

// Every fast path computes a row the same way whatever the number of rows in
// the call (the register tiles, the panel split over threads at few rows and
// the row split at many change only which sums run side by side): a batch
// gives each row the bits it gets alone. N = 100 is 7 panels (the 4-panel
// tiles of one or two rows, then single panels); 1 to 33 rows reach every
// tile height, the few-row and the many-row paths.
TEST(AwqLinear, RowResultsDoNotDependOnTheRowCount) {
  IsaGuard guard;
  const int64_t n = 100, k = 192, g = 64;
  const std::vector<float> w = testing::random_floats(n * k, 81, 0.05f);
  const std::vector<float> b = testing::random_floats(n, 82, 0.1f);
  auto l = testing::quantized_layer(formats::awq_w4a16_format(), w, n, k, {{"group_size", g}}, b);
  const std::vector<float> x = testing::random_floats(33 * k, 83, 1.0f);
  int paths = 0;
  for (int path = 1; path < 4; ++path) {  // avx2, avx512 with vdpbf16ps, avx512 with the FMA core
    const char* want_kernel[] = {"", "awq:avx2_fma", "awq:avx512_bf16", "awq:avx512_fma"};
    const int isa = std::min(path, 2);
    if (!testing::kernel_path(want_kernel[path], static_cast<kernels::Isa>(isa))) continue;
    kernels::set_isa(static_cast<kernels::Isa>(isa));
    kernels::set_float_dot(path == 3 ? kernels::FloatDot::fma : kernels::FloatDot::bf16);
    auto fast = Linear::create(l->layer, {KernelChoice::automatic});
    ASSERT_EQ(fast->kernel_name(), want_kernel[path]);
    ++paths;
    std::vector<float> alone(33 * n);
    for (int64_t row = 0; row < 33; ++row) fast->forward(x.data() + row * k, 1, alone.data() + row * n);
    for (int64_t m : {2, 3, 4, 5, 8, 16, 17, 33}) {
      std::vector<float> y(m * n);
      fast->forward(x.data(), m, y.data());
      for (int64_t i = 0; i < m * n; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(alone[i]))
            << want_kernel[path] << " m=" << m << " row " << i / n << " column " << i % n;
    }
  }
  if (paths == 0) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU";
}

TEST(AwqLinear, ReferenceIsTheDequantizedFloatLinear) {
  const int64_t n = 9, k = 64, m = 3;
  const std::vector<float> w = testing::random_floats(n * k, 61, 0.05f);
  const std::vector<float> b = testing::random_floats(n, 62, 0.1f);
  const std::vector<float> x = testing::random_floats(m * k, 63, 1.0f);
  auto l = testing::quantized_layer(formats::awq_w4a16_format(), w, n, k, {}, b);
  const std::vector<float> deq = testing::dequantized(l->layer);
  auto ref = Linear::create(l->layer, {KernelChoice::reference});
  std::vector<float> y(m * n);
  ref->forward(x.data(), m, y.data());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float want = 0;
      for (int64_t c = 0; c < k; ++c) want += x[i * k + c] * deq[j * k + c];
      EXPECT_EQ(y[i * n + j], want + b[j]);  // fp32 in k order, bias last
    }
}

// The fast layers keep the per-group scale and zero at the width the file
// stores them (BF16, F16 or F32), widened exactly in the kernel: the same
// values stored at any width give the same output bits, and the layer holds
// exactly the file's bytes (N a multiple of the 16-column panels: codes, both
// 16-bit or 32-bit tables, and the F32 bias).
TEST(AwqLinear, FastLayerKeepsScalesAtTheStoredWidth) {
  IsaGuard guard;
  const int64_t n = 64, k = 256, g = 64, m = 3;
  const std::vector<float> w = testing::random_floats(n * k, 71, 0.05f);
  const std::vector<float> b = testing::random_floats(n, 72, 0.1f);
  const std::vector<float> x = testing::random_floats(m * k, 73, 1.0f);
  QuantizedLayer q = formats::awq_w4a16_format().quantize(w.data(), n, k, {{"group_size", g}});
  const auto floats = [](const OwnedTensor& t) {
    TensorView v;
    v.dtype = t.dtype;
    v.shape = t.shape;
    v.data = t.data;
    return to_f32(v);
  };
  for (int isa = 1; isa <= 2; ++isa) {
    const char* want = isa == 1 ? "awq:avx2_fma" : "awq:avx512_fma";
    if (!testing::kernel_path(want, static_cast<kernels::Isa>(isa))) continue;
    kernels::set_isa(static_cast<kernels::Isa>(isa));
    kernels::set_float_dot(kernels::FloatDot::fma);
    std::vector<float> first;
    for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
      std::vector<OwnedTensor> tensors;
      for (const OwnedTensor& t : q.tensors) {
        if (t.name == "weight") {
          tensors.push_back(t);
          continue;
        }
        const std::vector<float> v = floats(t);
        tensors.push_back(OwnedTensor{t.name, dt, t.shape, from_f32(dt, v)});
        // The quantizer's BF16 values are exact at every width here.
        ASSERT_EQ(floats(tensors.back()), v) << t.name;
      }
      tensors.push_back(testing::f32_tensor("bias", {n}, b));
      nlohmann::json marker = q.marker;
      marker.erase("format");
      auto l = testing::bind_layer(formats::awq_w4a16_format(), std::move(tensors), marker);
      validate_layer(l->layer);
      auto lin = Linear::create(l->layer, {KernelChoice::automatic});
      ASSERT_EQ(lin->kernel_name(), want);
      ASSERT_TRUE(lin->packed_bytes().has_value());
      EXPECT_EQ(*lin->packed_bytes(), static_cast<int64_t>(l->layer.bytes())) << dtype_name(dt);
      std::vector<float> y(m * n);
      lin->forward(x.data(), m, y.data());
      if (first.empty()) first = y;
      else EXPECT_EQ(y, first) << dtype_name(dt) << " on " << want;
    }
  }
}

}  // namespace
}  // namespace mixq
