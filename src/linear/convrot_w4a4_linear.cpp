// convrot_w4a4 (docs/FORMATS.md §3.6): signed int4 weights packed two per byte
// (low nibble = even k), per-row f32 scale, always ConvRot-rotated.
// linear_dtype "int4" (default): activations Q4row; "int8": Q8row with the int4
// weights used as int8 values (what CUDA/HIP do). Epilogue (acc·s_x)·s_w + b.
#include <vector>

#include "linear/runtime_table.hpp"
#include "linear/int_linear_common.hpp"
#include "mixq/error.hpp"

namespace mixq::linear {

std::unique_ptr<Linear> make_convrot_w4a4(const Layer& layer, const LinearOptions& options) {
  if (wants_full_precision(layer)) return make_dequantized_linear(layer);
  const int64_t n = layer.out_features, k = layer.in_features;
  const TensorView& w = layer.tensor("weight");
  if (w.dtype != DType::I8 && w.dtype != DType::U8)
    fail("layer '{}': tensor '{}' must be I8, found {}", layer.prefix, w.name, dtype_name(w.dtype));
  if (k % 2 != 0 || w.rank() != 2 || w.shape[0] != n || w.shape[1] != k / 2 ||
      static_cast<int64_t>(w.data.size()) != n * (k / 2))
    fail("layer '{}': tensor '{}' must be [{}, {}] (packed int4), found {}", layer.prefix, w.name,
         n, k / 2, shape_str(w.shape));
  const std::vector<float> scale = read_weight_scale(layer, n);
  const std::vector<float> bias = read_bias(layer, n);
  std::string linear_dtype = "int4";
  if (layer.params.contains("linear_dtype")) linear_dtype = layer.param_string("linear_dtype");
  if (linear_dtype != "int4" && linear_dtype != "int8")
    fail("layer '{}': linear_dtype must be \"int4\" or \"int8\", found \"{}\"", layer.prefix,
         linear_dtype);
  kernels::IntLayerDesc d;
  d.n = n;
  d.k = k;
  d.group = convrot_group(layer, true);
  d.act = linear_dtype == "int8" ? kernels::ActQuant::q8row : kernels::ActQuant::q4row;
  d.epilogue = kernels::Epilogue::sequential;
  d.int4_weights = true;
  // The file's nibbles (docs/FORMATS.md §2.2 b): in a mapped checkpoint the
  // fast kernels read them in place for every forward; a caller's buffer is
  // packed.
  d.weight_nibbles = reinterpret_cast<const uint8_t*>(w.data.data());
  d.weight_in_place = w.storage != nullptr;
  d.weight_scale = scale.data();
  d.bias = bias.empty() ? nullptr : bias.data();
  return make_int_linear(layer, d, options);
}

}  // namespace mixq::linear
