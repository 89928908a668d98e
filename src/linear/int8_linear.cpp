// int8_tensorwise (docs/FORMATS.md §3.4, §3.5): I8 [N, K] weights with a
// tensorwise or per-row scale, optionally ConvRot-rotated. Activations are
// quantized per token with Q8row; the product association (s_x·s_w) first.
#include <vector>

#include "linear/runtime_table.hpp"
#include "linear/int_linear_common.hpp"
#include "mixq/error.hpp"

namespace mixq::linear {

std::unique_ptr<Linear> make_int8(const Layer& layer, const LinearOptions& options) {
  if (wants_full_precision(layer)) return make_dequantized_linear(layer);
  const int64_t n = layer.out_features, k = layer.in_features;
  const TensorView& w = layer.tensor("weight");
  if (w.dtype != DType::I8 || w.rank() != 2 || w.shape[0] != n || w.shape[1] != k ||
      static_cast<int64_t>(w.data.size()) != n * k)
    fail("layer '{}': tensor '{}' must be I8 [{}, {}], found {} {}", layer.prefix, w.name, n, k,
         dtype_name(w.dtype), shape_str(w.shape));
  const std::vector<float> scale = read_weight_scale(layer, n);
  const std::vector<float> bias = read_bias(layer, n);
  kernels::IntLayerDesc d;
  d.n = n;
  d.k = k;
  d.group = convrot_group(layer, false);
  d.act = kernels::ActQuant::q8row;
  d.epilogue = kernels::Epilogue::scale_product;
  d.int4_weights = false;
  // Bytes need no alignment. In a mapped checkpoint file the fast kernels
  // read them in place for every forward (no copy); a caller's buffer is
  // packed.
  d.weight = reinterpret_cast<const int8_t*>(w.data.data());
  d.weight_in_place = w.storage != nullptr;
  d.weight_scale = scale.data();
  d.bias = bias.empty() ? nullptr : bias.data();
  return make_int_linear(layer, d, options);
}

}  // namespace mixq::linear
