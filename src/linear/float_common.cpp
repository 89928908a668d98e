#include "linear/float_common.hpp"

#include <cstring>

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

bool use_avx512(const LinearOptions& options) {
  return options.kernel == KernelChoice::automatic &&
         kernels::active_isa() == kernels::Isa::avx512;
}

void FloatLinear::check(const float* x, int64_t m, float* y) const {
  if (m < 0) fail("layer '{}': negative row count {}", prefix_, m);
  if (m > 0 && (x == nullptr || y == nullptr)) fail("layer '{}': null input or output", prefix_);
}

}  // namespace mixq::linear
