// convrot_w4a4 (docs/FORMATS.md §3.6): ConvRot-rotated signed int4 weights with
// one F32 scale per output row. W_rot[n, k] = int4(q[n, k]) · s[n]; the original
// basis is W_rot · H_G per group of K.
//
// Stored (roles): weight I8 [N, K/2], byte j = (v[2j] & 0xF) | (v[2j+1] << 4)
// (low nibble first, §2.2b; two's complement, quantizer range [-7, 7]);
// weight_scale F32 [N]. Marker parameters: convrot_groupsize (256, a power of 4
// dividing K), linear_dtype ("int4" or "int8": which GEMM runs it; the saved
// marker only carries "int8"), quant_group_size (fixed 64, never saved).
// K must be a multiple of 64. Activations are quantized inside the kernel.
#include <numeric>

#include "numeric/quantizers.hpp"
#include "formats/record_util.hpp"
#include "formats/records.hpp"
#include "formats/shard_util.hpp"
#include "mixq/error.hpp"
#include "numeric/hadamard.hpp"

namespace mixq::formats {
namespace {

constexpr int64_t kQuantGroup = 64;

void check_linear_dtype(const std::string& dtype, std::string_view where) {
  if (dtype != "int4" && dtype != "int8")
    fail("{}: linear_dtype must be \"int4\" or \"int8\", found \"{}\"", where, dtype);
}

LogicalShape validate(Layer& layer) {
  const TensorView& w = layer.tensor("weight");
  require_matrix(layer, w, "I8 [N, K/2] of packed int4");
  const int64_t n = w.shape[0], k = 2 * w.shape[1];
  check_linear_dtype(layer.param_string("linear_dtype"), "layer '" + layer.prefix + "'");
  if (layer.params.contains("quant_group_size") && layer.param_int("quant_group_size") != kQuantGroup)
    fail("layer '{}': convrot_w4a4 quant_group_size must be 64 (int4 MMA kernel requires quant_group_size 64), "
         "found {}",
         layer.prefix, layer.params["quant_group_size"].dump());
  if (k % kQuantGroup != 0)
    fail("layer '{}': convrot_w4a4 in_features K = 2 x {} = {} is not divisible by quant_group_size 64",
         layer.prefix, w.shape[1], k);
  checked_convrot_group(layer, k);
  require_shape_in(layer, layer.tensor("weight_scale"), {Shape{n}}, "[N] = [" + std::to_string(n) + "] (one per row)");
  return {n, k};
}

int64_t tp_input_unit(const Layer& layer) { return std::lcm(kQuantGroup, layer.param_int("convrot_groupsize")); }

// Packed rows, or a band of packed bytes (2 K per byte); the per-row scale follows the rows.
void shard(const Layer&, ShardBuilder& b) { shard_by_axes(b, {{"weight", 0, 1, 1, 2}, {"weight_scale", 0}}); }

std::string method(const Layer& layer) {
  return method_or_full_precision(layer, "convrot_w4a4:" + layer.param_string("linear_dtype"),
                                  "convrot_w4a4:full_precision");
}

// W = int4 · s[n] in f32, then · H_G per group for Basis::original.
void dequantize(const Layer& layer, Basis basis, float* out) {
  const TensorView& w = layer.tensor("weight");
  const TensorView& s = layer.tensor("weight_scale");
  const int64_t n = w.shape[0], bytes = w.shape[1], k = 2 * bytes;
  const auto* packed = reinterpret_cast<const uint8_t*>(w.data.data());
  for_rows(n, k, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float scale = read_f32(s, r);
      for (int64_t j = 0; j < bytes; ++j) {
        const uint8_t b = packed[r * bytes + j];
        const int lo = (b & 0x0F) >= 8 ? (b & 0x0F) - 16 : (b & 0x0F);
        const int hi = (b >> 4) >= 8 ? (b >> 4) - 16 : (b >> 4);
        out[r * k + 2 * j] = static_cast<float>(lo) * scale;
        out[r * k + 2 * j + 1] = static_cast<float>(hi) * scale;
      }
    }
  });
  if (basis == Basis::original) hadamard_rotate(out, n, k, layer.param_int("convrot_groupsize"));
}

// Rotate per group, Q4row per row (s = max(amax, 1e-10)/7, codes [-7, 7]),
// pack low nibble first.
QuantizedLayer quantize(const float* weight, int64_t n, int64_t k, const nlohmann::json& params) {
  const int64_t g = param_int(params, "convrot_groupsize", 256);
  const std::string linear_dtype = param_string(params, "linear_dtype", "int4");
  check_linear_dtype(linear_dtype, "convrot_w4a4");
  if (param_int(params, "quant_group_size", kQuantGroup) != kQuantGroup)
    fail("convrot_w4a4: quant_group_size must be 64");
  if (!is_power_of_4(g)) fail("convrot_w4a4: convrot_groupsize must be a power of 4, found {}", g);
  if (k % kQuantGroup != 0) fail("convrot_w4a4: in_features K = {} is not divisible by quant_group_size 64", k);
  if (k % g != 0) fail("convrot_w4a4: in_features K = {} is not divisible by convrot_groupsize {}", k, g);

  std::vector<float> w(weight, weight + n * k);
  hadamard_rotate(w.data(), n, k, g);
  std::vector<int8_t> q(w.size());
  std::vector<float> scale(static_cast<size_t>(n));
  quant::q4row(w.data(), n, k, q.data(), scale.data());
  std::vector<uint8_t> packed(q.size() / 2);
  for (size_t j = 0; j < packed.size(); ++j)
    packed[j] = static_cast<uint8_t>((q[2 * j] & 0x0F) | ((q[2 * j + 1] & 0x0F) << 4));

  QuantizedLayer out;
  out.tensors.push_back(owned_bytes("weight", DType::I8, {n, k / 2}, packed.data(), packed.size()));
  out.tensors.push_back(owned_f32("weight_scale", {n}, scale));
  out.marker = base_marker("convrot_w4a4", params);
  out.marker["convrot_groupsize"] = g;
  if (linear_dtype != "int4") out.marker["linear_dtype"] = linear_dtype;
  return out;
}

}  // namespace

const FormatTraits& convrot_w4a4_format() {
  static const FormatTraits record{
      .name = "convrot_w4a4",
      .summary = "ConvRot-rotated signed int4 weight with a per-row F32 scale; activations rotated + int4/int8 in-kernel",
      .defaults = {{std::string(kFullPrecision), false}, {"convrot_groupsize", 256}, {"linear_dtype", "int4"}},
      .tensors = {{.role = "weight", .dtypes = {DType::I8}}, {.role = "weight_scale", .dtypes = {DType::F32}}},
      .expected_rel_error = 0.142,  // measured 0.1394
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
