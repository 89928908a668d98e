// Integer kernels: every fast path against the reference on random data.
//
// Tolerance: zero. Rotation runs the same radix-4 operations in the same
// order (so the rotated activations are bit-identical), the quantizers make
// the same fp32 divisions and round half-to-even, the int32 dot product is
// exact in any order (|acc| < 2^31 by the K limit), and the epilogue performs
// the same fp32 multiplications/additions in the same order without FMA
// (int_kernel.hpp). Any difference is a bug, so the comparison is bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu.hpp"
#include "kernels/hadamard_fast.hpp"
#include "kernels/int_kernel.hpp"
#include "mixq/error.hpp"
#include "numeric/hadamard.hpp"
#include "mixq/linear.hpp"
#include "support/kernel_paths.hpp"

namespace {

using namespace mixq::kernels;

struct Case {
  int64_t m, k, n, group;
  ActQuant act;
  Epilogue epi;
  bool int4;
  bool bias;
  bool extreme = false;  // every weight +7 (int4) or 127, rows of +1 and -1: the largest |dots|
};

std::vector<float> random_x(int64_t m, int64_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = nd(rng);
  // Awkward rows: all zero, one huge outlier, exact ties after scaling.
  if (m > 1) std::fill(x.begin() + k, x.begin() + 2 * k, 0.0f);
  if (m > 2) x[static_cast<size_t>(2 * k)] = 1e6f;
  if (m > 3)
    for (int64_t i = 0; i < k; ++i) x[static_cast<size_t>(3 * k + i)] = static_cast<float>(i % 9) - 4.0f;
  // Q8row ties that only the division finds: amax 381 makes s = 3 exactly,
  // so x = 3·(j + 0.5) divides to j + 0.5 exactly (ties even), while a
  // multiply by fl(1/3) would land just above it.
  if (m > 4) {
    for (int64_t i = 0; i < k; ++i) x[static_cast<size_t>(4 * k + i)] = 3.0f * (static_cast<float>(i % 254) - 126.5f);
    x[static_cast<size_t>(4 * k)] = 381.0f;
  }
  return x;
}

std::vector<float> run_kernel(IntKernel& kernel, const std::vector<float>& x, int64_t m, int64_t n) {
  std::vector<float> y(static_cast<size_t>(m * n), -12345.0f);
  kernel.forward(x.data(), m, y.data());
  return y;
}

void check_case(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int8_t> w(static_cast<size_t>(c.n * c.k));
  std::uniform_int_distribution<int> wd(c.int4 ? -8 : -128, c.int4 ? 7 : 127);
  for (int8_t& v : w) v = c.extreme ? static_cast<int8_t>(c.int4 ? 7 : 127) : static_cast<int8_t>(wd(rng));
  std::uniform_real_distribution<float> sd(1e-3f, 2e-2f);
  std::vector<float> scale(static_cast<size_t>(c.n)), bias(static_cast<size_t>(c.n));
  for (float& v : scale) v = sd(rng);
  for (float& v : bias) v = sd(rng) - 0.01f;
  IntLayerDesc d;
  d.n = c.n;
  d.k = c.k;
  d.group = c.group;
  d.act = c.act;
  d.epilogue = c.epi;
  d.int4_weights = c.int4;
  d.weight = w.data();
  d.weight_scale = scale.data();
  d.bias = c.bias ? bias.data() : nullptr;
  auto x = random_x(c.m, c.k, seed + 1);
  if (c.extreme)
    for (size_t i = 0; i < x.size(); ++i) x[i] = i / c.k % 2 == 0 ? 1.0f : -1.0f;
  auto ref = make_int_kernel_ref(d);
  const auto want = run_kernel(*ref, x, c.m, c.n);
  for (float v : want) ASSERT_TRUE(std::isfinite(v));
  // Every fast path this CPU can run: AMX tiles (M > 24), AVX-512 VNNI, AVX2 (+AVX-VNNI when the
  // CPU has it), and AVX2 without VNNI (vpmaddubsw emulation); int8 weights
  // both packed and read in place (row-major GEMV for M <= 24, per-tile
  // transpose above).
  std::vector<std::unique_ptr<IntKernel>> fast_kernels;
  using mixq::testing::kernel_path;
  // int4 weights as the file stores them (nibbles, low = even k), so that
  // they can be read in place too.
  std::vector<uint8_t> nibbles;
  if (c.int4 && c.k % 8 == 0) {
    nibbles.assign(static_cast<size_t>(c.n * c.k / 2), 0);
    for (size_t i = 0; i < w.size(); ++i) nibbles[i / 2] |= static_cast<uint8_t>((w[i] & 0xF) << (4 * (i % 2)));
  }
  for (bool in_place : {false, true}) {
    if (in_place && c.int4 && nibbles.empty()) break;
    d.weight_in_place = in_place;
    if (in_place && c.int4) {
      d.weight = nullptr;
      d.weight_nibbles = nibbles.data();
    }
    if (kernel_path("int_gemm:avx512_amx", Isa::amx)) fast_kernels.push_back(make_int_kernel_amx(d));
    if (kernel_path("int_gemm:avx512_vnni", Isa::avx512)) fast_kernels.push_back(make_int_kernel_avx512(d));
    if (kernel_path("int_gemm:avx2_vpmaddubsw", Isa::avx2)) {
      fast_kernels.push_back(make_int_kernel_avx2(d));  // AVX-VNNI when the CPU has it
      fast_kernels.push_back(make_int_kernel_avx2_novnni(d));
      kernel_path("int_gemm:avx2_vnni", Isa::avx2, cpu_has_avx_vnni() ? "" : "AVX-VNNI");
    }
  }
  int in_place = 0;
  for (auto& fast : fast_kernels) in_place += fast && fast->reads_weight_in_place();
  const bool rows_in_place = !c.int4 || !nibbles.empty();
  EXPECT_EQ(in_place, rows_in_place ? static_cast<int>(fast_kernels.size()) / 2 : 0) << "rows are read in place";
  for (auto& fast : fast_kernels) {
    ASSERT_TRUE(fast);
    const auto got = run_kernel(*fast, x, c.m, c.n);
    for (size_t i = 0; i < got.size(); ++i) {
      uint32_t a, b;
      std::memcpy(&a, &got[i], 4);
      std::memcpy(&b, &want[i], 4);
      ASSERT_EQ(a, b) << fast->name() << (fast->reads_weight_in_place() ? " (in place)" : "") << " m=" << c.m << " k=" << c.k << " n=" << c.n
                      << " g=" << c.group << " int4=" << c.int4 << " at row " << i / c.n
                      << " col " << i % c.n << ": " << got[i] << " vs " << want[i];
    }
  }
}

// AVX-512: the in-place int8 GEMV up to 6 tokens, the panel split up to 48.
const int64_t kMs[] = {1, 2, 3, 5, 6, 7, 16, 24, 25, 33, 48, 49, 64, 257};

TEST(IntKernels, Int8TensorwiseAndRowwiseNoRotation) {
  uint64_t seed = 1;
  for (int64_t m : kMs)
    for (auto [k, n] : {std::pair<int64_t, int64_t>{37, 19}, {64, 64}, {100, 70}, {20, 129}, {200, 33}})
      check_case({m, k, n, 0, ActQuant::q8row, Epilogue::scale_product, false, m % 2 == 1}, seed++);
}

TEST(IntKernels, Int8ConvRot) {
  uint64_t seed = 100;
  for (int64_t g : {16, 64, 256})
    for (int64_t m : kMs)
      for (int64_t n : {17, 80})
        check_case({m, g == 256 ? 256 : 3 * g, n, g, ActQuant::q8row, Epilogue::scale_product,
                    false, true},
                   seed++);
}

TEST(IntKernels, W4A4Int4AndInt8Activations) {
  uint64_t seed = 200;
  for (ActQuant act : {ActQuant::q4row, ActQuant::q8row})
    for (int64_t g : {16, 64})
      for (int64_t m : kMs)
        for (int64_t n : {5, 64, 100})
          check_case({m, 2 * g + (g == 16 ? 16 : 0), n, g, act, Epilogue::sequential, true, n != 64},
                     seed++);
  // Rows of 288 bytes: whole 64-byte steps and a tail in the in-place GEMV.
  for (ActQuant act : {ActQuant::q4row, ActQuant::q8row})
    for (int64_t m : kMs) check_case({m, 576, 70, 64, act, Epilogue::sequential, true, true}, seed++);
}

// The largest dots the kernels form: int4 weights +7 (offset 15) against
// activations ±7 (int4) or ±127 (int8) at every k. Without VNNI the products
// add up in i16 over kI16Octets octets (int_micro_impl.hpp) before widening,
// 4 products per i16 lane and octet: 64 · 4 · 15 · 7 = 26880 and
// 4 · 4 · 15 · 127 = 30480, within int16; a longer chain would wrap here.
// The GEMV on in-place rows (M <= 24) gives a lane 8 products per 64-byte
// step: 32 steps against int4 activations, so K = 8192 (64 steps) is needed
// to see a chain twice as long wrap. Int8 weights 127 against ±127 check
// the other end: the |w| · x·sign(w) pairs (2·127·127) fit int16 unsummed.
TEST(IntKernels, ExtremeCodesGiveExactSums) {
  uint64_t seed = 300;
  for (int64_t m : {1, 7, 33, 64})
    for (ActQuant act : {ActQuant::q4row, ActQuant::q8row})  // no rotation: it would spread the ±1 rows
      check_case({m, 8192, 40, 0, act, Epilogue::sequential, true, false, true}, seed++);
  for (int64_t m : {1, 33})
    check_case({m, 8192, 40, 0, ActQuant::q8row, Epilogue::scale_product, false, false, true}, seed++);
}

// Past IntTile::kKChunk (3072) k, many rows run K in chunks whose int32 sums
// add exactly: the reference's bits for int8 and int4 weights (both int4
// modes), packed and in place, with a last chunk shorter than the others.
TEST(IntKernels, LongKRunsInChunksWithTheSameBits) {
  uint64_t seed = 400;
  for (int64_t m : {25, 64, 130}) {
    check_case({m, 6500, 40, 0, ActQuant::q8row, Epilogue::scale_product, false, true}, seed++);
    check_case({m, 6464, 40, 64, ActQuant::q8row, Epilogue::scale_product, false, true}, seed++);
    for (ActQuant act : {ActQuant::q4row, ActQuant::q8row})
      check_case({m, 6464, 40, 64, act, Epilogue::sequential, true, true}, seed++);
  }
}

TEST(IntKernels, SingleThreadAndManyThreadsAgree) {
  for (int threads : {1, 2, 3}) {
    mixq::set_num_threads(threads);
    check_case({70, 128, 200, 64, ActQuant::q8row, Epilogue::scale_product, false, true}, 300 + threads);
    check_case({5, 128, 200, 64, ActQuant::q4row, Epilogue::sequential, true, true}, 310 + threads);
  }
  mixq::set_num_threads(0);
}

TEST(IntKernels, DispatchFollowsTheActiveIsa) {
  std::vector<int8_t> w(16 * 32, 1);
  std::vector<float> s(16, 0.5f);
  IntLayerDesc d;
  d.n = 16;
  d.k = 32;
  d.weight = w.data();
  d.weight_scale = s.data();
  EXPECT_EQ(make_int_kernel(d, Isa::reference)->name(), "ref");
  set_isa(Isa::reference);
  EXPECT_EQ(make_int_kernel(d, active_isa())->name(), "ref");
  if (mixq::testing::kernel_path("int_dispatch:avx2", Isa::avx2)) {
    set_isa(Isa::avx2);
    EXPECT_EQ(make_int_kernel(d, active_isa())->name().substr(0, 4), "avx2");
  }
  if (mixq::testing::kernel_path("int_dispatch:avx512", Isa::avx512)) {
    set_isa(Isa::avx512);
    EXPECT_EQ(make_int_kernel(d, active_isa())->name(), "avx512_vnni");
  }
  if (mixq::testing::kernel_path("int_dispatch:amx", Isa::amx)) {
    set_isa(Isa::amx);
    EXPECT_EQ(make_int_kernel(d, active_isa())->name(), "avx512_amx");
  }
  set_isa(best_isa());
}

TEST(IntKernels, RejectsBadDescriptions) {
  std::vector<int8_t> w(64);
  std::vector<float> s(4, 1.0f);
  IntLayerDesc d;
  d.n = 4;
  d.k = 16;
  d.weight = w.data();
  d.weight_scale = s.data();
  d.group = 12;  // not a power of 4
  EXPECT_THROW(make_int_kernel(d, active_isa()), mixq::Error);
  d.group = 64;  // does not divide K
  EXPECT_THROW(make_int_kernel(d, Isa::reference), mixq::Error);
  d.group = 0;
  d.k = kMaxIntK + 1;
  EXPECT_THROW(make_int_kernel(d, active_isa()), mixq::Error);
}

TEST(Hadamard, FastEqualsNumericTransformBitForBit) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int64_t g : {4, 16, 64, 256, 1024}) {
    for (int64_t k : {g, 3 * g, g == 4 ? int64_t(20) : 2 * g}) {
      std::vector<float> x(static_cast<size_t>(k));
      for (float& v : x) v = nd(rng);
      std::vector<float> want = x;
      mixq::hadamard_rotate(want.data(), 1, k, g);
      std::vector<float> scalar = x;
      mixq::hadamard_rotate_row(scalar.data(), k, g);
      EXPECT_EQ(0, std::memcmp(scalar.data(), want.data(), x.size() * 4)) << "scalar g=" << g;
      // In place, and from x to another row (the source left as it was).
      auto check = [&](const char* isa, auto row_fn) {
        std::vector<float> fast = x, out(x.size(), -1.0f);
        row_fn(fast.data(), fast.data(), k, g);
        EXPECT_EQ(0, std::memcmp(fast.data(), want.data(), x.size() * 4)) << isa << " g=" << g << " k=" << k;
        row_fn(x.data(), out.data(), k, g);
        EXPECT_EQ(0, std::memcmp(out.data(), want.data(), x.size() * 4)) << isa << " out of place g=" << g;
      };
      const std::vector<float> before = x;
      if (mixq::testing::kernel_path("hadamard:avx2", Isa::avx2)) check("avx2", hadamard_row_avx2);
      if (mixq::testing::kernel_path("hadamard:avx512", Isa::avx512)) check("avx512", hadamard_row_avx512);
      EXPECT_EQ(before, x);
    }
  }
}

TEST(Hadamard, FastMatchesDenseMatrixWithinRounding) {
  // Against x·H_G from the explicit matrix: equal in real arithmetic, so only
  // fp32 rounding separates them (a few ulps of the row's magnitude).
  std::mt19937_64 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t g : {16, 64, 256}) {
    const auto h = mixq::hadamard_matrix(g);
    std::vector<float> x(static_cast<size_t>(g));
    for (float& v : x) v = nd(rng);
    std::vector<float> fast = x;
    if (best_isa() >= Isa::avx512) hadamard_row_avx512(fast.data(), fast.data(), g, g);
    else mixq::hadamard_rotate_row(fast.data(), g, g);
    for (int64_t j = 0; j < g; ++j) {
      double want = 0;
      for (int64_t i = 0; i < g; ++i) want += double(x[static_cast<size_t>(i)]) * h[static_cast<size_t>(i * g + j)];
      EXPECT_NEAR(fast[static_cast<size_t>(j)], want, 1e-5) << "g=" << g << " j=" << j;
    }
  }
}

}  // namespace
