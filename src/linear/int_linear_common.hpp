#pragma once
// Shared glue of the integer-family Linears: a Linear that owns an IntKernel,
// and readers for the scale and bias tensors every integer format binds.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/int_kernel.hpp"
#include "mixq/layer.hpp"
#include "mixq/linear.hpp"

namespace mixq::linear {

class IntLinear final : public Linear {
 public:
  IntLinear(int64_t k, int64_t n, std::unique_ptr<kernels::IntKernel> kernel)
      : Linear(k, n), kernel_(std::move(kernel)) {}
  void forward(const float* x, int64_t m, float* y) const override { kernel_->forward(x, m, y); }
  std::string_view kernel_name() const override { return kernel_->name(); }
  std::optional<int64_t> packed_bytes() const override { return kernel_->held_bytes(); }

 private:
  std::unique_ptr<kernels::IntKernel> kernel_;
};

// weight_scale as f32 [n]: numel 1 is broadcast (tensorwise), numel n is per
// row; anything else, or a non-finite / non-positive value... is reported.
std::vector<float> read_weight_scale(const Layer& layer, int64_t n);
// bias as f32 [n], empty when the layer has none.
std::vector<float> read_bias(const Layer& layer, int64_t n);
// True when the marker asks for full_precision_matrix_mult (ComfyUI then
// dequantizes the weight and runs a float matmul instead of the int GEMM).
bool wants_full_precision(const Layer& layer);
// y = x·Wᵀ + b in fp32 with W = format->dequantize(original basis); plain
// loops, parallel over tokens (kernel name "ref_f32").
std::unique_ptr<Linear> make_dequantized_linear(const Layer& layer);

// Builds the IntLinear for a filled descriptor (the kernel copies/repacks what
// it needs); kernel errors are reported naming the layer.
std::unique_ptr<Linear> make_int_linear(const Layer& layer, const kernels::IntLayerDesc& desc,
                                        const LinearOptions& options);

// ConvRot group size when the marker enables it, else 0.
int64_t convrot_group(const Layer& layer, bool always_rotated);

}  // namespace mixq::linear
