// The f32-FMA AWQ W4A16 kernels (kernels/x86/awq_w4a16_impl.hpp), awq_avx2
// and awq_avx512_fma, against a scalar model of their exact arithmetic, with
// zero tolerance: per (row, column), z' = fma(−8, s, z) per group, w =
// fma(q, s, z') per weight and acc = fma(x, w, acc) in k order from 0, then
// acc + bias. Every tile shape (1..16 rows and remainders, partial column
// panels, 1..4-panel tiles) and both the small-M (panel-split, prefetching)
// and large-M (row-chunk) paths must give these bits, so the two targets
// agree with each other bit for bit. The scale and zero are packed at each
// stored width (F32, F16, BF16: the kernels widen them as they load); the
// model then reads the widened values (a file with two widths: both f32).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cpu.hpp"
#include "kernels/x86/awq_w4a16.hpp"
#include "mixq/numeric.hpp"
#include "support/kernel_paths.hpp"

namespace mixq {
namespace {

struct AwqCase {
  int64_t n, k, group;
  std::vector<uint8_t> codes;  // [n, k/2], low nibble = even k
  std::vector<float> scale, zeros, bias;
};

AwqCase make_case(int64_t n, int64_t k, int64_t group, bool bias, uint32_t seed) {
  AwqCase c{n, k, group, {}, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  c.codes.resize(static_cast<size_t>(n * k / 2));
  for (uint8_t& b : c.codes) b = static_cast<uint8_t>(rng() & 0xFF);
  c.scale.resize(static_cast<size_t>(k / group * n));
  c.zeros.resize(c.scale.size());
  for (float& s : c.scale) s = 0.01f * std::fabs(normal(rng)) + 1e-3f;
  for (float& z : c.zeros) z = 0.05f * normal(rng);
  if (bias) {
    c.bias.resize(static_cast<size_t>(n));
    for (float& b : c.bias) b = normal(rng);
  }
  return c;
}

std::vector<float> model(const AwqCase& c, const std::vector<float>& x, int64_t m) {
  std::vector<float> y(static_cast<size_t>(m * c.n));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t col = 0; col < c.n; ++col) {
      float acc = 0.0f;
      for (int64_t kk = 0; kk < c.k; ++kk) {
        const int64_t g = kk / c.group;
        const float s = c.scale[g * c.n + col];
        const float zp = std::fma(-8.0f, s, c.zeros[g * c.n + col]);
        const uint8_t byte = c.codes[col * (c.k / 2) + kk / 2];
        const float q = static_cast<float>(kk % 2 == 0 ? byte & 15 : byte >> 4);
        acc = std::fma(x[r * c.k + kk], std::fma(q, s, zp), acc);
      }
      y[r * c.n + col] = c.bias.empty() ? acc : acc + c.bias[col];
    }
  return y;
}

using KernelFn = void (*)(const kernels::x86::AwqPacked&, const float*, int64_t, float*);

// c's scale / zeros rounded to `width` (bits into `h16`), so that c holds
// the values the kernel widens; the source to pack from.
kernels::FloatSource at_width(std::vector<float>& values, std::vector<uint16_t>& h16, kernels::FloatWidth width) {
  if (width == kernels::FloatWidth::f32) return kernels::FloatSource::of(values.data());
  h16.resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    h16[i] = width == kernels::FloatWidth::f16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
    values[i] = width == kernels::FloatWidth::f16 ? f16_to_f32(h16[i]) : bf16_to_f32(h16[i]);
  }
  return {width, h16.data()};
}

// scale at `width`, zeros at `zeros_width` (packed both at f32 when they differ).
void check_kernel(KernelFn fn, kernels::FloatWidth width, kernels::FloatWidth zeros_width) {
  // n: partial panels (13, 17, 40), several 4-panel tiles + remainder (100,
  // 300); group 2 (one k pair per group) to 128; K = 1152 crosses AVX2's
  // 1024-step K chunk of the decoded large-M path inside a group of 96.
  for (auto [n, k, g] : {std::tuple<int64_t, int64_t, int64_t>{40, 192, 64}, {17, 96, 32}, {64, 128, 128},
                         {13, 64, 64}, {100, 256, 2}, {300, 512, 64}, {37, 1152, 96}}) {
    for (bool bias : {false, true}) {
      AwqCase c = make_case(n, k, g, bias, static_cast<uint32_t>(n * 31 + k + g));
      std::vector<uint16_t> scale16, zeros16;
      const kernels::FloatSource scale = at_width(c.scale, scale16, width);
      const kernels::FloatSource zeros = at_width(c.zeros, zeros16, zeros_width);
      const kernels::x86::AwqPacked w = kernels::x86::awq_pack(c.codes.data(), scale, zeros, n, k, g, c.bias);
      // Held at the stored width: 2 bytes per value for F16 / BF16.
      const size_t bytes_per_value = width == kernels::FloatWidth::f32 || width != zeros_width ? 4 : 2;
      ASSERT_EQ(w.scale.bytes(), static_cast<size_t>(w.panels * 16 * (k / g)) * bytes_per_value);
      for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 33, 64, 131}) {
        std::mt19937 rng(static_cast<uint32_t>(m));
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<float> x(static_cast<size_t>(m * k));
        for (float& v : x) v = normal(rng);
        const std::vector<float> want = model(c, x, m);
        std::vector<float> got(want.size(), std::nanf(""));
        fn(w, x.data(), m, got.data());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
            << "n=" << n << " k=" << k << " group=" << g << " m=" << m << " bias=" << bias
            << " width=" << static_cast<int>(width) << "/" << static_cast<int>(zeros_width);
      }
    }
  }
}

TEST(AwqKernels, Avx2IsTheExactFmaModel) {
  if (!testing::kernel_path("awq:avx2_fma", kernels::Isa::avx2)) GTEST_SKIP() << "no AVX2 + FMA";
  for (auto width : {kernels::FloatWidth::f32, kernels::FloatWidth::f16, kernels::FloatWidth::bf16})
    check_kernel(kernels::x86::awq_avx2, width, width);
  check_kernel(kernels::x86::awq_avx2, kernels::FloatWidth::f16, kernels::FloatWidth::bf16);
}

TEST(AwqKernels, Avx512FmaIsTheExactFmaModel) {
  if (!testing::kernel_path("awq:avx512_fma", kernels::Isa::avx512)) GTEST_SKIP() << "no AVX-512";
  for (auto width : {kernels::FloatWidth::f32, kernels::FloatWidth::f16, kernels::FloatWidth::bf16})
    check_kernel(kernels::x86::awq_avx512_fma, width, width);
  check_kernel(kernels::x86::awq_avx512_fma, kernels::FloatWidth::f16, kernels::FloatWidth::bf16);
}

}  // namespace
}  // namespace mixq
