#pragma once
// What the float-family kernel tests share: the x86 path a parameterized test
// runs (limited to its ISA level through kernels::set_isa, skipped by name
// where the CPU lacks it), stored weights of every panel type with the f32
// value of each element, and the zero-tolerance comparison.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "kernels/x86/nvfp4_w4a4.hpp"
#include "mixq/numeric.hpp"
#include "numeric/quantizers.hpp"
#include "support/kernel_paths.hpp"
#include "support/test_support.hpp"

namespace mixq::testing {

namespace x86 = kernels::x86;

inline const int64_t kRows[] = {1, 2, 3, 7, 16, 17, 24, 33, 64, 257};  // 17 (dot core), 24, 33: decoded rows

// The kernel path a parameterized test runs.
enum class Path { avx512, avx512_fma, avx2_vnni, avx2 };

inline std::string path_name(const ::testing::TestParamInfo<Path>& info) {
  switch (info.param) {
    case Path::avx512: return "avx512";
    case Path::avx512_fma: return "avx512_fma";
    case Path::avx2_vnni: return "avx2_vnni";
    default: return "avx2";
  }
}

inline kernels::Isa isa_of(Path p) {
  return p == Path::avx512 || p == Path::avx512_fma ? kernels::Isa::avx512 : kernels::Isa::avx2;
}

// Why this CPU cannot run path p (empty when it can); the NVFP4 avx512
// kernels also need VBMI.
inline std::string missing(Path p, bool nvfp4) {
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


inline void expect_bits_equal(const std::vector<float>& want, const std::vector<float>& got, const char* what) {
  ASSERT_EQ(want.size(), got.size());
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (std::bit_cast<uint32_t>(want[i]) != std::bit_cast<uint32_t>(got[i]) && bad++ < 5)
      ADD_FAILURE() << what << " element " << i << ": reference " << want[i] << ", fast " << got[i];
  EXPECT_EQ(bad, 0) << what;
}

// A stored weight [n, k] of one panel type: its bytes and the f32 value of
// every element (what the reference multiplies by).
struct StoredWeight {
  x86::PanelType type = x86::PanelType::f32;
  int64_t n = 0, k = 0, row_bytes = 0;
  std::vector<uint8_t> bytes, block_scales;  // block_scales: mxfp8 [n, k/32] E8M0
  std::vector<float> value;
  x86::FloatPanels pack() const {
    return x86::pack_panels(type, bytes.data(), row_bytes, n, k, block_scales.empty() ? nullptr : block_scales.data());
  }
};

// Random weights (scale ~0.1) stored as `type`: f32 as is, bf16 / f16 the
// rounded value, e4m3 / e5m2 the codes of w·100 (a spread over the FP8 range
// with subnormals), mxfp8 the MXFP8 quantizer's codes and exponents.
inline StoredWeight stored_weight(x86::PanelType type, int64_t n, int64_t k, uint64_t seed) {
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

inline const char* type_name(x86::PanelType t) {
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

}  // namespace mixq::testing
