// Layers without a marker: F32, F16, BF16 or F64 weights, f32 math. The
// weight keeps its stored width: the fast paths pack BF16 / F16 weights into
// 16-bit panels (widened to f32 in registers) and F32 into f32 panels for the
// AVX-512 or AVX2 FMA GEMM (kernels/x86/float_gemm.hpp); F64 becomes f32
// panels (what to_f32 gives, half the file's bytes). The reference keeps the
// stored bytes and decodes one weight row at a time, looping in k order.
#include "kernels/ref/float_ref.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "linear/runtime_table.hpp"
#include "linear/float_common.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::linear {
namespace {

class UnquantizedLinear final : public FloatLinear {
 public:
  UnquantizedLinear(const Layer& layer, const LinearOptions& options) : FloatLinear(layer, "ref") {
    const TensorView& weight = layer.tensor("weight");
    const int64_t n = out_features(), k = in_features();
    if (!is_float(weight.dtype) || weight.rank() != 2 || weight.shape[0] != n || weight.shape[1] != k)
      fail("layer '{}': unquantized weight must be a float [{}, {}] tensor, found {} {}", layer.prefix,
           n, k, dtype_name(weight.dtype), shape_str(weight.shape));
    if (static_cast<int64_t>(weight.data.size()) != n * k * static_cast<int64_t>(dtype_size(weight.dtype)))
      fail("layer '{}': weight '{}' holds {} bytes, expected {}", layer.prefix, weight.name,
           weight.data.size(), n * k * static_cast<int64_t>(dtype_size(weight.dtype)));
    bias_ = bias_f32(layer, n);
    const auto* stored = reinterpret_cast<const uint8_t*>(weight.data.data());
    if (const FastPath path = fast_path(options); path != FastPath::none) {
      namespace x86 = kernels::x86;
      if (weight.dtype == DType::F64) {
        const std::vector<float> w = to_f32(weight);
        gemm_ = FloatGemm(path, x86::PanelType::f32, w.data(), k * 4, n, k, true);
      } else {
        const x86::PanelType type = weight.dtype == DType::BF16 ? x86::PanelType::bf16
                                    : weight.dtype == DType::F16 ? x86::PanelType::f16
                                                                 : x86::PanelType::f32;
        gemm_ = FloatGemm(path, type, stored, k * static_cast<int64_t>(dtype_size(weight.dtype)), n, k, true, nullptr,
                          options.release_file_pages);
      }
      kernel_ = gemm_.name();
    } else {
      dtype_ = weight.dtype;
      stored_.assign(stored, stored + weight.data.size());
    }
  }

  void forward(const float* x, int64_t m, float* y) const override {
    check(x, m, y);
    if (m == 0) return;
    const float* bias = bias_.empty() ? nullptr : bias_.data();
    if (kernel_ == "ref") {
      kernels::ref::linear_stored(x, m, in_features(), stored_.data(), dtype_, out_features(), bias, y);
      return;
    }
    gemm_.run(x, m, in_features(), kernels::x86::ActPrep::none, 1.0f, 1.0f, bias, y);
  }

 private:
  int64_t held_bytes() const override {
    return gemm_.bytes() + static_cast<int64_t>(stored_.size() + bias_.size() * sizeof(float));
  }

  DType dtype_ = DType::F32;
  std::vector<uint8_t> stored_;  // reference: the weight as stored
  std::vector<float> bias_;
  FloatGemm gemm_;
};

}  // namespace

std::unique_ptr<Linear> make_unquantized(const Layer& layer, const LinearOptions& options) {
  return std::make_unique<UnquantizedLinear>(layer, options);
}

}  // namespace mixq::linear
