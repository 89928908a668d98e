// FP8 per-tensor layers, float8_e4m3fn and float8_e5m2 (docs/FORMATS.md §3.1,
// ComfyUI semantics of docs/DISPATCH.md §2.3): the activation is quantized to the
// weight's FP8 type with input_scale, or with scale 1.0 when the layer has
// none; y = (Σ fp8·fp8)·(s_x·s_w) + b. The weight stays FP8 (1 byte per
// weight): the fast paths read the codes in place from a mapped file (or
// repack a caller's buffer) into panels, a K chunk at a time, and decode
// them in the kernel (kernels/x86/float_gemm.hpp). On avx512 the measured faster
// instruction (kernels::float_dot) runs them: "avx512_bf16+avx512_fma"
// produces the quantized activation directly as bf16 values and runs
// vdpbf16ps with fp32 accumulation from 5 rows, the FMA core below (memory
// bound there, and faster); "avx512_fma" (and "avx2") run f32 FMAs on the f32
// quantized activation (exact products, k order: the reference's sums bit
// for bit).
// On an AMX machine 32 rows and more run AMX-BF16 tiles (bf16 activations,
// another f32 sum order) and fewer the core above ("amx_bf16+avx512_fma").
// full_precision_matrix_mult: W = fp8·s_w, x·Wᵀ in f32 (the fast paths apply
// s_w in the epilogue and keep x in f32: avx512 runs its FMA core for these
// layers, avx2 its only core; the reference decodes W one row at a time).
#include "kernels/ref/float_ref.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "linear/runtime_table.hpp"
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
    if (const FastPath path = fast_path(options); path != FastPath::none) {
      const auto type = dtype_ == DType::F8_E4M3 ? kernels::x86::PanelType::e4m3 : kernels::x86::PanelType::e5m2;
      // In a mapped checkpoint file the codes are read in place (no copy).
      const bool in_place = weight.storage != nullptr;
      gemm_ = FloatGemm(path, type, codes, k, n, k, full_precision_, nullptr, options.release_file_pages, in_place);
      if (in_place) hold_files({&weight});
      kernel_ = gemm_.name();
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
        kernels::ref::fp8_linear_full_precision(x, m, k, codes_.data(), n, dtype_, weight_scale_, bias, y);
      else
        kernels::ref::fp8_linear(x, m, k, codes_.data(), n, dtype_, weight_scale_, input_scale_, bias, y);
      return;
    }
    if (full_precision_) {
      gemm_.run(x, m, k, ActPrep::round, 1.0f, weight_scale_, bias, y);
    } else {
      const ActPrep prep = dtype_ == DType::F8_E4M3 ? ActPrep::e4m3 : ActPrep::e5m2;
      gemm_.run(x, m, k, prep, 1.0f / input_scale_, input_scale_ * weight_scale_, bias, y);
    }
    check_files();
  }

 private:
  DType dtype_ = DType::F8_E4M3;
  float weight_scale_ = 1.0f, input_scale_ = 1.0f;
  int64_t held_bytes() const override {
    return gemm_.bytes() + static_cast<int64_t>(codes_.size() + bias_.size() * sizeof(float));
  }

  std::vector<float> bias_;
  std::vector<uint8_t> codes_;
  bool full_precision_ = false;
  FloatGemm gemm_;
};

}  // namespace

std::unique_ptr<Linear> make_fp8(const Layer& layer, const LinearOptions& options) {
  return std::make_unique<Fp8Linear>(layer, options);
}

}  // namespace mixq::linear
