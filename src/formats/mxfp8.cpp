// mxfp8 (docs/FORMATS.md §3.3): E4M3 codes with an E8M0 power-of-two scale per
// 32 along K. value(n, k) = e4m3(q[n, k]) · 2^(e[n, k/32] - 127), byte 0 -> 0.
//
// Stored (roles): weight F8_E4M3 [Np, Kp] (N, K padded to 32 with zeros);
// weight_scale U8, Rp·Cp bytes of swizzled E8M0 exponents (§2.3; Rp =
// roundup(Np, 128), Cp = roundup(Kp/32, 4); any 1-D or 2-D shape with that
// many bytes); optional input_scale F32 (accepted as ComfyUI does, unused).
// Logical N comes from the bias; K is the stored padded K (with a warning).
//
// Layers that SGLang's global rule makes mxfp8 (header quant_format "mxfp8",
// no marker: mixq/marker.hpp) store the exponents row-major instead, exactly
// U8 [N, K/32]; their params carry _scale_layout = "linear" and every function
// here reads them through scale_index().
#include <fmt/format.h>

#include "numeric/quantizers.hpp"
#include "formats/record_util.hpp"
#include "formats/records.hpp"
#include "formats/block_checks.hpp"
#include "formats/shard_util.hpp"
#include "mixq/error.hpp"
#include "mixq/marker.hpp"
#include "mixq/numeric.hpp"
#include "numeric/swizzle.hpp"

namespace mixq::formats {
namespace {

struct Geometry {
  int64_t rows, k_padded;
  bool row_major = false;  // exponents [rows, k/32] row-major (global rule), else swizzled
};

// Byte of block b of row r in the layer's weight_scale.
int64_t scale_index(const Geometry& g, int64_t r, int64_t b) {
  const int64_t blocks = g.k_padded / 32;
  return g.row_major ? r * blocks + b : swizzled_offset(r, b, blocks);
}

Geometry stored(const Layer& layer) {
  const TensorView& w = layer.tensor("weight");
  require_matrix(layer, w, "F8_E4M3 [N, K] weight");
  const Geometry g{w.shape[0], w.shape[1], row_major_scales(layer.params)};
  if (g.k_padded % 32 != 0)
    fail("layer '{}': mxfp8 weight '{}' has K = {}, which is not a multiple of the block size 32", layer.prefix,
         w.name, g.k_padded);
  const TensorView& s = layer.tensor("weight_scale");
  if (g.row_major) {
    if (s.dtype != DType::U8 || s.shape != Shape{g.rows, g.k_padded / 32})
      fail("layer '{}': mxfp8 block exponents '{}' (row-major, from the header's quant_format) must be U8 [{}, {}], "
           "found {} {}",
           layer.prefix, s.name, g.rows, g.k_padded / 32, dtype_name(s.dtype), shape_str(s.shape));
    return g;
  }
  const int64_t rp = swizzled_rows(g.rows), cp = swizzled_cols(g.k_padded / 32);
  if (s.rank() < 1 || s.rank() > 2 || s.numel() != rp * cp)
    fail("layer '{}': mxfp8 block exponents '{}' must hold {} bytes (swizzled [{}, {}] for {} rows x {} blocks), "
         "found shape {}",
         layer.prefix, s.name, rp * cp, rp, cp, g.rows, g.k_padded / 32, shape_str(s.shape));
  return g;
}

LogicalShape validate(Layer& layer) {
  const Geometry g = stored(layer);
  if (layer.find("input_scale")) require_scalar(layer, "input_scale");
  // The global rule's layers are unpadded: SGLang requires exactly [N, K/32].
  if (g.row_major) {
    if (const TensorView* bias = layer.find("bias"); bias && bias->numel() != g.rows)
      fail("layer '{}': bias '{}' has {} elements, expected {} (the weight's rows)", layer.prefix, bias->name,
           bias->numel(), g.rows);
    return {g.rows, g.k_padded, 0};
  }
  const int64_t n = logical_rows(layer, g.rows, 32, "mxfp8");
  layer.warnings.push_back(fmt::format(
      "layer '{}': mxfp8 pads K to 32 and nothing stores the logical in_features; reporting the stored {}",
      layer.prefix, g.k_padded));
  return {n, g.k_padded, 32};
}

int64_t tp_input_unit(const Layer&) { return 32; }

// Without a bias the stored (32-padded) rows are N, so a rank's rows must be too
// (row-major layers of the global rule store exactly N rows).
int64_t tp_output_unit(const Layer& layer) { return layer.find("bias") || row_major_scales(layer.params) ? 1 : 32; }

// Code rows or columns and swizzled E8M0 exponents re-laid per rank. The
// global rule's row-major exponents [N, K/32] are cut like the codes: a rank's
// rows (column split) or its K band, 32 features per exponent column (row
// split; the plan keeps the band whole blocks). Those layers are unpadded, so
// the rank's layer is again exactly [rows, K/32], as the rule requires.
void shard(const Layer& layer, ShardBuilder& b) {
  if (row_major_scales(layer.params)) {
    shard_by_axes(b, {{.role = "weight", .out_axis = 0, .in_axis = 1},
                      {.role = "weight_scale", .out_axis = 0, .in_axis = 1, .in_unit = 32}});
    return;
  }
  shard_block_scaled(b, {.block = 32, .k_per_byte = 1, .row_pad = 32});
}

std::string method(const Layer& layer) {
  if (row_major_scales(layer.params))
    return method_or_full_precision(layer, "mxfp8:row_major_scales", "mxfp8:row_major_scales:full_precision");
  return method_or_full_precision(layer, "mxfp8", "mxfp8:full_precision");
}

void dequantize(const Layer& layer, Basis, float* out) {
  const Geometry g = stored(layer);
  const TensorView* bias = layer.find("bias");
  const int64_t n = bias && bias->rank() == 1 && bias->shape[0] <= g.rows ? bias->shape[0] : g.rows;
  const auto* codes = reinterpret_cast<const uint8_t*>(layer.tensor("weight").data.data());
  const auto* exps = reinterpret_cast<const uint8_t*>(layer.tensor("weight_scale").data.data());
  const int64_t k = g.k_padded, blocks = k / 32;
  for_rows(n, k, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t b = 0; b < blocks; ++b) {
        const float scale = e8m0_to_f32(exps[scale_index(g, r, b)]);
        for (int64_t c = b * 32; c < b * 32 + 32; ++c) out[r * k + c] = e4m3_to_f32(codes[r * k + c]) * scale;
      }
  });
}

QuantizedLayer quantize(const float* weight, int64_t n, int64_t k, const nlohmann::json& params) {
  const quant::Mxfp8Blocks b = quant::quantize_mxfp8(weight, n, k);
  const int64_t blocks = b.cols / 32;
  const std::vector<uint8_t> scales = swizzle_scales(b.exponents.data(), b.rows, blocks);
  QuantizedLayer q;
  q.tensors.push_back(owned_bytes("weight", DType::F8_E4M3, {b.rows, b.cols}, b.codes.data(), b.codes.size()));
  q.tensors.push_back(owned_bytes("weight_scale", DType::U8, {swizzled_rows(b.rows), swizzled_cols(blocks)},
                                  scales.data(), scales.size()));
  q.marker = base_marker("mxfp8", params);
  return q;
}

}  // namespace

const FormatTraits& mxfp8_format() {
  static const FormatTraits record{
      .name = "mxfp8",
      .summary = "E4M3 codes with E8M0 power-of-two scales per 32 (swizzled); activations MXFP8",
      .defaults = {{std::string(kFullPrecision), false}},
      .tensors = {{.role = "weight", .dtypes = {DType::F8_E4M3}},
                  {.role = "weight_scale", .dtypes = {DType::U8, DType::F8_E8M0}},
                  {.role = "input_scale", .required = false, .dtypes = {DType::F32}}},
      .expected_rel_error = 0.027,  // measured 0.0265
      .validate = validate,
      .tp_input_unit = tp_input_unit,
      .tp_output_unit = tp_output_unit,
      .shard = shard,
      .method = method,
      .dequantize = dequantize,
      .quantize = quantize,
      .check = check_mxfp8_layout,  // catches files written with linear scales
  };
  return record;
}

}  // namespace mixq::formats
