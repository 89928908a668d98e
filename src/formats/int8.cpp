// int8_tensorwise (docs/FORMATS.md §3.4–3.5): int8 weights with a per-tensor or
// per-row F32 scale, optionally ConvRot-rotated. W ≈ q · s (rotated basis when
// "convrot": true; the original is W_rot · H_G per group of K).
//
// Stored (roles): weight I8 [N, K]; weight_scale F32 [] or [1] (tensorwise) or
// [N, 1] or [N] (rowwise; ComfyUI's linear accepts [N], its dequantize would
// broadcast it wrongly, so mixq reads [N] as per row). Marker parameters:
// convrot (false), convrot_groupsize (256, a power of 4 dividing K).
// Activations are quantized inside the kernel (Q8row), not by the caller.
#include <cmath>

#include "numeric/quantizers.hpp"
#include "formats/record_util.hpp"
#include "formats/records.hpp"
#include "formats/shard_util.hpp"
#include "mixq/error.hpp"
#include "numeric/hadamard.hpp"

namespace mixq::formats {
namespace {

LogicalShape validate(Layer& layer) {
  const TensorView& w = layer.tensor("weight");
  require_matrix(layer, w, "I8 [N, K] weight");
  const int64_t n = w.shape[0], k = w.shape[1];
  require_shape_in(layer, layer.tensor("weight_scale"), {Shape{}, Shape{1}, Shape{n, 1}, Shape{n}},
                   "[] or [1] (per tensor), or [N, 1] or [N] (per row) with N = " + std::to_string(n));
  if (layer.param_bool("convrot")) checked_convrot_group(layer, k);
  return {n, k};
}

bool per_row(const Layer& layer) { return layer.tensor("weight_scale").numel() != 1; }

int64_t tp_input_unit(const Layer& layer) {
  return layer.param_bool("convrot") ? layer.param_int("convrot_groupsize") : 1;
}

// Rows or columns of the codes; a per-row scale follows the rows, a
// per-tensor one is copied. A K band of whole ConvRot groups (tp_input_unit)
// keeps the rotation block-diagonal per rank.
void shard(const Layer& layer, ShardBuilder& b) {
  if (per_row(layer))
    shard_by_axes(b, {{"weight", 0, 1, 1, 1}, {"weight_scale", 0}});
  else
    shard_by_axes(b, {{"weight", 0, 1, 1, 1}});
}

std::string method(const Layer& layer) {
  const char* m = layer.param_bool("convrot") ? "int8_convrot" : per_row(layer) ? "int8_rowwise" : "int8_tensorwise";
  return method_or_full_precision(layer, m, "int8_tensorwise:full_precision");
}

// W = f32(q) · s (row or tensor scale), then · H_G per group for Basis::original.
void dequantize(const Layer& layer, Basis basis, float* out) {
  const TensorView& w = layer.tensor("weight");
  const TensorView& s = layer.tensor("weight_scale");
  const int64_t n = w.shape[0], k = w.shape[1];
  const bool rows = per_row(layer);
  const auto* q = reinterpret_cast<const int8_t*>(w.data.data());
  for_rows(n, k, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float scale = read_f32(s, rows ? r : 0);
      for (int64_t c = 0; c < k; ++c) out[r * k + c] = static_cast<float>(q[r * k + c]) * scale;
    }
  });
  if (basis == Basis::original && layer.param_bool("convrot"))
    hadamard_rotate(out, n, k, layer.param_int("convrot_groupsize"));
}

// Rotates (convrot) then Q8row per output row -> scale [N, 1]; with the
// quantize option per_channel = false (not allowed with convrot, as in
// comfy-kitchen) one scale s = max(amax/127, 1e-30) for the tensor, shape [].
QuantizedLayer quantize(const float* weight, int64_t n, int64_t k, const nlohmann::json& params) {
  const bool convrot = param_bool(params, "convrot", false);
  const int64_t g = param_int(params, "convrot_groupsize", 256);
  const bool per_channel = param_bool(params, "per_channel", true);
  std::vector<float> w(weight, weight + n * k);
  if (convrot) {
    if (!per_channel) fail("int8_tensorwise: convrot is only supported with per_channel = true");
    if (!is_power_of_4(g)) fail("int8_tensorwise: convrot_groupsize must be a power of 4, found {}", g);
    if (k % g != 0) fail("int8_tensorwise: in_features K = {} is not divisible by convrot_groupsize {}", k, g);
    hadamard_rotate(w.data(), n, k, g);
  }
  std::vector<int8_t> q(w.size());
  std::vector<float> scale(per_channel ? static_cast<size_t>(n) : 1u);
  if (per_channel)
    quant::q8row(w.data(), n, k, q.data(), scale.data());
  else
    quant::q8row(w.data(), 1, n * k, q.data(), scale.data());  // one "row": the whole tensor

  QuantizedLayer out;
  out.tensors.push_back(owned_bytes("weight", DType::I8, {n, k}, q.data(), q.size()));
  out.tensors.push_back(per_channel ? owned_f32("weight_scale", {n, 1}, scale)
                                    : owned_f32_scalar("weight_scale", scale[0]));
  out.marker = base_marker("int8_tensorwise", params);
  out.marker["convrot"] = convrot;
  out.marker["convrot_groupsize"] = g;
  return out;
}

}  // namespace

const FormatTraits& int8_tensorwise_format() {
  static const FormatTraits record{
      .name = "int8_tensorwise",
      .summary = "int8 weight with a per-tensor or per-row F32 scale, optional ConvRot; activations Q8row in-kernel",
      .defaults = {{std::string(kFullPrecision), false}, {"convrot", false}, {"convrot_groupsize", 256}},
      .quantize_options = {{"per_channel", true}},
      .tensors = {{.role = "weight", .dtypes = {DType::I8}}, {.role = "weight_scale", .dtypes = {DType::F32}}},
      // Measured 0.0115 per tensor (per_channel=false), 0.0077 per row or ConvRot.
      .expected_rel_error = 0.0125,
      .validate = validate,
      .tp_input_unit = tp_input_unit,
      .shard = shard,
      .method = method,
      .dequantize = dequantize,
      .quantize = quantize,
  };
  return record;
}

}  // namespace mixq::formats
