// Layers without a marker: F32, F16, BF16 or F64 weights, f32 math. The weight
// is converted to f32 once; the fast paths pack it into f32 panels for the
// AVX-512 or AVX2 FMA GEMM (kernels/x86/float_gemm.hpp), the reference loops
// in k order.
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
    std::vector<float> w = to_f32(weight);
    bias_ = bias_f32(layer, n);
    if (const FastPath path = fast_path(options); path != FastPath::none) {
      gemm_ = FloatGemm(path, w.data(), n, k, kernels::x86::GemmType::f32);
      kernel_ = gemm_.name();
    } else {
      weight_ = std::move(w);
    }
  }

  void forward(const float* x, int64_t m, float* y) const override {
    check(x, m, y);
    if (m == 0) return;
    const float* bias = bias_.empty() ? nullptr : bias_.data();
    if (kernel_ == "ref") {
      kernels::ref::linear_f32(x, m, in_features(), weight_.data(), out_features(), bias, y);
      return;
    }
    gemm_.run(x, m, in_features(), kernels::x86::ActPrep::none, 1.0f, 1.0f, bias, y);
  }

 private:
  std::vector<float> weight_, bias_;
  FloatGemm gemm_;
};

}  // namespace

std::unique_ptr<Linear> make_unquantized(const Layer& layer, const LinearOptions& options) {
  return std::make_unique<UnquantizedLinear>(layer, options);
}

}  // namespace mixq::linear
