// float8_e4m3fn and float8_e5m2 (docs/FORMATS.md §3.1): per-tensor FP8.
//
// Stored (roles): weight F8_E4M3 | F8_E5M2 [N, K], one code per element, no
// padding; weight_scale F32 [] or [1] (W ≈ fp8(q)·s); optional input_scale F32
// [] or [1], the static activation scale (ComfyUI uses 1.0 when absent).
#include <cmath>

#include "numeric/quantizers.hpp"
#include "formats/record_util.hpp"
#include "formats/records.hpp"
#include "formats/shard_util.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::formats {
namespace {

template <DType D>
constexpr float kMax = D == DType::F8_E4M3 ? 448.0f : 57344.0f;

template <DType D>
constexpr std::string_view kName = D == DType::F8_E4M3 ? "float8_e4m3fn" : "float8_e5m2";

template <DType D>
LogicalShape validate(Layer& layer) {
  const TensorView& w = layer.tensor("weight");
  require_matrix(layer, w, "FP8 weight [N, K]");
  require_scalar(layer, "weight_scale");
  if (layer.find("input_scale")) require_scalar(layer, "input_scale");
  return {w.shape[0], w.shape[1]};
}

int64_t tp_input_unit(const Layer&) { return 1; }

// Rows or columns of the codes; the per-tensor scales are copied to every rank.
void shard(const Layer&, ShardBuilder& b) { shard_by_axes(b, {{"weight", 0, 1, 1, 1}}); }

std::string method(const Layer& layer) {
  return method_or_full_precision(layer, layer.find("input_scale") ? "fp8:static" : "fp8:dynamic",
                                  "fp8:full_precision");
}

// W = fp8val(q)·s in f32 (the eager rule with T = f32).
void dequantize(const Layer& layer, Basis, float* out) {
  const TensorView& w = layer.tensor("weight");
  const float s = read_f32(layer.tensor("weight_scale"));
  const auto* q = reinterpret_cast<const uint8_t*>(w.data.data());
  const int64_t k = w.shape[1];
  const bool e4m3 = w.dtype == DType::F8_E4M3;
  for_rows(w.shape[0], k, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin * k; i < end * k; ++i) out[i] = (e4m3 ? e4m3_to_f32(q[i]) : e5m2_to_f32(q[i])) * s;
  });
}

// s = amax/max (1.0 for an all-zero weight, where any scale decodes to 0);
// q = fp8(clamp(w·(1/s), ±max)). Quantize option "input_scale" (a positive
// number) also stores a static activation scale.
template <DType D>
QuantizedLayer quantize(const float* weight, int64_t n, int64_t k, const nlohmann::json& params) {
  const int64_t count = n * k;
  float amax = 0.0f;
  for (int64_t i = 0; i < count; ++i) amax = std::fmax(amax, std::fabs(weight[i]));
  if (!std::isfinite(amax)) fail("{}: the weight holds an infinite value", kName<D>);
  float s = amax / kMax<D>;
  if (s == 0.0f) s = 1.0f;
  std::vector<uint8_t> codes(static_cast<size_t>(count));
  quant::quantize_fp8(weight, count, s, D, codes.data());

  QuantizedLayer q;
  q.tensors.push_back(owned_bytes("weight", D, {n, k}, codes.data(), codes.size()));
  q.tensors.push_back(owned_f32_scalar("weight_scale", s));
  if (auto it = params.find("input_scale"); it != params.end() && !it->is_null()) {
    if (!it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>()))
      fail("{}: \"input_scale\" must be a positive number, found {}", kName<D>, it->dump());
    q.tensors.push_back(owned_f32_scalar("input_scale", it->get<float>()));
  }
  q.marker = base_marker(kName<D>, params);
  return q;
}

template <DType D>
FormatTraits make_record(std::string_view summary, double expected_rel_error) {
  return FormatTraits{
      .name = kName<D>,
      .summary = summary,
      .defaults = {{std::string(kFullPrecision), false}},
      .quantize_options = {{"input_scale", nullptr}},
      .tensors = {{.role = "weight", .dtypes = {D}},
                  {.role = "weight_scale", .dtypes = {DType::F32}},
                  {.role = "input_scale", .required = false, .dtypes = {DType::F32}}},
      .expected_rel_error = expected_rel_error,
      .validate = validate<D>,
      .tp_input_unit = tp_input_unit,
      .shard = shard,
      .method = method,
      .dequantize = dequantize,
      .quantize = quantize<D>,
  };
}

}  // namespace

const FormatTraits& float8_e4m3fn_format() {
  static const FormatTraits record =
      make_record<DType::F8_E4M3>("FP8 E4M3 weight [N, K] with one F32 scale; activations FP8 per tensor",
                                  0.027);  // measured 0.0265 (3 mantissa bits)
  return record;
}

const FormatTraits& float8_e5m2_format() {
  static const FormatTraits record =
      make_record<DType::F8_E5M2>("FP8 E5M2 weight [N, K] with one F32 scale; activations FP8 per tensor",
                                  0.053);  // measured 0.0527 (2 mantissa bits)
  return record;
}

}  // namespace mixq::formats
