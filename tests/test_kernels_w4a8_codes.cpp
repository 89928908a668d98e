// The integer kernels' in-kernel decode of asym_w4a8_int8's 4-bit codes
// (kernels::IntCodes): the fast kernels keep the codes and s_rel at their
// stored width and decode a tile at a time (a 16-entry table per column and
// group, vpshufb over the nibbles). The int8 values they multiply must be the
// docs/FORMATS.md §3.7 decode, clamp(rint(level · s_rel), -127, 127), bit for
// bit (formats::w4a8_decode_code is the oracle), and the GEMM must then equal
// the reference kernel's and the fast kernel's over the decoded int8 weight.
// Tolerance: zero everywhere (integer values; the GEMM is bit-exact by the
// integer family's contract, int_kernel.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "formats/w4a8.hpp"
#include "kernels/cpu.hpp"
#include "kernels/int_kernel.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/threads.hpp"
#include "support/kernel_paths.hpp"

namespace {

using namespace mixq::kernels;

// A random layer of codes: n rows, k columns, group size gs.
struct CodeLayer {
  int64_t n, k, gs;
  bool e4m3, codebook;
  std::vector<uint8_t> codes;  // [n, k/2]
  std::vector<uint8_t> s_rel_bytes;
  std::vector<float> s_rel_f32;
  std::vector<float> scale, bias;
  IntCodes ic;

  float s_rel(int64_t row, int64_t g) const {
    const size_t i = static_cast<size_t>(row * (k / gs) + g);
    return e4m3 ? mixq::e4m3_to_f32(s_rel_bytes[i]) : s_rel_f32[i];
  }
  uint8_t code(int64_t row, int64_t col) const {
    const uint8_t b = codes[static_cast<size_t>((row * k + col) / 2)];
    return col % 2 == 0 ? b & 0xF : b >> 4;
  }
  // The §3.7 decode through the format's own function.
  std::vector<int8_t> want() const {
    std::vector<int8_t> w(static_cast<size_t>(n * k));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c)
        w[static_cast<size_t>(r * k + c)] = mixq::formats::w4a8_decode_code(
            code(r, c), s_rel(r, c / gs), codebook ? mixq::formats::kW4a8LloydMax : nullptr);
    return w;
  }
  IntLayerDesc desc(int64_t group) const {
    IntLayerDesc d;
    d.n = n;
    d.k = k;
    d.group = group;
    d.codes = &ic;
    d.weight_scale = scale.data();
    d.bias = bias.data();
    return d;
  }
};

// The finite E4M3 bytes (0x7F and 0xFF are NaN).
std::vector<uint8_t> finite_e4m3() {
  std::vector<uint8_t> v;
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7F) != 0x7F) v.push_back(static_cast<uint8_t>(b));
  return v;
}

// Codes: even rows run through all 16 codes along k (every group of 16 sees
// each code), odd rows are random. s_rel: E4M3 cycles through every finite
// byte (the §3.7 examples 2.5, 4, 448, 96 among them), f32 mixes ties
// (k + 0.5 after the product), huge values (clamp, and inf products), zero,
// negatives and random values.
CodeLayer make_layer(int64_t n, int64_t k, int64_t gs, bool e4m3, bool codebook, uint64_t seed) {
  std::mt19937_64 rng(seed);
  CodeLayer L{n, k, gs, e4m3, codebook, {}, {}, {}, {}, {}, {}};
  L.codes.resize(static_cast<size_t>(n * k / 2));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; c += 2) {
      const int lo = r % 2 == 0 ? static_cast<int>((c + r) % 16) : static_cast<int>(rng() % 16);
      const int hi = r % 2 == 0 ? static_cast<int>((c + 1 + r) % 16) : static_cast<int>(rng() % 16);
      L.codes[static_cast<size_t>((r * k + c) / 2)] = static_cast<uint8_t>(lo | (hi << 4));
    }
  const int64_t count = n * (k / gs);
  if (e4m3) {
    const std::vector<uint8_t> bytes = finite_e4m3();
    const size_t start = static_cast<size_t>(rng() % bytes.size());
    for (int64_t i = 0; i < count; ++i) L.s_rel_bytes.push_back(bytes[(start + static_cast<size_t>(i)) % bytes.size()]);
  } else {
    const float special[] = {2.5f, 4.0f, 448.0f, 96.0f, 0.5f, 1.5f, 0.0f, -0.0f, -3.5f, 1e30f, 3e38f, 127.5f / 7.0f, 1e-40f};
    std::uniform_real_distribution<float> ud(0.0f, 20.0f);
    for (int64_t i = 0; i < count; ++i)
      L.s_rel_f32.push_back(i % 3 == 0 ? special[(i / 3) % std::size(special)] : ud(rng));
  }
  for (int c = 0; c < 16; ++c) L.ic.levels[c] = codebook ? mixq::formats::kW4a8LloydMax[c] : static_cast<float>(c - 8);
  L.ic.codes = L.codes.data();
  L.ic.s_rel_e4m3 = e4m3 ? L.s_rel_bytes.data() : nullptr;
  L.ic.s_rel_f32 = e4m3 ? nullptr : static_cast<const void*>(L.s_rel_f32.data());
  L.ic.group_size = gs;
  std::uniform_real_distribution<float> sd(1e-4f, 2e-3f);
  for (int64_t i = 0; i < n; ++i) {
    L.scale.push_back(sd(rng));
    L.bias.push_back(sd(rng) - 1e-3f);
  }
  return L;
}

// Every E4M3 scale made positive (sign bit cleared; the NaN 0x7F becomes 0x7E).
void make_positive(CodeLayer& L) {
  for (uint8_t& b : L.s_rel_bytes) b = (b & 0x7F) == 0x7F ? 0x7E : b & 0x7F;
}

// Group sizes the format allows (>= 4, divides or is a multiple of 16).
const int64_t kGroupSizes[] = {4, 8, 16, 32, 48, 64};

TEST(W4a8Codes, InKernelDecodeIsTheFormatDecode) {
  const bool avx2 = mixq::testing::kernel_path("int_gemm_codes:avx2", Isa::avx2);
  const bool avx512 = mixq::testing::kernel_path("int_gemm_codes:avx512_vnni", Isa::avx512);
  uint64_t seed = 1;
  for (int64_t gs : kGroupSizes)
    for (bool e4m3 : {true, false})
      for (bool codebook : {true, false}) {
        // n = 37: three panels and a partial one; 64 groups of gs per row at
        // most, so the E4M3 rows cover all 254 finite bytes.
        CodeLayer L = make_layer(37, 8 * gs, gs, e4m3, codebook, seed++);
        if (e4m3 && codebook) make_positive(L);  // both table addressings of the AVX2 k blocks
        const std::vector<int8_t> want = L.want();
        const IntLayerDesc d = L.desc(0);
        std::vector<std::pair<const char*, std::vector<int8_t>>> got;
        std::vector<int8_t> ref(want.size());
        for (int64_t r = 0; r < L.n; ++r)
          for (int64_t c = 0; c < L.k; ++c) ref[static_cast<size_t>(r * L.k + c)] = static_cast<int8_t>(int_desc_weight(d, r, c));
        got.emplace_back("ref", ref);
        if (avx2) got.emplace_back("avx2", int_kernel_weights_avx2(d));
        if (avx512) got.emplace_back("avx512", int_kernel_weights_avx512(d));
        for (const auto& [name, w] : got)
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_EQ(w[i], want[i]) << name << " gs=" << gs << " e4m3=" << e4m3 << " codebook=" << codebook
                                     << " row " << i / L.k << " col " << i % L.k << " code "
                                     << int(L.code(i / L.k, i % L.k)) << " s_rel "
                                     << L.s_rel(i / L.k, (i % L.k) / gs);
      }
}

// The §3.7 examples, decoded in the kernel: one row per example scale, every
// code; the expected values are the ones docs/FORMATS.md §3.7 lists.
TEST(W4a8Codes, FormatExamplesDecodeInTheKernel) {
  struct Example {
    uint8_t s_rel;  // E4M3 byte
    bool codebook;
    std::vector<std::pair<int, int>> code_value;
  };
  const Example examples[] = {
      {0x42, false, {{9, 2}, {11, 8}, {7, -2}, {13, 12}}},  // 2.5: ties to even
      {0x48, false, {{0, -32}, {15, 28}}},                  // 4
      {0x7E, false, {{0, -127}, {15, 127}}},                // 448: clamped
      {0x6C, true, {{0, -94}, {15, 94}, {8, 5}, {7, -5}}},  // 96 with the fixed codebook
  };
  for (const Example& e : examples)
    for (int64_t gs : {int64_t{16}, int64_t{32}}) {
      CodeLayer L = make_layer(16, 64, gs, true, e.codebook, 9);
      for (int64_t r = 0; r < L.n; ++r)
        for (int64_t c = 0; c < L.k; c += 2)
          L.codes[static_cast<size_t>((r * L.k + c) / 2)] = static_cast<uint8_t>((c % 16) | (((c + 1) % 16) << 4));
      std::fill(L.s_rel_bytes.begin(), L.s_rel_bytes.end(), e.s_rel);
      const IntLayerDesc d = L.desc(0);
      std::vector<std::pair<const char*, std::vector<int8_t>>> got;
      if (mixq::testing::kernel_path("int_gemm_codes:avx2", Isa::avx2)) got.emplace_back("avx2", int_kernel_weights_avx2(d));
      if (mixq::testing::kernel_path("int_gemm_codes:avx512_vnni", Isa::avx512))
        got.emplace_back("avx512", int_kernel_weights_avx512(d));
      for (const auto& [name, w] : got)
        for (auto [code, value] : e.code_value)
          for (int64_t r = 0; r < L.n; ++r)
            for (int64_t c = code; c < L.k; c += 16)
              ASSERT_EQ(w[static_cast<size_t>(r * L.k + c)], value)
                  << name << " s_rel byte " << int(e.s_rel) << " code " << code << " gs=" << gs;
    }
}

std::vector<float> random_x(int64_t m, int64_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = nd(rng);
  if (m > 1) std::fill(x.begin() + k, x.begin() + 2 * k, 0.0f);  // an all-zero row
  if (m > 2) x[static_cast<size_t>(2 * k)] = 1e6f;                // an outlier
  return x;
}

std::vector<float> run(const IntKernel& kernel, const std::vector<float>& x, int64_t m, int64_t n) {
  std::vector<float> y(static_cast<size_t>(m * n), -12345.0f);
  kernel.forward(x.data(), m, y.data());
  return y;
}

// The GEMM over codes equals, bit for bit, the reference kernel over the
// codes and every fast kernel over the decoded int8 weight (the path this
// replaced), on the small-M (up to 6 tokens looked up in registers, then
// decoded once per call) and large-M (decode per activation block)
// schedules; past IntTile::kKChunk (3072) k, large M in K chunks.
TEST(W4a8Codes, GemmOverCodesEqualsGemmOverDecodedWeights) {
  const bool avx2 = mixq::testing::kernel_path("int_gemm_codes:avx2", Isa::avx2);
  const bool avx512 = mixq::testing::kernel_path("int_gemm_codes:avx512_vnni", Isa::avx512);
  const bool amx = mixq::testing::kernel_path("int_gemm_codes:avx512_amx", Isa::amx);
  uint64_t seed = 100;
  struct Case { int64_t gs; bool e4m3; int64_t m, k; };
  std::vector<Case> cases;
  // Up to 6 tokens the codes are looked up in registers (group_size % 8 ==
  // 0), from 7 through a decoded tile.
  for (int64_t gs : {int64_t{4}, int64_t{8}, int64_t{16}, int64_t{32}, int64_t{64}})
    for (bool e4m3 : {true, false})
      for (int64_t m : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{6}, int64_t{7},
                        int64_t{30}, int64_t{257}})
        cases.push_back({gs, e4m3, m, 4 * 64});
  for (int64_t m : {int64_t{30}, int64_t{130}}) cases.push_back({16, true, m, 53 * 64});
  // The AVX2 kernels hold codes in 32-k blocks where K % 32 == 0 and 16
  // divides the group size (k = 256 and 3392 above); K = 272 keeps the
  // step layout, gs = 48 puts a group boundary inside a block.
  for (int64_t m : {int64_t{1}, int64_t{6}, int64_t{7}}) {
    cases.push_back({16, true, m, 272});
    cases.push_back({48, true, m, 384});
    cases.push_back({48, false, m, 384});
  }
  for (const auto& [gs, e4m3, m, k] : cases) {
    const bool codebook = (seed % 2) == 0;
    const int64_t group = gs == 64 ? 64 : 16;  // the ConvRot group (a power of 4 dividing K)
    CodeLayer L = make_layer(70, k, gs, e4m3, codebook, seed++);
    // Realistic scales for the GEMM (the decode test covers the extremes).
    if (!e4m3)
      for (float& s : L.s_rel_f32) s = std::fabs(s) < 40.0f ? std::fabs(s) : 5.0f;
    // Odd m: positive E4M3 scales only, as quantizers write them (the AVX2
    // k-block kernels then address tables without a shift: s_rel_doubled).
    if (e4m3 && m % 2 == 1) make_positive(L);
    const std::vector<int8_t> w8 = L.want();
    IntLayerDesc codes = L.desc(group);
    IntLayerDesc dense = codes;
    dense.codes = nullptr;
    dense.weight = w8.data();
    const auto x = random_x(m, L.k, seed * 7);
    const auto want = run(*make_int_kernel_ref(dense), x, m, L.n);
    std::vector<std::unique_ptr<IntKernel>> kernels;
    kernels.push_back(make_int_kernel_ref(codes));
    if (avx2) {
      kernels.push_back(make_int_kernel_avx2(codes));
      kernels.push_back(make_int_kernel_avx2_novnni(codes));
      kernels.push_back(make_int_kernel_avx2(dense));
    }
    if (avx512) {
      kernels.push_back(make_int_kernel_avx512(codes));
      kernels.push_back(make_int_kernel_avx512(dense));
    }
    if (amx) {
      kernels.push_back(make_int_kernel_amx(codes));
      kernels.push_back(make_int_kernel_amx(dense));
    }
    for (const auto& kernel : kernels) {
      const auto got = run(*kernel, x, m, L.n);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * 4))
          << kernel->name() << " m=" << m << " k=" << k << " gs=" << gs << " e4m3=" << e4m3;
    }
  }
}

TEST(W4a8Codes, KernelsHoldTheCodesAtFourBits) {
  const CodeLayer L = make_layer(256, 512, 16, true, true, 5);
  // Stored: codes n·k/2, s_rel n·k/16 bytes, scale and bias 4 bytes per row.
  const double stored = 256.0 * 512 / 2 + 256.0 * 512 / 16 + 8.0 * 256;
  std::vector<std::unique_ptr<IntKernel>> kernels;
  if (mixq::testing::kernel_path("int_gemm_codes:avx2", Isa::avx2)) kernels.push_back(make_int_kernel_avx2(L.desc(16)));
  if (mixq::testing::kernel_path("int_gemm_codes:avx512_vnni", Isa::avx512))
    kernels.push_back(make_int_kernel_avx512(L.desc(16)));
  for (const auto& kernel : kernels) {
    // Plus the 4 KiB table of E4M3 decodes and 64 bytes of alignment.
    EXPECT_LE(kernel->held_bytes(), stored + 4096 + 64) << kernel->name();
    EXPECT_GE(kernel->held_bytes(), stored) << kernel->name();
  }
}

TEST(W4a8Codes, RejectsBadDescriptions) {
  CodeLayer L = make_layer(16, 64, 16, true, false, 3);
  IntLayerDesc d = L.desc(0);
  std::vector<int8_t> w(16 * 64);
  d.weight = w.data();  // codes and an int8 weight
  EXPECT_THROW(make_int_kernel(d, active_isa()), mixq::Error);
  d = L.desc(0);
  IntCodes both = L.ic;
  both.s_rel_f32 = L.scale.data();  // two s_rel
  d.codes = &both;
  EXPECT_THROW(make_int_kernel(d, active_isa()), mixq::Error);
  IntCodes odd = L.ic;
  odd.group_size = 6;  // not a multiple of 4
  d.codes = &odd;
  EXPECT_THROW(make_int_kernel(d, Isa::reference), mixq::Error);
  d = L.desc(0);
  d.k = 60;  // not a multiple of 8
  EXPECT_THROW(make_int_kernel(d, active_isa()), mixq::Error);
}

}  // namespace
