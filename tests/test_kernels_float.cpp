// Fast float-family kernels against the reference kernels on random data:
// NVFP4 W4A4 (bit exact: integer block dots, same fp32 epilogue order), the
// bf16 activation preparation (exactly the reference quantizer's values), and
// the bf16/f32 GEMM cores (fp32 summation order only). Every shape list covers
// the remainder paths: M in {1,2,3,7,16,33,64,257}, N not a multiple of 16,
// K = 80 (5 NVFP4 blocks) and K not a multiple of 32.
// Every test runs once per x86 path (avx512; avx2 with AVX-VNNI; avx2 with
// vpmaddubsw only, forced through the kernel's switch) with kernels::set_isa
// limiting the process to it; a path the CPU lacks is skipped by name. The
// float GEMM also has two avx512 cores, `vdpbf16ps` (avx512) and the f32-FMA
// core over the same bf16 panels (avx512_fma), tested side by side; the
// measured choice between them (kernels::float_dot) is tested at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <random>
#include <vector>

#include "numeric/quantizers.hpp"
#include "kernels/calibrate.hpp"
#include "kernels/cpu.hpp"
#include "kernels/ref/float_ref.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "kernels/x86/nvfp4_w4a4.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "numeric/swizzle.hpp"
#include "support/kernel_paths.hpp"
#include "support/test_support.hpp"

namespace mixq {
namespace {

using testing::random_floats;
namespace x86 = kernels::x86;

const int64_t kRows[] = {1, 2, 3, 7, 16, 24, 33, 64, 257};  // 24, 33: the decoded-rows path (kDecodedRows)

// The kernel path a parameterized test runs.
enum class Path { avx512, avx512_fma, avx2_vnni, avx2 };

std::string path_name(const ::testing::TestParamInfo<Path>& info) {
  switch (info.param) {
    case Path::avx512: return "avx512";
    case Path::avx512_fma: return "avx512_fma";
    case Path::avx2_vnni: return "avx2_vnni";
    default: return "avx2";
  }
}

kernels::Isa isa_of(Path p) {
  return p == Path::avx512 || p == Path::avx512_fma ? kernels::Isa::avx512 : kernels::Isa::avx2;
}

// Why this CPU cannot run path p (empty when it can); the NVFP4 avx512
// kernels also need VBMI.
std::string missing(Path p, bool nvfp4) {
  if (kernels::best_isa() < isa_of(p)) return std::string(kernels::isa_name(isa_of(p))) + " ISA level";
  if (nvfp4 && p == Path::avx512 && !x86::nvfp4_avx512_supported()) return "AVX-512 VBMI";
  if (p == Path::avx2_vnni && !kernels::cpu_has_avx_vnni()) return "AVX-VNNI";
  return {};
}

// Limits the process to the test's ISA level, restored afterwards.
class OnPath : public ::testing::TestWithParam<Path> {
 protected:
  void SetUp() override {
    MIXQ_KERNEL_PATH_OR_SKIP(std::string(nvfp4() ? "nvfp4:" : "float_gemm:") + path_name({GetParam(), 0}),
                             isa_of(GetParam()), missing(GetParam(), nvfp4()));
    kernels::set_isa(isa_of(GetParam()));
  }
  void TearDown() override { kernels::set_isa(kernels::best_isa()); }
  virtual bool nvfp4() const { return false; }
  bool avx512() const { return GetParam() == Path::avx512; }
  // The float cores with f32 activations (FMA): avx512_fma and avx2.
  bool f32_acts() const { return GetParam() != Path::avx512; }
  // f32 activation preparation / FMA GEMM of this path (avx512_fma or avx2).
  void prepare_f32(const float* x, int64_t m, int64_t k, int64_t cols, x86::ActPrep prep, float inv,
                   float* out) const {
    if (GetParam() == Path::avx512_fma) x86::prepare_f32_avx512(x, m, k, cols, prep, inv, out);
    else x86::prepare_f32_avx2(x, m, k, cols, prep, inv, out);
  }
  void gemm_f32(const float* a, int64_t lda, int64_t m, const x86::FloatPanels& w, float alpha,
                const float* bias, float* y) const {
    if (GetParam() == Path::avx512_fma) x86::float_gemm_avx512(a, lda, m, w, alpha, bias, y);
    else x86::float_gemm_avx2(a, lda, m, w, alpha, bias, y);
  }
  void quantize(const float* x, int64_t m, int64_t k, int64_t blocks, const float* pqs,
                std::optional<float> scale, x86::Nvfp4Activation& act) const {
    if (avx512()) x86::nvfp4_quantize_avx512(x, m, k, blocks, pqs, scale, act);
    else x86::nvfp4_quantize_avx2(x, m, k, blocks, pqs, scale, act);
  }
  void gemm(const x86::Nvfp4Activation& act, const x86::Nvfp4Weights& w, const float* bias, float* y) const {
    if (avx512()) x86::nvfp4_gemm_avx512(act, w, bias, y);
    else x86::nvfp4_gemm_avx2(act, w, bias, y, GetParam() == Path::avx2_vnni);
  }
};

// NVFP4 W4A4 runs on all three paths.
class Nvfp4Kernels : public OnPath {
  bool nvfp4() const override { return true; }
};
INSTANTIATE_TEST_SUITE_P(Paths, Nvfp4Kernels, ::testing::Values(Path::avx512, Path::avx2_vnni, Path::avx2),
                         path_name);
// The float GEMM cores have no VNNI variant: avx512 (vdpbf16ps), avx512_fma
// and avx2.
class FloatKernels : public OnPath {};
INSTANTIATE_TEST_SUITE_P(Paths, FloatKernels, ::testing::Values(Path::avx512, Path::avx512_fma, Path::avx2),
                         path_name);

// An NVFP4 weight as a checkpoint stores it: hi-first packed codes and
// swizzled E4M3 block scales.
struct StoredNvfp4 {
  int64_t rows = 0, row_bytes = 0;
  std::vector<uint8_t> codes, scales;
  float global = 0;
  kernels::ref::Nvfp4Weight view() const {
    return {codes.data(), rows, row_bytes, scales.data(), global};
  }
};

StoredNvfp4 make_nvfp4(int64_t n, int64_t k, uint64_t seed) {
  const std::vector<float> w = random_floats(static_cast<size_t>(n * k), seed, 0.05f);
  const quant::Nvfp4Blocks q = quant::quantize_nvfp4(w.data(), n, k, std::nullopt);
  StoredNvfp4 s;
  s.rows = q.rows;
  s.row_bytes = q.cols / 2;
  s.codes.resize(static_cast<size_t>(q.rows * q.cols / 2));
  for (int64_t i = 0; i < q.rows * q.cols / 2; ++i)
    s.codes[static_cast<size_t>(i)] = static_cast<uint8_t>((q.codes[2 * i] << 4) | q.codes[2 * i + 1]);
  s.scales = swizzle_scales(q.block_scales.data(), q.rows, q.cols / 16);
  s.global = q.global_scale;
  return s;
}

void expect_bits_equal(const std::vector<float>& want, const std::vector<float>& got, const char* what) {
  ASSERT_EQ(want.size(), got.size());
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (std::bit_cast<uint32_t>(want[i]) != std::bit_cast<uint32_t>(got[i]) && bad++ < 5)
      ADD_FAILURE() << what << " element " << i << ": reference " << want[i] << ", fast " << got[i];
  EXPECT_EQ(bad, 0) << what;
}

TEST_P(Nvfp4Kernels, ActivationQuantizerMatchesReference) {
  for (int64_t k : {16, 80, 72, 3}) {
    const int64_t blocks = (k + 15) / 16;
    for (int64_t m : {1, 7, 33}) {
      std::vector<float> x = random_floats(static_cast<size_t>(m * k), 7 + m + k, 2.0f);
      x[0] = 0.0f;  // exact zeros and a zero block stay zero
      for (auto scale : {std::optional<float>{}, std::optional<float>{0.004f}}) {
        const quant::Nvfp4Blocks ref = quant::quantize_nvfp4(x.data(), m, k, scale);
        x86::Nvfp4Activation act;
        quantize(x.data(), m, k, blocks, nullptr, scale, act);
        EXPECT_EQ(act.global, ref.global_scale);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t b = 0; b < blocks; ++b) {
            ASSERT_EQ(act.scale[r * blocks + b], e4m3_to_f32(ref.block_scales[r * blocks + b]))
                << "m=" << m << " k=" << k << " row " << r << " block " << b;
            int32_t sum = 0;
            for (int64_t i = 0; i < 16; ++i) {
              const int64_t c = b * 16 + i;
              const int want = static_cast<int>(2.0f * e2m1_to_f32(ref.codes[r * ref.cols + c]));
              ASSERT_EQ(act.q[(r * blocks + b) * 16 + i], want) << "row " << r << " col " << c;
              sum += want;
            }
            EXPECT_EQ(act.comp[r * blocks + b], -12 * sum);
          }
      }
    }
  }
}

// Zero tolerance: integer block dots and the reference's fp32 epilogue order.
TEST_P(Nvfp4Kernels, GemmIsBitExactAgainstReference) {
  struct Shape { int64_t n, k; };
  for (Shape s : {Shape{16, 80}, Shape{37, 80}, Shape{70, 48}, Shape{5, 32}, Shape{33, 160}, Shape{100, 48},
                 Shape{300, 80} /* rows past one 128-row scale tile */}) {
    const StoredNvfp4 w = make_nvfp4(s.n, s.k, 100 + s.n);
    const x86::Nvfp4Weights packed = x86::nvfp4_pack(w.codes.data(), w.rows, w.row_bytes,
                                                     w.scales.data(), s.n, w.global);
    const x86::Nvfp4Weights in_place = x86::nvfp4_in_place(w.codes.data(), w.rows, w.row_bytes,
                                                           w.scales.data(), s.n, w.global);
    ASSERT_TRUE(packed.fast_ok);
    ASSERT_TRUE(in_place.fast_ok);
    const std::vector<float> bias = random_floats(static_cast<size_t>(s.n), 5, 0.1f);
    const std::vector<float> pqs = random_floats(static_cast<size_t>(s.k), 6, 1.0f);
    for (int64_t m : kRows) {
      const std::vector<float> x = random_floats(static_cast<size_t>(m * s.k), 300 + m, 1.0f);
      for (int variant = 0; variant < 3; ++variant) {
        const std::optional<float> input = variant == 1 ? std::optional<float>(0.002f) : std::nullopt;
        const float* p = variant == 2 ? pqs.data() : nullptr;
        const float* b = variant == 0 ? nullptr : bias.data();
        std::vector<float> want(static_cast<size_t>(m * s.n)), got(want.size(), -1.0f);
        kernels::ref::nvfp4_w4a4(x.data(), m, s.k, w.view(), s.n, input, p, b, want.data());
        x86::Nvfp4Activation act;
        quantize(x.data(), m, s.k, packed.blocks, p, input, act);
        SCOPED_TRACE(::testing::Message() << "n=" << s.n << " k=" << s.k << " m=" << m << " variant " << variant);
        gemm(act, packed, b, got.data());
        expect_bits_equal(want, got, "nvfp4 packed");
        std::fill(got.begin(), got.end(), -1.0f);
        gemm(act, in_place, b, got.data());
        expect_bits_equal(want, got, "nvfp4 in place");
      }
    }
  }
}

TEST_P(Nvfp4Kernels, BlockDotIsExactForExtremeCodes) {
  // Every weight code ±6 with scale 448 and activations that quantize to ±6:
  // the largest block dot (16·12·12 = 2304 doubled) must come out exactly.
  const int64_t n = 16, k = 32;
  StoredNvfp4 w;
  w.rows = 16;
  w.row_bytes = 16;
  w.codes.assign(16 * 16, 0x7F);  // +6, -6 alternating (0x7 / 0xF)
  std::vector<uint8_t> linear(16 * 2, 0x7E);  // 448
  w.scales = swizzle_scales(linear.data(), 16, 2);
  w.global = 1.0f;
  std::vector<float> x(2 * k);
  for (int64_t i = 0; i < 2 * k; ++i) x[i] = (i % 2 == 0) ? 3.0f : -3.0f;
  const x86::Nvfp4Weights packed = x86::nvfp4_pack(w.codes.data(), 16, 16, w.scales.data(), n, 1.0f);
  std::vector<float> want(2 * n), got(2 * n);
  kernels::ref::nvfp4_w4a4(x.data(), 2, k, w.view(), n, std::nullopt, nullptr, nullptr, want.data());
  x86::Nvfp4Activation act;
  quantize(x.data(), 2, k, packed.blocks, nullptr, std::nullopt, act);
  gemm(act, packed, nullptr, got.data());
  std::vector<float> in_place(2 * n);
  gemm(act, x86::nvfp4_in_place(w.codes.data(), 16, 16, w.scales.data(), n, 1.0f), nullptr, in_place.data());
  expect_bits_equal(want, in_place, "extreme codes in place");
  // x codes +6/-6 with g = 3/2688, S = 448 (worked example of §3.2): block dot
  // of (6)(6) + (-6)(-6) ... = 16·36 per block, two blocks; y = g·1·448²·1152.
  const float expected = (3.0f / 2688.0f) * 1.0f * (448.0f * 448.0f * 1152.0f);
  EXPECT_FLOAT_EQ(want[0], expected);
  expect_bits_equal(want, got, "extreme codes");
}

// The large-M kernels' decoded panels, read in place, for both vector widths
// (16 lanes is AVX-512's layout, checked here on any AVX2 CPU), against the
// layout written out byte by byte: the stored codes and scales of each row.
TEST(KernelsFloat, Nvfp4InPlacePanelsHoldTheDecodedLayout) {
  MIXQ_KERNEL_PATH_OR_SKIP("nvfp4:in_place_panels", kernels::Isa::avx2, testing::missing_isa(kernels::Isa::avx2));
  const int64_t n = 300, k = 112;  // 7 blocks (a lone last one), rows in 3 scale tiles, a partial panel
  StoredNvfp4 w = make_nvfp4(n, k, 77);
  // Every E4M3 code but NaN as a block scale: subnormals, negatives, zeros.
  for (size_t i = 0, code = 0; i < w.scales.size(); ++i, code = (code + 1) % 256) {
    if ((code & 0x7F) == 0x7F) code = (code + 1) % 256;
    w.scales[i] = static_cast<uint8_t>(code);
  }
  const x86::Nvfp4Weights in_place = x86::nvfp4_in_place(w.codes.data(), w.rows, w.row_bytes, w.scales.data(), n, w.global);
  ASSERT_TRUE(in_place.fast_ok);
  const int8_t table[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
  const int64_t blocks = k / 16;
  for (int lanes : {8, 16}) {
    std::vector<uint8_t> got(static_cast<size_t>(blocks * 320));
    for (int64_t p = 0; p < in_place.panels; ++p) {
      x86::nvfp4_decode_panel_in_place(in_place, p, lanes, got.data());
      for (int64_t j = 0; j < 16 && p * 16 + j < n; ++j) {
        const int64_t r = p * 16 + j, h = j / lanes, lane = j % lanes;
        for (int64_t b = 0; b < blocks; ++b) {
          const uint8_t* vec = got.data() + b * 320 + h * 20 * lanes;
          for (int64_t kk = 0; kk < 16; ++kk) {
            const uint8_t byte = w.codes[static_cast<size_t>(r * w.row_bytes + (16 * b + kk) / 2)];
            const int code = kk % 2 == 0 ? byte >> 4 : byte & 0x0F;
            ASSERT_EQ(vec[4 * lanes * (kk / 4) + 4 * lane + kk % 4], static_cast<uint8_t>(table[code]))
                << "lanes " << lanes << " row " << r << " k " << 16 * b + kk;
          }
          float scale;
          std::memcpy(&scale, vec + 16 * lanes + 4 * lane, 4);
          ASSERT_EQ(scale, e4m3_to_f32(w.scales[static_cast<size_t>(swizzled_offset(r, b, blocks))]))
              << "lanes " << lanes << " row " << r << " block " << b;
        }
      }
    }
  }
  // The GEMV (M <= kNvfp4InPlaceGemvM) converts the same scales its own way.
  for (int64_t m = 1; m <= x86::kNvfp4InPlaceGemvM; ++m) {
    const std::vector<float> x = random_floats(static_cast<size_t>(m * k), 78 + m, 1.0f);
    std::vector<float> want(static_cast<size_t>(m * n)), got(want.size(), -1.0f);
    kernels::ref::nvfp4_w4a4(x.data(), m, k, w.view(), n, std::nullopt, nullptr, nullptr, want.data());
    x86::Nvfp4Activation act;
    x86::nvfp4_quantize_avx2(x.data(), m, k, blocks, nullptr, std::nullopt, act);
    x86::nvfp4_gemm_avx2(act, in_place, nullptr, got.data(), false);
    SCOPED_TRACE(::testing::Message() << "M = " << m);
    expect_bits_equal(want, got, "nvfp4 in-place GEMV, every scale code");
  }
}

TEST(KernelsFloat, Nvfp4NanScaleDisablesFastPath) {
  std::vector<uint8_t> codes(16 * 8, 0x11), linear(16, 0x38);
  linear[3] = 0x7F;
  const std::vector<uint8_t> scales = swizzle_scales(linear.data(), 16, 1);
  EXPECT_FALSE(x86::nvfp4_pack(codes.data(), 16, 8, scales.data(), 16, 1.0f).fast_ok);
  EXPECT_FALSE(x86::nvfp4_in_place(codes.data(), 16, 8, scales.data(), 16, 1.0f).fast_ok);
  // A NaN in a padding row (past n) is never read: the fast path stays.
  EXPECT_TRUE(x86::nvfp4_in_place(codes.data(), 16, 8, scales.data(), 3, 1.0f).fast_ok);
  linear[3] = 0xB8;  // negative scale: decodable, stays fast
  const std::vector<uint8_t> neg = swizzle_scales(linear.data(), 16, 1);
  EXPECT_TRUE(x86::nvfp4_pack(codes.data(), 16, 8, neg.data(), 16, 1.0f).fast_ok);
  EXPECT_TRUE(x86::nvfp4_in_place(codes.data(), 16, 8, neg.data(), 16, 1.0f).fast_ok);
}

// The activation preparation yields exactly the reference quantizer's values
// (avx512: bf16 pairs, as rows and in the AMX A tile layout; avx512_fma /
// avx2: f32 values, `none` = x with zero padding, `round` (avx512_fma) = the
// bf16 value of x). 17 rows in the tile layout cross a 16-token group: a store
// past a token's 64-byte chunk would land in another token's (or the next
// chunk's) row.
TEST_P(FloatKernels, ActivationPreparationMatchesReferenceQuantizers) {
  for (int64_t k : {1, 31, 64, 70})
    for (const bool tiles : {false, true}) {
      if (tiles && !avx512()) continue;
      const int64_t m = tiles ? 17 : 5;
      std::vector<float> x = random_floats(static_cast<size_t>(m * k), 40 + k, 30.0f);
      x[0] = 1e6f;      // saturates
      if (k > 2) x[1] = 1e-9f;  // FP8 subnormal / underflow
      const int64_t steps = (k + 31) / 32 * 16, cols = 2 * steps;
      std::vector<uint32_t> pairs(static_cast<size_t>((m + 15) / 16 * 16 * steps));
      std::vector<float> f32(static_cast<size_t>(m * cols));
      auto prepare = [&](x86::ActPrep prep, float inv) {
        if (avx512()) x86::prepare_bf16_avx512(x.data(), m, k, steps, prep, inv, pairs.data(), tiles);
        else prepare_f32(x.data(), m, k, cols, prep, inv, f32.data());
      };
      auto value = [&](int64_t r, int64_t c) {
        if (!avx512()) return f32[r * cols + c];
        // Tile layout: pair c / 2 of row r in its 16-token group's chunk (16 pairs = 64 bytes each).
        const int64_t at = tiles ? (r / 16) * 16 * steps + (c / 32) * 256 + (r % 16) * 16 + (c / 2) % 16 : r * steps + c / 2;
        const uint32_t word = pairs[at];
        return bf16_to_f32(static_cast<uint16_t>(c % 2 == 0 ? word & 0xFFFF : word >> 16));
      };
      for (DType dt : {DType::F8_E4M3, DType::F8_E5M2}) {
        const float scale = 0.37f;
        std::vector<uint8_t> q(x.size());
        quant::quantize_fp8(x.data(), m * k, scale, dt, q.data());
        prepare(dt == DType::F8_E4M3 ? x86::ActPrep::e4m3 : x86::ActPrep::e5m2, 1.0f / scale);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            const float want = c < k ? (dt == DType::F8_E4M3 ? e4m3_to_f32(q[r * k + c]) : e5m2_to_f32(q[r * k + c])) : 0.0f;
            ASSERT_EQ(value(r, c), want) << dtype_name(dt) << " k=" << k << " (" << r << ", " << c << ")";
          }
      }
      const quant::Mxfp8Blocks mx = quant::quantize_mxfp8(x.data(), m, k);
      prepare(x86::ActPrep::mxfp8, 1.0f);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const float want = e4m3_to_f32(mx.codes[r * mx.cols + c]) * e8m0_to_f32(mx.exponents[r * (mx.cols / 32) + c / 32]);
          ASSERT_EQ(value(r, c), want) << "mxfp8 k=" << k << " (" << r << ", " << c << ")";
        }
      // Full precision: avx512 (both cores) rounds x to bf16 (RNE), avx2 keeps
      // it; `none` keeps x on the f32 paths.
      for (x86::ActPrep prep : {x86::ActPrep::round, x86::ActPrep::none}) {
        if (GetParam() == Path::avx2 && prep == x86::ActPrep::round) continue;  // refused: f32 only
        if (avx512() && prep == x86::ActPrep::none) continue;                  // the bf16 store rounds anyway
        prepare(prep, 1.0f);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            const float v = c < k ? x[r * k + c] : 0.0f;
            ASSERT_EQ(value(r, c), prep == x86::ActPrep::round ? round_to(DType::BF16, v) : v)
                << "k=" << k << " (" << r << ", " << c << ")";
          }
      }
    }
}

// A stored weight [n, k] of one panel type: its bytes and the f32 value of
// every element (what the reference multiplies by).
struct StoredWeight {
  x86::PanelType type = x86::PanelType::f32;
  int64_t n = 0, k = 0, row_bytes = 0;
  std::vector<uint8_t> bytes, block_scales;  // block_scales: mxfp8 [n, k/32] E8M0
  std::vector<float> value;
  x86::FloatPanels pack(bool pairs) const {
    return x86::pack_panels(type, bytes.data(), row_bytes, n, k, pairs,
                            block_scales.empty() ? nullptr : block_scales.data());
  }
};

// Random weights (scale ~0.1) stored as `type`: f32 as is, bf16 / f16 the
// rounded value, e4m3 / e5m2 the codes of w·100 (a spread over the FP8 range
// with subnormals), mxfp8 the MXFP8 quantizer's codes and exponents.
StoredWeight stored_weight(x86::PanelType type, int64_t n, int64_t k, uint64_t seed) {
  const std::vector<float> w = random_floats(static_cast<size_t>(n * k), seed, 0.1f);
  StoredWeight s;
  s.type = type;
  s.n = n;
  s.k = k;
  s.value.resize(w.size());
  if (type == x86::PanelType::mxfp8) {
    const quant::Mxfp8Blocks q = quant::quantize_mxfp8(w.data(), n, k);
    s.k = q.cols;
    s.row_bytes = q.cols;
    s.bytes = q.codes;
    s.block_scales = q.exponents;
    s.value.resize(static_cast<size_t>(n * q.cols));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < q.cols; ++c)
        s.value[r * q.cols + c] = e4m3_to_f32(q.codes[r * q.cols + c]) * e8m0_to_f32(q.exponents[r * (q.cols / 32) + c / 32]);
    return s;
  }
  const int eb = type == x86::PanelType::f32 ? 4 : type == x86::PanelType::bf16 || type == x86::PanelType::f16 ? 2 : 1;
  s.row_bytes = k * eb;
  s.bytes.resize(static_cast<size_t>(n * k * eb));
  for (size_t i = 0; i < w.size(); ++i) {
    uint32_t bits = 0;
    switch (type) {
      case x86::PanelType::f32: s.value[i] = w[i]; bits = std::bit_cast<uint32_t>(w[i]); break;
      case x86::PanelType::bf16: bits = f32_to_bf16(w[i]); s.value[i] = bf16_to_f32(static_cast<uint16_t>(bits)); break;
      case x86::PanelType::f16: bits = f32_to_f16(w[i]); s.value[i] = f16_to_f32(static_cast<uint16_t>(bits)); break;
      case x86::PanelType::e4m3: bits = f32_to_e4m3(w[i] * 100.0f); s.value[i] = e4m3_to_f32(static_cast<uint8_t>(bits)); break;
      default: bits = f32_to_e5m2(w[i] * 100.0f); s.value[i] = e5m2_to_f32(static_cast<uint8_t>(bits)); break;
    }
    std::memcpy(s.bytes.data() + i * eb, &bits, static_cast<size_t>(eb));  // little-endian low bytes
  }
  return s;
}

const char* type_name(x86::PanelType t) {
  switch (t) {
    case x86::PanelType::f32: return "f32";
    case x86::PanelType::bf16: return "bf16";
    case x86::PanelType::f16: return "f16";
    case x86::PanelType::e4m3: return "e4m3";
    case x86::PanelType::e5m2: return "e5m2";
    case x86::PanelType::mxfp8: return "mxfp8";
    default: return "nvfp4";
  }
}

// Error bound of an fp32 sum of n terms in any order: n·2^-24·Σ|term| (plus
// the final alpha/bias roundings). The weights are exact in every panel type
// (decoded in registers), and avx512's bf16 core gets bf16 activations, so
// the summation order is the only difference from the reference. The bf16
// core takes the FP8 kinds (k-pair panels), the FMA cores every type.
TEST_P(FloatKernels, GemmMatchesReferenceWithinSummationError) {
  struct Shape { int64_t n, k; };
  using T = x86::PanelType;
  const std::vector<T> types = avx512() ? std::vector<T>{T::e4m3, T::e5m2, T::mxfp8}
                                        : std::vector<T>{T::f32, T::bf16, T::f16, T::e4m3, T::e5m2, T::mxfp8};
  for (T type : types) {
    for (Shape s : {Shape{16, 64}, Shape{37, 70}, Shape{50, 3}, Shape{49, 600}, Shape{100, 17}}) {
      const StoredWeight sw = stored_weight(type, s.n, s.k, 9 + s.k);
      const int64_t k = sw.k;  // mxfp8: padded to 32
      const x86::FloatPanels panels = sw.pack(avx512());
      const std::vector<float> bias = random_floats(static_cast<size_t>(s.n), 3, 0.5f);
      for (int64_t m : kRows) {
        std::vector<float> x = random_floats(static_cast<size_t>(m * k), 77 + m, 1.0f);
        if (avx512())
          for (float& v : x) v = round_to(DType::BF16, v);
        const float alpha = 0.75f;
        std::vector<float> want(static_cast<size_t>(m * s.n)), got(want.size());
        kernels::ref::linear_f32(x.data(), m, k, sw.value.data(), s.n, nullptr, want.data());
        if (avx512()) {
          std::vector<uint32_t> a(static_cast<size_t>(m * panels.steps));
          x86::prepare_bf16_avx512(x.data(), m, k, panels.steps, x86::ActPrep::round, 1.0f, a.data());
          x86::float_gemm_avx512_bf16(a.data(), m, panels, alpha, bias.data(), got.data());
        } else {
          gemm_f32(x.data(), k, m, panels, alpha, bias.data(), got.data());
        }
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < s.n; ++c) {
            double mag = 0;
            for (int64_t i = 0; i < k; ++i) mag += std::fabs(double(x[r * k + i]) * sw.value[c * k + i]);
            const double expect = double(want[r * s.n + c]) * alpha + bias[c];
            const double tol = (2.0 * k + 4) * 0x1p-24 * (mag * alpha + std::fabs(bias[c])) + 1e-30;
            ASSERT_NEAR(got[r * s.n + c], expect, tol) << type_name(type) << " m=" << m << " n=" << s.n << " k=" << k;
          }
      }
    }
  }
}

// The FMA cores (avx2, avx512_fma) are the reference's FMA chain in k order.
// With products exact in f32 -- FP8 activations against FP8 weights, or bf16
// x against bf16 weights -- that is the reference's `acc += a·w` bit for bit:
// zero tolerance, whatever the panel type decodes from. Shapes cross the K
// chunk (600 > 2·256), odd K, N and M remainders.
TEST_P(FloatKernels, FmaGemmIsBitExactForExactProducts) {
  if (!f32_acts()) GTEST_SKIP() << "avx512 sums bf16 pairs (vdpbf16ps); covered by the bound above";
  struct Shape { int64_t n, k; };
  using T = x86::PanelType;
  for (Shape s : {Shape{37, 600}, Shape{50, 3}, Shape{100, 17}, Shape{16, 64}, Shape{49, 1031}}) {
    for (T type : {T::e4m3, T::e5m2, T::bf16, T::mxfp8}) {
      const StoredWeight sw = stored_weight(type, s.n, s.k, 5 + s.k);
      const int64_t k = sw.k;
      const x86::FloatPanels panels = sw.pack(false);
      const std::vector<float> bias = random_floats(static_cast<size_t>(s.n), 8, 0.5f);
      const x86::ActPrep prep = type == T::e4m3   ? x86::ActPrep::e4m3
                                : type == T::e5m2 ? x86::ActPrep::e5m2
                                : type == T::mxfp8 ? x86::ActPrep::mxfp8
                                                   : x86::ActPrep::none;
      for (int64_t m : kRows) {
        std::vector<float> x = random_floats(static_cast<size_t>(m * k), 6 + m, 3.0f);
        if (type == T::bf16)
          for (float& v : x) v = round_to(DType::BF16, v);
        std::vector<float> a(static_cast<size_t>(m * k)), want(static_cast<size_t>(m * s.n)), got(want.size());
        prepare_f32(x.data(), m, k, k, prep, 1.0f, a.data());
        const float* b = type == T::e5m2 ? bias.data() : nullptr;
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < s.n; ++c) {
            float acc = 0.0f;
            for (int64_t i = 0; i < k; ++i) acc += a[r * k + i] * sw.value[c * k + i];
            const float out = acc * 0.5f;
            want[r * s.n + c] = b ? out + b[c] : out;
          }
        gemm_f32(a.data(), k, m, panels, 0.5f, b, got.data());
        SCOPED_TRACE(::testing::Message() << type_name(type) << " n=" << s.n << " k=" << k << " m=" << m);
        expect_bits_equal(want, got, "fma core");
      }
    }
  }
}

// FP8 read in place on the FMA cores (at most 4 rows of E4M3 on AVX-512 VBMI:
// the register transpose of e4m3_rows_in_place.avx512vbmi.cpp; else the
// packing path) is
// the FMA chain in k order, bit for bit: every byte value but the NaN codes
// as weights (subnormals, both zeros, the largest), rows padded past k, K
// tails under 64, a partial last panel, an odd panel count; once with FP8
// activations (exact products: the plain sum) and once with raw f32 ones
// (std::fma chains). A second weight puts NaN codes in some columns.
TEST_P(FloatKernels, FmaGemmReadInPlaceIsBitExact) {
  if (!f32_acts()) GTEST_SKIP() << "avx512 sums bf16 pairs (vdpbf16ps)";
  struct Shape { int64_t n, k, pad; };
  using T = x86::PanelType;
  for (Shape s : {Shape{37, 600, 0}, Shape{64, 64, 0}, Shape{48, 127, 13}, Shape{80, 1031, 5}, Shape{16, 5, 0},
                  Shape{33, 200, 64}}) {
    for (T type : {T::e4m3, T::e5m2}) {
      const int64_t row_bytes = s.k + s.pad;
      std::mt19937 rng(static_cast<uint32_t>(s.n * 1000 + s.k));
      std::vector<uint8_t> codes(static_cast<size_t>(s.n * row_bytes));
      std::vector<float> value(static_cast<size_t>(s.n * s.k));
      for (int64_t r = 0; r < s.n; ++r)
        for (int64_t c = 0; c < row_bytes; ++c) {
          auto code = static_cast<uint8_t>(rng());
          if ((code & 0x7F) == 0x7F || (type == T::e5m2 && (code & 0x7C) == 0x7C)) code = 0x3F;  // no NaN / inf
          codes[r * row_bytes + c] = code;
          if (c < s.k) value[r * s.k + c] = type == T::e4m3 ? e4m3_to_f32(code) : e5m2_to_f32(code);
        }
      const x86::FloatPanels panels = x86::float_panels_in_place(type, codes.data(), row_bytes, s.n, s.k, false);
      const std::vector<float> bias = random_floats(static_cast<size_t>(s.n), 9, 0.5f);
      for (int64_t m : {1, 2, 3, 4, 5, 9}) {
        for (bool fp8_acts : {true, false}) {
          const std::vector<float> x = random_floats(static_cast<size_t>(m * s.k), 7 + m, 3.0f);
          std::vector<float> a(x.size()), want(static_cast<size_t>(m * s.n)), got(want.size());
          prepare_f32(x.data(), m, s.k, s.k, fp8_acts ? (type == T::e4m3 ? x86::ActPrep::e4m3 : x86::ActPrep::e5m2)
                                                     : x86::ActPrep::none,
                      1.0f, a.data());
          for (int64_t r = 0; r < m; ++r)
            for (int64_t c = 0; c < s.n; ++c) {
              float acc = 0.0f;
              for (int64_t i = 0; i < s.k; ++i) acc = std::fma(a[r * s.k + i], value[c * s.k + i], acc);
              want[r * s.n + c] = acc * 0.25f + bias[c];
            }
          gemm_f32(a.data(), s.k, m, panels, 0.25f, bias.data(), got.data());
          SCOPED_TRACE(::testing::Message() << type_name(type) << " n=" << s.n << " k=" << s.k << " pad=" << s.pad
                                            << " m=" << m << " fp8 activations " << fp8_acts);
          expect_bits_equal(want, got, "in place");
        }
      }
      // NaN codes (E4M3: 0x7F / 0xFF) in columns 3, 17 and n - 1 at
      // different k: those columns are NaN in every row, the rest as above.
      if (type != T::e4m3) continue;
      std::vector<uint8_t> nan_codes = codes;
      const int64_t nan_cols[] = {3, std::min<int64_t>(17, s.n - 1), s.n - 1};
      for (int64_t i = 0; i < 3; ++i)
        nan_codes[nan_cols[i] * row_bytes + (s.k - 1) * i / 2] = i == 1 ? 0xFF : 0x7F;
      const x86::FloatPanels nan_panels = x86::float_panels_in_place(type, nan_codes.data(), row_bytes, s.n, s.k, false);
      for (int64_t m : {1, 3}) {
        const std::vector<float> a = random_floats(static_cast<size_t>(m * s.k), 11, 1.0f);
        std::vector<float> got(static_cast<size_t>(m * s.n));
        gemm_f32(a.data(), s.k, m, nan_panels, 1.0f, nullptr, got.data());
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < s.n; ++c) {
            const bool nan_col = c == nan_cols[0] || c == nan_cols[1] || c == nan_cols[2];
            EXPECT_EQ(std::isnan(got[r * s.n + c]), nan_col) << "n=" << s.n << " k=" << s.k << " row " << r
                                                             << " column " << c;
          }
      }
    }
  }
}

// In-kernel decoding is exact for every code: 256 columns, column c holding
// code c at k = 0 (for mxfp8 with the block exponents below, the rest of the
// 32-block zero), times x = 1 at k = 0: y[c] = 0 + 1·decode(c), which is the
// reference decoder's value (-0 becomes +0 in any sum, NaN codes give NaN,
// E5M2 inf codes inf). Also checks alpha and the NaN-column fix on both cores,
// packed and read in place (NaN codes found while the GEMM packs).
TEST_P(FloatKernels, DecodedWeightsAreExactForEveryCode) {
  using T = x86::PanelType;
  for (T type : {T::e4m3, T::e5m2, T::mxfp8}) {
    // Block exponents: 0 (scale 0), 1 (subnormal weights), 120, 127, 200.
    // Not 254 / 255: weights of 2^127·448 overflow, and the reference's
    // 0·inf = NaN poisons the whole block. vcvtne2ps2bf16 flushes subnormals,
    // so the bf16 core skips e = 1.
    for (uint8_t e : {uint8_t{127}, uint8_t{0}, uint8_t{1}, uint8_t{120}, uint8_t{200}}) {
      if (type != T::mxfp8 && e != 127) continue;
      if (avx512() && e == 1) continue;
      const int64_t n = 256, k = type == T::mxfp8 ? 32 : 1;
      std::vector<uint8_t> codes(static_cast<size_t>(n * k), 0), scales(static_cast<size_t>(n), e);
      for (int64_t c = 0; c < n; ++c) codes[c * k] = static_cast<uint8_t>(c);
      for (bool in_place : {false, true}) {
      const uint8_t* block_scales = type == T::mxfp8 ? scales.data() : nullptr;
      const x86::FloatPanels panels = in_place
                                          ? x86::float_panels_in_place(type, codes.data(), k, n, k, avx512(), block_scales)
                                          : x86::pack_panels(type, codes.data(), k, n, k, avx512(), block_scales);
      std::vector<float> x(static_cast<size_t>(k), 0.0f), got(static_cast<size_t>(n), -1.0f);
      x[0] = 1.0f;
      for (float alpha : {1.0f, 0.5f}) {
        if (avx512()) {
          std::vector<uint32_t> a(static_cast<size_t>(panels.steps));
          x86::prepare_bf16_avx512(x.data(), 1, k, panels.steps, x86::ActPrep::none, 1.0f, a.data());
          x86::float_gemm_avx512_bf16(a.data(), 1, panels, alpha, nullptr, got.data());
        } else {
          gemm_f32(x.data(), k, 1, panels, alpha, nullptr, got.data());
        }
        for (int64_t c = 0; c < n; ++c) {
          const uint8_t code = static_cast<uint8_t>(c);
          float w = type == T::e5m2 ? e5m2_to_f32(code) : e4m3_to_f32(code);
          if (type == T::mxfp8) w *= e8m0_to_f32(e);
          const float want = (0.0f + 1.0f * w) * alpha;
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got[c])) << type_name(type) << " code " << c << " e " << int(e) << " in place "
                                            << in_place;
          } else {
            ASSERT_EQ(std::bit_cast<uint32_t>(got[c]), std::bit_cast<uint32_t>(want))
                << type_name(type) << " code " << c << " e " << int(e) << " alpha " << alpha << " in place "
                << in_place << ": want " << want << ", got " << got[c];
          }
        }
      }
      }
    }
  }
}

// Unquantized 16-bit panels decode every bf16 / f16 bit pattern exactly (f16
// subnormals, infinities; NaN stays NaN): one k, 65536 columns.
TEST_P(FloatKernels, SixteenBitPanelsDecodeEveryPattern) {
  if (!f32_acts()) GTEST_SKIP() << "unquantized panels run the FMA cores";
  for (x86::PanelType type : {x86::PanelType::bf16, x86::PanelType::f16}) {
    const int64_t n = 65536;
    std::vector<uint16_t> bits(static_cast<size_t>(n));
    for (int64_t c = 0; c < n; ++c) bits[c] = static_cast<uint16_t>(c);
    const x86::FloatPanels panels = x86::pack_panels(type, bits.data(), 2, n, 1, false);
    const float x = 1.0f;
    std::vector<float> got(static_cast<size_t>(n));
    gemm_f32(&x, 1, 1, panels, 1.0f, nullptr, got.data());
    for (int64_t c = 0; c < n; ++c) {
      const float w = type == x86::PanelType::bf16 ? bf16_to_f32(bits[c]) : f16_to_f32(bits[c]);
      const float want = 0.0f + 1.0f * w;
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[c])) << type_name(type) << " bits " << c;
      } else {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[c]), std::bit_cast<uint32_t>(want)) << type_name(type) << " bits " << c;
      }
    }
  }
}

// The FP8 panel layout (float_gemm.hpp), byte by byte, on any CPU: element
// (row r, k c) of panel r/16 sits at step c, byte r%16 (single steps) or step
// c/2, bytes 2·(r%16) + c%2 (k-pair steps); padding is 0. Shapes cover whole
// 16x16 blocks, a k tail, an odd K with pairs, and a partial last panel. Also
// the NaN column list, with NaN codes inside a block and in the k tail. The
// AVX-512 packer (64 k per zmm transpose) must give the same bytes and NaN
// rows for every chunk, K from 130 covering whole 64-k blocks and their tail.
TEST(KernelsFloat, Fp8PanelLayoutIsByteExactPackedAndInPlace) {
  using T = x86::PanelType;
  const bool zmm = testing::kernel_path("float_gemm:pack_avx512", kernels::Isa::avx512);
  for (bool pairs : {false, true})
    for (int64_t n : {16, 37, 64})
      for (int64_t k : {16, 48, 41, 7, 130, 256}) {
        std::vector<uint8_t> w(static_cast<size_t>(n * k));
        std::mt19937 rng(static_cast<uint32_t>(n * 1000 + k + pairs));
        for (uint8_t& b : w) b = static_cast<uint8_t>(rng() % 0x7F);  // 0x00-0x7E: no NaN yet
        const std::vector<int64_t> nan_rows = {3, 5, n - 1};
        w[static_cast<size_t>(3 * k + k / 2)] = 0xFF;
        w[static_cast<size_t>(5 * k + std::min<int64_t>(10, k - 1))] = 0x7F;
        w[static_cast<size_t>((n - 1) * k + k - 1)] = 0x7F;
        const x86::FloatPanels p = x86::pack_panels(T::e4m3, w.data(), k, n, k, pairs);
        const int64_t row = p.row_bytes();
        std::vector<uint8_t> want(static_cast<size_t>(p.panels * p.steps * row), 0);
        for (int64_t r = 0; r < n; ++r)
          for (int64_t c = 0; c < k; ++c) {
            const int64_t step = pairs ? c / 2 : c, at = pairs ? 2 * (r % 16) + c % 2 : r % 16;
            want[static_cast<size_t>(((r / 16) * p.steps + step) * row + at)] = w[static_cast<size_t>(r * k + c)];
          }
        ASSERT_EQ(p.data.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_EQ(p.data[i], want[i]) << "pairs " << pairs << " n=" << n << " k=" << k << " byte " << i;
        EXPECT_EQ(p.nan_columns, nan_rows) << "pairs " << pairs << " n=" << n << " k=" << k;
        // Read in place, every step range the GEMM packs (K chunks of any
        // length, from any step) comes out as the same bytes.
        // The NaN rows come back from the chunks that hold them.
        const x86::FloatPanels in_place = x86::float_panels_in_place(T::e4m3, w.data(), k, n, k, pairs);
        EXPECT_TRUE(in_place.data.empty());
        EXPECT_TRUE(in_place.nan_columns.empty());
        for (bool avx512 : {false, true})
          for (int64_t chunk : {int64_t{1}, int64_t{5}, int64_t{64}, int64_t{70}, p.steps}) {
            if (avx512 && !zmm) continue;
            std::vector<int64_t> found;
            for (int64_t panel = 0; panel < p.panels; ++panel)
              for (int64_t s0 = 0; s0 < p.steps; s0 += chunk) {
                const int64_t s1 = std::min(p.steps, s0 + chunk);
                std::vector<uint8_t> got(static_cast<size_t>((s1 - s0) * row), 0xAA);
                const uint32_t nan = (avx512 ? x86::pack_panel_steps_avx512 : x86::pack_panel_steps)(
                    in_place, panel, s0, s1, got.data());
                for (int64_t j = 0; j < 16; ++j)
                  if (nan >> j & 1u) found.push_back(panel * 16 + j);
                ASSERT_EQ(std::memcmp(got.data(), want.data() + (panel * p.steps + s0) * row, got.size()), 0)
                    << "in place, avx512 " << avx512 << ": pairs " << pairs << " n=" << n << " k=" << k
                    << " panel " << panel << " steps " << s0 << ".." << s1;
              }
            std::sort(found.begin(), found.end());  // found chunk by chunk, in k order
            EXPECT_EQ(found, nan_rows) << "in place, avx512 " << avx512 << ", chunks of " << chunk << ": pairs "
                                       << pairs << " n=" << n << " k=" << k;
          }
      }
}

// pack_panels' rows_packed contract (what lets FloatGemm drop a layer's file
// pages while it packs): every row is handed over exactly once, in pieces of
// at most 64 panels, and never read again. The callback overwrites the rows
// it is given, as dropped-and-refaulted pages could not; the panels and the
// NaN column list must still equal a plain pack of the untouched weight.
TEST(KernelsFloat, PackedRowsAreHandedOverOnceAndNotReadAgain) {
  using T = x86::PanelType;
  for (T type : {T::e4m3, T::bf16})
    for (int64_t n : {5, 16, 1100, 2100}) {
      const int64_t k = 48, eb = type == T::bf16 ? 2 : 1, row_bytes = k * eb;
      std::vector<uint8_t> w(static_cast<size_t>(n * row_bytes));
      std::mt19937 rng(static_cast<uint32_t>(n + eb));
      for (uint8_t& b : w) b = static_cast<uint8_t>(rng() % 0x7F);
      w[static_cast<size_t>((n - 1) * row_bytes)] = 0x7F;  // an E4M3 NaN in the last row
      const x86::FloatPanels want = x86::pack_panels(type, w.data(), row_bytes, n, k, false);
      std::vector<uint8_t> scratch = w;
      std::mutex lock;
      std::vector<int> handed(static_cast<size_t>(n), 0);
      const x86::FloatPanels got = x86::pack_panels(type, scratch.data(), row_bytes, n, k, false, nullptr,
                                                    [&](int64_t r0, int64_t r1) {
                                                      ASSERT_LE(r1 - r0, 64 * 16);
                                                      std::lock_guard<std::mutex> hold(lock);
                                                      for (int64_t r = r0; r < r1; ++r) ++handed[static_cast<size_t>(r)];
                                                      std::memset(scratch.data() + r0 * row_bytes, 0xFF,
                                                                  static_cast<size_t>((r1 - r0) * row_bytes));
                                                    });
      EXPECT_EQ(std::count(handed.begin(), handed.end(), 1), n) << "n=" << n;
      EXPECT_TRUE(got.data == want.data) << "n=" << n << ": a row was read after it was handed over";
      EXPECT_EQ(got.nan_columns, want.nan_columns) << "n=" << n;
    }
}

// Panels hold the stored bytes: 1 per FP8 weight, 2 per bf16 / f16, 4 per
// f32, 1 + 1/32 per MXFP8 weight (N a multiple of 16: no column padding).
TEST(KernelsFloat, PanelsKeepTheStoredWidth) {
  const int64_t n = 64, k = 128;
  std::vector<uint8_t> bytes(static_cast<size_t>(n * k * 4), 0x11), scales(static_cast<size_t>(n * k / 32), 127);
  using T = x86::PanelType;
  EXPECT_EQ(x86::pack_panels(T::e4m3, bytes.data(), k, n, k, false).bytes(), n * k);
  EXPECT_EQ(x86::pack_panels(T::e5m2, bytes.data(), k, n, k, true).bytes(), n * k);
  EXPECT_EQ(x86::pack_panels(T::bf16, bytes.data(), 2 * k, n, k, false).bytes(), 2 * n * k);
  EXPECT_EQ(x86::pack_panels(T::f16, bytes.data(), 2 * k, n, k, false).bytes(), 2 * n * k);
  EXPECT_EQ(x86::pack_panels(T::f32, bytes.data(), 4 * k, n, k, false).bytes(), 4 * n * k);
  EXPECT_EQ(x86::pack_panels(T::mxfp8, bytes.data(), k, n, k, false, scales.data()).bytes(), n * k + n * k / 32);
  std::vector<uint8_t> e4m3_scales(static_cast<size_t>(n * k / 16), 0x38);
  EXPECT_EQ(x86::pack_panels(T::nvfp4, bytes.data(), k / 2, n, k, false, e4m3_scales.data()).bytes(),
            n * k / 2 + n * k / 16);
  EXPECT_THROW(x86::pack_panels(T::bf16, bytes.data(), 2 * k, n, k, true), Error);       // pairs: FP8 only
  EXPECT_THROW(x86::pack_panels(T::mxfp8, bytes.data(), k, n, 48, false, scales.data()), Error);  // K % 32
  EXPECT_THROW(x86::pack_panels(T::f32, bytes.data(), 4 * k - 1, n, k, false), Error);  // short rows
}

// The selection point: forcing works both ways, the automatic choice follows
// the probe's rates, and the probe is short.
TEST(FloatDot, ForcingAndAutomaticChoice) {
  if (!kernels::has_avx512_vnni_bf16()) {
    EXPECT_EQ(kernels::measured_float_dot(), kernels::FloatDot::fma);  // no vdpbf16ps at all
  }
  MIXQ_KERNEL_PATH_OR_SKIP("float_dot:avx512_bf16", kernels::Isa::avx512,
                           kernels::has_avx512_vnni_bf16() ? "" : "AVX-512 VNNI/BF16");
  kernels::set_float_dot(kernels::FloatDot::bf16);
  EXPECT_EQ(kernels::float_dot(), kernels::FloatDot::bf16);
  kernels::set_float_dot(kernels::FloatDot::fma);
  EXPECT_EQ(kernels::float_dot(), kernels::FloatDot::fma);
  kernels::set_float_dot(std::nullopt);
  const kernels::FloatDot measured = kernels::measured_float_dot();
  if (!std::getenv("MIXQ_FLOAT_DOT")) {
    EXPECT_EQ(kernels::float_dot(), measured);
  }
  EXPECT_EQ(kernels::parse_float_dot("fma"), kernels::FloatDot::fma);
  EXPECT_EQ(kernels::parse_float_dot("bf16"), kernels::FloatDot::bf16);
  EXPECT_EQ(kernels::parse_float_dot("auto"), std::nullopt);
  const auto t0 = std::chrono::steady_clock::now();
  const kernels::FloatDotProbe p = kernels::probe_float_dot();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("probe: vdpbf16ps %.0f GFLOPS, vfmadd231ps %.0f GFLOPS (1 thread, %.1f ms) -> %s\n",
              p.bf16_gflops, p.fma_gflops, ms, std::string(kernels::float_dot_name(measured)).c_str());
  EXPECT_GT(p.bf16_gflops, 0.0);
  EXPECT_GT(p.fma_gflops, 0.0);
  EXPECT_LT(ms, 50.0) << "the probe must stay short";
  // The cached choice came from an earlier probe; on a shared machine rates
  // drift, so only a clear winner (1.5x) must match it.
  if (p.fma_gflops > 1.5 * p.bf16_gflops) {
    EXPECT_EQ(measured, kernels::FloatDot::fma);
  }
  if (p.bf16_gflops > 1.5 * p.fma_gflops) {
    EXPECT_EQ(measured, kernels::FloatDot::bf16);
  }
}

}  // namespace
}  // namespace mixq
