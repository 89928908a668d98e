#pragma once
// Helpers shared by the float-family Linear classes (unquantized, FP8, NVFP4,
// MXFP8): reading a layer's small tensors safely (views may be unaligned) and
// the common forward checks.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mixq/layer.hpp"
#include "mixq/linear.hpp"

namespace mixq::linear {

// The bias as f32 [n], or empty when the layer has none. Error when its
// length is not n.
std::vector<float> bias_f32(const Layer& layer, int64_t n);
// A one-element float tensor ([] or [1]) as f32; Error naming the layer otherwise.
float scalar_f32(const Layer& layer, std::string_view role);
// Optional scalar: nullopt-like flag through `present`.
float optional_scalar_f32(const Layer& layer, std::string_view role, bool& present);
// The raw bytes of a tensor, with an Error when fewer than `need` bytes.
const uint8_t* bytes_at_least(const Layer& layer, std::string_view role, int64_t need);
// full_precision_matrix_mult from the marker parameters (false when absent).
bool full_precision(const Layer& layer);
// True when the fast AVX-512 kernels may run (options + active ISA).
bool use_avx512(const LinearOptions& options);

// Base for the float-family layers: forward checks, kernel name.
class FloatLinear : public Linear {
 public:
  std::string_view kernel_name() const override { return kernel_; }

 protected:
  FloatLinear(const Layer& layer, std::string kernel)
      : Linear(layer.in_features, layer.out_features), prefix_(layer.prefix), kernel_(std::move(kernel)) {}
  void check(const float* x, int64_t m, float* y) const;
  std::string prefix_;
  std::string kernel_;
};

}  // namespace mixq::linear
