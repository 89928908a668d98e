// FP8 per-tensor layers, float8_e4m3fn and float8_e5m2 (spec/formats.md §3.1,
// ComfyUI semantics of dispatch.md §2.3): the activation is quantized to the
// weight's FP8 type with input_scale, or with scale 1.0 when the layer has
// none; y = (Σ fp8·fp8)·(s_x·s_w) + b. The fast path decodes the weight once to
// bf16 panels (every FP8 value is exact in bf16), produces the quantized
// activation directly as bf16 values and runs vdpbf16ps with fp32
// accumulation. full_precision_matrix_mult: W = fp8·s_w, x·Wᵀ in f32 (the
// fast path rounds x to bf16 and applies s_w in the epilogue).
#include "kernels/ref/float_ref.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "linear/factories.hpp"
#include "linear/float_common.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::linear {
namespace {

using kernels::x86::ActPrep;

class Fp8Linear final : public FloatLinear {
 public:
  Fp8Linear(const Layer& layer, const LinearOptions& options) : FloatLinear(layer, "ref") {
    const TensorView& weight = layer.tensor("weight");
    dtype_ = weight.dtype;
    const int64_t n = out_features(), k = in_features();
    if ((dtype_ != DType::F8_E4M3 && dtype_ != DType::F8_E5M2) || weight.rank() != 2 ||
        weight.shape[0] != n || weight.shape[1] != k)
      fail("layer '{}': fp8 weight must be F8_E4M3 or F8_E5M2 [{}, {}], found {} {}", layer.prefix, n,
           k, dtype_name(dtype_), shape_str(weight.shape));
    const uint8_t* codes = bytes_at_least(layer, "weight", n * k);
    weight_scale_ = scalar_f32(layer, "weight_scale");
    bool has_input = false;
    const float input = optional_scalar_f32(layer, "input_scale", has_input);
    input_scale_ = has_input ? input : 1.0f;
    bias_ = bias_f32(layer, n);
    full_precision_ = full_precision(layer);
    auto decode = dtype_ == DType::F8_E4M3 ? e4m3_to_f32 : e5m2_to_f32;
    std::vector<float> w(static_cast<size_t>(n * k));
    for (size_t i = 0; i < w.size(); ++i) w[i] = decode(codes[i]);
    if (use_avx512(options)) {
      panels_ = kernels::x86::pack_panels(w.data(), n, k, kernels::x86::GemmType::bf16);
      kernel_ = "avx512";
    } else if (full_precision_) {
      for (float& v : w) v *= weight_scale_;  // eager dequantize with T = f32
      dequantized_ = std::move(w);
    } else {
      codes_.assign(codes, codes + n * k);
    }
  }

  void forward(const float* x, int64_t m, float* y) const override {
    check(x, m, y);
    if (m == 0) return;
    const int64_t n = out_features(), k = in_features();
    const float* bias = bias_.empty() ? nullptr : bias_.data();
    if (kernel_ == "ref") {
      if (full_precision_)
        kernels::ref::linear_f32(x, m, k, dequantized_.data(), n, bias, y);
      else
        kernels::ref::fp8_linear(x, m, k, codes_.data(), n, dtype_, weight_scale_, input_scale_, bias, y);
      return;
    }
    std::vector<uint32_t> a(static_cast<size_t>(m * panels_.steps));
    if (full_precision_) {
      kernels::x86::prepare_bf16_avx512(x, m, k, panels_.steps, ActPrep::round, 1.0f, a.data());
      kernels::x86::float_gemm_avx512(a.data(), m, panels_, weight_scale_, bias, y);
    } else {
      const ActPrep prep = dtype_ == DType::F8_E4M3 ? ActPrep::e4m3 : ActPrep::e5m2;
      kernels::x86::prepare_bf16_avx512(x, m, k, panels_.steps, prep, 1.0f / input_scale_, a.data());
      kernels::x86::float_gemm_avx512(a.data(), m, panels_, input_scale_ * weight_scale_, bias, y);
    }
  }

 private:
  DType dtype_ = DType::F8_E4M3;
  float weight_scale_ = 1.0f, input_scale_ = 1.0f;
  std::vector<float> bias_, dequantized_;
  std::vector<uint8_t> codes_;
  bool full_precision_ = false;
  kernels::x86::FloatPanels panels_;
};

}  // namespace

std::unique_ptr<Linear> make_fp8(const Layer& layer, const LinearOptions& options) {
  return std::make_unique<Fp8Linear>(layer, options);
}

}  // namespace mixq::linear
