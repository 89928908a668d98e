// The "unquantized" record: a layer without a marker (docs/DISPATCH.md §1.5).
// Stored: weight F32 | F16 | BF16 | F64 [N, K]; optional bias.
#include "formats/record_util.hpp"
#include "formats/records.hpp"
#include "formats/shard_util.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::formats {
namespace {

LogicalShape validate(Layer& layer) {
  const TensorView& w = layer.tensor("weight");
  require_matrix(layer, w, "float weight [N, K]");
  return {w.shape[0], w.shape[1]};
}

int64_t tp_input_unit(const Layer&) { return 1; }

// Rows (column) or columns (row) of the float weight.
void shard(const Layer&, ShardBuilder& b) { shard_by_axes(b, {{"weight", 0, 1, 1, 1}}); }

std::string method(const Layer&) { return "unquantized"; }

void dequantize(const Layer& layer, Basis, float* out) {
  const std::vector<float> w = to_f32(layer.tensor("weight"));
  std::copy(w.begin(), w.end(), out);
}

// Stores the weight as a float dtype (quantize option "dtype": "F32" (default),
// "F16" or "BF16", rounded to nearest even). No marker: the layer stays plain.
QuantizedLayer quantize(const float* weight, int64_t n, int64_t k, const nlohmann::json& params) {
  const std::string name = param_string(params, "dtype", "F32");
  const auto dtype = parse_dtype(name);
  if (!dtype || !(*dtype == DType::F32 || *dtype == DType::F16 || *dtype == DType::BF16))
    fail("unquantized: \"dtype\" must be F32, F16 or BF16, found \"{}\"", name);
  QuantizedLayer q;
  q.tensors.push_back(
      OwnedTensor{"weight", *dtype, {n, k}, from_f32(*dtype, std::span<const float>(weight, static_cast<size_t>(n * k)))});
  q.marker = nullptr;
  return q;
}

}  // namespace

const FormatTraits& unquantized_record() {
  static const FormatTraits record{
      .name = "unquantized",
      .from_marker = false,
      .summary = "plain float weight (no marker): F32, F16, BF16 or F64",
      .defaults = nlohmann::json::object(),
      .quantize_options = {{"dtype", "F32"}},
      .tensors = {{.role = "weight", .required = true, .dtypes = {DType::F32, DType::F16, DType::BF16, DType::F64}}},
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
