#include "linear/int_linear_common.hpp"

#include <cmath>

#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::linear {

std::vector<float> read_weight_scale(const Layer& layer, int64_t n) {
  const TensorView& t = layer.tensor("weight_scale");
  std::vector<float> s = to_f32(t);
  if (static_cast<int64_t>(s.size()) == 1 && n != 1) s.assign(static_cast<size_t>(n), s[0]);
  if (static_cast<int64_t>(s.size()) != n)
    fail("layer '{}': tensor '{}' has {} values, expected 1 or {} (out_features)", layer.prefix,
         t.name, s.size(), n);
  return s;
}

std::vector<float> read_bias(const Layer& layer, int64_t n) {
  const TensorView* t = layer.find("bias");
  if (!t) return {};
  std::vector<float> b = to_f32(*t);
  if (static_cast<int64_t>(b.size()) != n)
    fail("layer '{}': bias '{}' has {} values, expected {} (out_features)", layer.prefix, t->name,
         b.size(), n);
  return b;
}

int64_t convrot_group(const Layer& layer, bool always_rotated) {
  if (!always_rotated) {
    auto it = layer.params.find("convrot");
    if (it == layer.params.end() || !it->is_boolean() || !it->get<bool>()) return 0;
  }
  if (!layer.params.contains("convrot_groupsize")) return 256;  // spec §3.5 default
  return layer.param_int("convrot_groupsize");
}

}  // namespace mixq::linear
