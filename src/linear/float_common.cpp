#include "linear/float_common.hpp"

#include <cstring>

#include "kernels/calibrate.hpp"
#include "kernels/cpu.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::linear {

std::vector<float> bias_f32(const Layer& layer, int64_t n) {
  const TensorView* bias = layer.find("bias");
  if (!bias) return {};
  if (!is_float(bias->dtype))
    fail("layer '{}': bias '{}' has dtype {}, expected F32, F16, BF16 or F64", layer.prefix, bias->name,
         dtype_name(bias->dtype));
  if (bias->numel() != n)
    fail("layer '{}': bias '{}' has {} elements, expected {} (out_features)", layer.prefix, bias->name,
         bias->numel(), n);
  return to_f32(*bias);
}

float scalar_f32(const Layer& layer, std::string_view role) {
  const TensorView& t = layer.tensor(role);
  if (t.numel() != 1 || !(is_float(t.dtype)))
    fail("layer '{}': '{}' must be one float value, found {} {}", layer.prefix, t.name,
         dtype_name(t.dtype), shape_str(t.shape));
  return to_f32(t).at(0);
}

float optional_scalar_f32(const Layer& layer, std::string_view role, bool& present) {
  present = layer.find(role) != nullptr;
  return present ? scalar_f32(layer, role) : 0.0f;
}

const uint8_t* bytes_at_least(const Layer& layer, std::string_view role, int64_t need) {
  const TensorView& t = layer.tensor(role);
  if (need < 0 || static_cast<int64_t>(t.data.size()) < need)
    fail("layer '{}': '{}' holds {} bytes, the kernel needs {}", layer.prefix, t.name, t.data.size(),
         need);
  return reinterpret_cast<const uint8_t*>(t.data.data());
}

bool full_precision(const Layer& layer) {
  auto it = layer.params.find("full_precision_matrix_mult");
  return it != layer.params.end() && it->is_boolean() && it->get<bool>();
}

FloatGemm::FloatGemm(FastPath path, const float* w, int64_t n, int64_t k, kernels::x86::GemmType type,
                     bool f32_activations)
    : path_(path), panels_(kernels::x86::pack_panels(w, n, k, type)) {
  if (path == FastPath::none) fail("FloatGemm: no fast path to pack for");
  fma_ = path == FastPath::avx512 && (type == kernels::x86::GemmType::f32 || f32_activations ||
                                      kernels::float_dot() == kernels::FloatDot::fma);
}

void FloatGemm::run(const float* x, int64_t m, int64_t k, kernels::x86::ActPrep prep, float inv_scale,
                    float alpha, const float* bias, float* y) const {
  namespace x86 = kernels::x86;
  const x86::FloatPanels& w = panels_;
  if (w.type == x86::GemmType::f32) {  // unquantized: x is the operand
    if (k != w.steps) fail("float gemm: activation has {} columns, the weight {}", k, w.steps);
    if (path_ == FastPath::avx512)
      x86::float_gemm_avx512(reinterpret_cast<const uint32_t*>(x), m, w, alpha, bias, y);
    else
      x86::float_gemm_avx2(x, k, m, w, alpha, bias, y);
    return;
  }
  if (path_ == FastPath::avx512 && fma_) {
    const int64_t cols = 2 * w.steps;
    // Full precision: x itself, f32 (never its bf16 rounding).
    if (prep == x86::ActPrep::round) prep = x86::ActPrep::none;
    std::vector<float> a(static_cast<size_t>(m * cols));
    x86::prepare_f32_avx512(x, m, k, cols, prep, inv_scale, a.data());
    x86::float_gemm_avx512_fma(a.data(), cols, m, w, alpha, bias, y);
    return;
  }
  if (path_ == FastPath::avx512) {
    if (prep == x86::ActPrep::round)
      fail("float gemm: a full-precision layer must be packed with f32_activations (x stays f32)");
    std::vector<uint32_t> a(static_cast<size_t>(m * w.steps));
    x86::prepare_bf16_avx512(x, m, k, w.steps, prep, inv_scale, a.data());
    x86::float_gemm_avx512(a.data(), m, w, alpha, bias, y);
    return;
  }
  const int64_t cols = 2 * w.steps;
  if (prep == x86::ActPrep::round) prep = x86::ActPrep::none;
  if (prep == x86::ActPrep::none && k == cols) {  // f32 x already has the panel's K
    x86::float_gemm_avx2(x, k, m, w, alpha, bias, y);
    return;
  }
  std::vector<float> a(static_cast<size_t>(m * cols));
  x86::prepare_f32_avx2(x, m, k, cols, prep, inv_scale, a.data());
  x86::float_gemm_avx2(a.data(), cols, m, w, alpha, bias, y);
}

void FloatLinear::check(const float* x, int64_t m, float* y) const {
  if (m < 0) fail("layer '{}': negative row count {}", prefix_, m);
  if (m > 0 && (x == nullptr || y == nullptr)) fail("layer '{}': null input or output", prefix_);
}

}  // namespace mixq::linear
