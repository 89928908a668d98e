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

// A Linear that owns an IntKernel. `storage`: the mapped file the kernel
// reads its weight from in place (IntKernel::reads_weight_in_place), held for
// as long as the Linear lives; each forward then checks that the file was not
// truncated under it (its pages would read as zeros).
class IntLinear final : public Linear {
 public:
  IntLinear(int64_t k, int64_t n, std::unique_ptr<kernels::IntKernel> kernel,
            std::shared_ptr<const MappedFile> storage = nullptr);
  void forward(const float* x, int64_t m, float* y) const override;
  std::string_view kernel_name() const override { return kernel_->name(); }
  std::optional<int64_t> packed_bytes() const override { return kernel_->held_bytes(); }
  bool reads_file_in_place() const override { return storage_ != nullptr; }

 private:
  std::unique_ptr<kernels::IntKernel> kernel_;
  std::shared_ptr<const MappedFile> storage_;
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
// it needs); kernel errors are reported naming the layer. With
// desc.weight_in_place, `weight` is the layer's "weight" tensor, which must
// lie in a mapped file (TensorView::storage).
std::unique_ptr<Linear> make_int_linear(const Layer& layer, const kernels::IntLayerDesc& desc,
                                        const LinearOptions& options);

// ConvRot group size when the marker enables it, else 0.
int64_t convrot_group(const Layer& layer, bool always_rotated);

}  // namespace mixq::linear
