// svdquant_w4a4 linear: hand-computed numbers of the docs/FORMATS.md §3.8 formula, the
// AVX-512 VNNI kernel == the fp32 reference bit for bit (same operations in
// the same order, exact int32 group dots) on every ISA path and remainder
// (rows 1..3 of the 4-row block, odd panels, N % 16), tile-packed == natural,
// and the reference close to the float linear over the effective weight.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "formats/svdquant.hpp"
#include "kernels/cpu.hpp"
#include "kernels/ref/svdquant_ref.hpp"
#include "kernels/x86/svdquant_w4a4.hpp"
#include "mixq/linear.hpp"
#include "support/kernel_paths.hpp"
#include "support/test_support.hpp"
#include "test_format_helpers.hpp"
#include "test_format_svdquant_helpers.hpp"

namespace mixq {
namespace {

struct IsaGuard {
  ~IsaGuard() { kernels::set_isa(kernels::best_isa()); }
};

std::unique_ptr<testing::OwnedLayer> layer_of(const testing::SvdParts& p, bool act_unsigned, bool tile = false) {
  nlohmann::json params = {{"act_unsigned", act_unsigned}};
  if (tile) params["layout"] = formats::kSvdquantTileLayout;
  auto l = testing::bind_layer(formats::svdquant_w4a4_format(), testing::svd_tensors(p, tile), params);
  validate_layer(l->layer);
  return l;
}

std::vector<float> run(const Layer& layer, KernelChoice kc, const std::vector<float>& x, int64_t m) {
  auto lin = Linear::create(layer, {kc});
  std::vector<float> y(static_cast<size_t>(m * layer.out_features));
  lin->forward(x.data(), m, y.data());
  return y;
}

TEST(SvdquantLinear, HandComputedSignedAndUnsigned) {
  // K = 64, N = 4, rank 1 with proj_down = 0: x = 1, smooth = 1, scale 1.
  // Rows 2 and 3 hold the extreme codes: +7 (weight offset 15) against
  // unsigned q = 15 is the largest group sum the kernels form before the
  // offset term, 64·15·15 = 14400 (AVX2 without VNNI adds it up in i16
  // lanes of 32 products: 7200 each).
  testing::SvdParts p = testing::random_svd(4, 64, 1, 9, false);
  for (int64_t i = 0; i < 32; ++i) p.weight[i] = 0x11;       // row 0: all +1
  for (int64_t i = 32; i < 64; ++i) p.weight[i] = 0xFF;      // row 1: all -1
  for (int64_t i = 64; i < 96; ++i) p.weight[i] = 0x77;      // row 2: all +7
  for (int64_t i = 96; i < 128; ++i) p.weight[i] = 0x88;     // row 3: all -8
  p.wscale = {1.0f, 1.0f, 1.0f, 1.0f};
  p.smooth.assign(64, 1.0f);
  p.proj_down.assign(64, 0.0f);
  const std::vector<float> x(64, 1.0f);
  for (KernelChoice kc : {KernelChoice::reference, KernelChoice::automatic}) {
    // signed: q = 7 everywhere, s = 1/7: dot = ±448, y = ±448/7 = ±64.
    std::vector<float> y = run(layer_of(p, false)->layer, kc, x, 1);
    // Rows 2, 3: dot = 64·7·7 = 3136 and -64·8·7 = -3584: y = 448 and -512.
    EXPECT_NEAR(y[0], 64.0f, 1e-4f);
    EXPECT_NEAR(y[1], -64.0f, 1e-4f);
    EXPECT_NEAR(y[2], 448.0f, 1e-3f);
    EXPECT_NEAR(y[3], -512.0f, 1e-3f);
    // unsigned: x + 0.171875 = 1.171875, q = 15: dot = ±960, y = ±960·1.171875/15 = ±75.
    // Rows 2, 3: dot = 64·7·15 = 6720 and -64·8·15 = -7680: y = 525 and -600.
    y = run(layer_of(p, true)->layer, kc, x, 1);
    EXPECT_NEAR(y[0], 75.0f, 1e-4f);
    EXPECT_NEAR(y[1], -75.0f, 1e-4f);
    EXPECT_NEAR(y[2], 525.0f, 1e-3f);
    EXPECT_NEAR(y[3], -600.0f, 1e-3f);
  }
  // The low-rank branch sees the raw (unshifted) x: proj_down = 1/64, proj_up = 2 -> +2.
  p.proj_down.assign(64, 1.0f / 64);
  p.proj_up = {2.0f, 2.0f, 2.0f, 2.0f};
  const std::vector<float> y = run(layer_of(p, true)->layer, KernelChoice::reference, x, 1);
  EXPECT_NEAR(y[0], 77.0f, 1e-4f);
  EXPECT_NEAR(y[1], -73.0f, 1e-4f);
}

// A zero smoothing factor against a zero activation is 0 / 0 = NaN in the
// quantizer: its code is byte 0 (qa = -8 for signed activations) on every
// path, a defined result (a NaN float cast to an integer is undefined in C++;
// found by fuzz_layers under UBSan). The low-rank branch reads the raw x = 0,
// so the output stays finite. K = 64, N = 16, weights all +1, x = 1 but at
// k = 5: q = 7 at 63 k, -8 at k = 5: dot = 441 - 8 = 433, y = 433 / 7.
TEST(SvdquantLinear, ZeroOverZeroSmoothingIsCodeZeroOnEveryPath) {
  IsaGuard guard;
  testing::SvdParts p = testing::random_svd(16, 64, 1, 5, false);
  p.weight.assign(p.weight.size(), 0x11);
  p.wscale.assign(p.wscale.size(), 1.0f);
  p.smooth.assign(64, 1.0f);
  p.smooth[5] = 0.0f;
  p.proj_down.assign(64, 0.0f);
  auto l = layer_of(p, false);
  for (int64_t m : {1, 2, 17, 130}) {
    std::vector<float> x(static_cast<size_t>(m * 64), 1.0f);
    for (int64_t r = 0; r < m; ++r) x[r * 64 + 5] = 0.0f;
    const std::vector<float> ref = run(l->layer, KernelChoice::reference, x, m);
    for (float v : ref) ASSERT_NEAR(v, 433.0f / 7.0f, 1e-4f) << "m=" << m;
    for (int isa = 0; isa <= static_cast<int>(kernels::Isa::amx); ++isa) {
      const auto level = static_cast<kernels::Isa>(isa);
      if (!testing::kernel_path("svdquant:" + std::string(kernels::isa_name(level)), level)) continue;
      kernels::set_isa(level);
      const std::vector<float> fast = run(l->layer, KernelChoice::automatic, x, m);
      for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(fast[i], ref[i]) << "m=" << m << " isa=" << isa;
    }
    kernels::set_isa(kernels::best_isa());
  }
}

TEST(SvdquantLinear, FastEqualsReferenceOnEveryIsa) {
  IsaGuard guard;
  struct Case {
    int64_t n, k, rank;
    bool bias;
  };
  // Ranks below, at and across the fast kernel's 32-rank passes; 100
  // columns: 7 panels, whole AVX-512 register blocks of 2 and a single one;
  // 60 and 140 columns: AVX2's one-row block of 4 panels ending in a partial
  // panel, and (9 panels) two such blocks and a single one. K = 1088: 17
  // groups, which the activation quantizer takes 16 (AVX2: 8) at a time.
  for (const Case c : {Case{40, 128, 8, true}, Case{16, 64, 1, false}, Case{35, 192, 3, true}, Case{48, 256, 40, true},
                       Case{17, 64, 32, false}, Case{100, 128, 8, true}, Case{60, 128, 8, true},
                       Case{140, 64, 4, true}, Case{17, 1088, 4, false}}) {
    const testing::SvdParts p = testing::random_svd(c.n, c.k, c.rank, 70 + c.n, c.bias);
    for (bool act_unsigned : {false, true}) {
      auto l = layer_of(p, act_unsigned);
      // 399 rows: chunks of 100 rows, each group of panels unpacked first
      // (SvdquantTile::kUnpackMinRows), the last chunk ending in 3 rows.
      for (int64_t m : {1, 2, 3, 7, 16, 33, 64, 257, 399}) {
        std::vector<float> x = testing::random_floats(m * c.k, 300 + m, 1.0f);
        if (act_unsigned)  // post-GELU-like: >= -0.17
          for (float& v : x) v = std::max(v, -0.17f);
        const std::vector<float> ref = run(l->layer, KernelChoice::reference, x, m);
        for (int isa = 0; isa <= static_cast<int>(kernels::Isa::amx); ++isa) {  // amx: m > 16 on AMX tiles
          const auto level = static_cast<kernels::Isa>(isa);
          if (!testing::kernel_path("svdquant:" + std::string(kernels::isa_name(level)), level)) continue;
          kernels::set_isa(level);
          const std::vector<float> fast = run(l->layer, KernelChoice::automatic, x, m);
          for (size_t i = 0; i < ref.size(); ++i)
            ASSERT_EQ(fast[i], ref[i]) << "n=" << c.n << " m=" << m << " unsigned=" << act_unsigned << " isa=" << isa;
        }
        kernels::set_isa(kernels::best_isa());
      }
    }
  }
}

TEST(SvdquantLinear, TilePackedEqualsNatural) {
  const testing::SvdParts p = testing::random_svd(128, 128, 4, 80);
  const std::vector<float> x = testing::random_floats(5 * 128, 81, 1.0f);
  for (KernelChoice kc : {KernelChoice::reference, KernelChoice::automatic})
    EXPECT_EQ(run(layer_of(p, false, true)->layer, kc, x, 5), run(layer_of(p, false)->layer, kc, x, 5));
}

// The fast layers keep the group scales, both low-rank factors and the
// smooth factor at the stored width (F16, BF16, F32; widened exactly in the
// kernel): bit-identical to the reference at every width and layout, and the
// layer holds exactly the file's bytes, the bias widened to F32 (N a multiple
// of the 16-column panels, rank of the 32-rank passes; no per-column term).
// 5 tokens run the vector blocks, 33 the AMX one where the CPU has it.
TEST(SvdquantLinear, FastLayerKeepsFloatsAtTheStoredWidth) {
  IsaGuard guard;
  const testing::SvdParts p = testing::random_svd(128, 192, 32, 85);
  for (const int64_t m : {5, 33})
  for (DType dt : {DType::BF16, DType::F16, DType::F32})
    for (bool tile : {false, true}) {
      std::vector<float> x = testing::random_floats(m * p.k, 86, 1.0f);
      auto l = testing::bind_layer(formats::svdquant_w4a4_format(), testing::svd_tensors(p, tile, false, dt),
                                   {{"act_unsigned", false}});
      validate_layer(l->layer);
      const std::vector<float> ref = run(l->layer, KernelChoice::reference, x, m);
      for (int isa = 1; isa <= static_cast<int>(kernels::Isa::amx); ++isa) {
        const auto level = static_cast<kernels::Isa>(isa);
        if (!testing::kernel_path("svdquant:" + std::string(kernels::isa_name(level)), level)) continue;
        kernels::set_isa(level);
        auto lin = Linear::create(l->layer, {KernelChoice::automatic});
        std::vector<float> y(static_cast<size_t>(m * p.n));
        lin->forward(x.data(), m, y.data());
        EXPECT_EQ(y, ref) << dtype_name(dt) << " m=" << m << " tile=" << tile << " " << lin->kernel_name();
        ASSERT_TRUE(lin->packed_bytes().has_value());
        const int64_t widened_bias = p.n * (4 - static_cast<int64_t>(dtype_size(dt)));
        EXPECT_EQ(*lin->packed_bytes(), static_cast<int64_t>(l->layer.bytes()) + widened_bias)
            << dtype_name(dt) << " tile=" << tile << " " << lin->kernel_name();
      }
      kernels::set_isa(kernels::best_isa());
    }
}

TEST(SvdquantLinear, CloseToTheEffectiveWeightLinear) {
  // Signed activations, per-64 int4 (absmax/7): measured rel. L2 error ~8 %.
  const testing::SvdParts p = testing::random_svd(48, 256, 8, 90, false);
  auto l = layer_of(p, false);
  const std::vector<float> w = testing::dequantized(l->layer);
  const int64_t m = 6;
  const std::vector<float> x = testing::random_floats(m * 256, 91, 1.0f);
  const std::vector<float> y = run(l->layer, KernelChoice::reference, x, m);
  double num = 0, den = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < 48; ++j) {
      double ref = 0;
      for (int64_t c = 0; c < 256; ++c) ref += double(x[i * 256 + c]) * w[j * 256 + c];
      num += (ref - y[i * 48 + j]) * (ref - y[i * 48 + j]);
      den += ref * ref;
    }
  EXPECT_LT(std::sqrt(num / den), 0.2);
  EXPECT_GT(std::sqrt(num / den), 1e-4);  // int4 activations really are quantized
}

// The AVX2 kernel's vpmaddubsw branch (CPUs with AVX2 but no AVX-VNNI) runs
// only when forced here: it must equal the reference bit for bit as well.
TEST(SvdquantLinear, Avx2WithoutVnniEqualsReference) {
  MIXQ_KERNEL_PATH_OR_SKIP("svdquant:avx2_vpmaddubsw", kernels::Isa::avx2,
                           testing::missing_isa(kernels::Isa::avx2));
  std::mt19937 rng(91);
  std::uniform_int_distribution<int> byte(0, 255);
  for (bool act_unsigned : {false, true}) {
    kernels::SvdquantWeights w;
    w.n = 21;
    w.k = 128;
    w.rank = 5;
    w.act_unsigned = act_unsigned;
    w.weight.resize(static_cast<size_t>(w.n * w.k / 2));
    for (uint8_t& b : w.weight) b = static_cast<uint8_t>(byte(rng));
    w.wscale = testing::random_floats(w.k / 64 * w.n, 92, 0.01f);
    w.smooth = testing::random_floats(w.k, 93, 0.1f);
    for (float& v : w.smooth) v += 1.0f;
    w.proj_down = testing::random_floats(w.k * w.rank, 94, 0.05f);
    w.proj_up_t = testing::random_floats(w.rank * w.n, 95, 0.05f);
    w.bias = testing::random_floats(w.n, 96, 0.1f);
    const kernels::x86::SvdquantPacked packed = kernels::x86::svdquant_pack(w);
    for (int64_t m : {1, 2, 3, 7, 33}) {
      std::vector<float> x = testing::random_floats(m * w.k, 97 + m, 1.0f);
      if (act_unsigned)
        for (float& v : x) v = std::max(v, -0.17f);
      std::vector<float> ref(static_cast<size_t>(m * w.n)), fast(ref.size());
      kernels::svdquant_ref(w, x.data(), m, ref.data());
      kernels::x86::svdquant_avx2(packed, x.data(), m, fast.data(), false);
      ASSERT_EQ(fast, ref) << "m=" << m << " unsigned=" << act_unsigned;
    }
  }
}

}  // namespace
}  // namespace mixq
