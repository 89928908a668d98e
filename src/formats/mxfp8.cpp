// mxfp8 (docs/FORMATS.md §3.3): E4M3 codes with an E8M0 power-of-two scale per
// 32 along K. value(n, k) = e4m3(q[n, k]) · 2^(e[n, k/32] - 127), byte 0 -> 0.
//
// Stored (roles): weight F8_E4M3 [Np, Kp] (N, K padded to 32 with zeros);
// weight_scale U8, Rp·Cp bytes of swizzled E8M0 exponents (§2.3; Rp =
// roundup(Np, 128), Cp = roundup(Kp/32, 4); any 1-D or 2-D shape with that
// many bytes); optional input_scale F32 (accepted as ComfyUI does, unused).
// Logical N comes from the bias; K is the stored padded K (with a warning).
#include <fmt/format.h>

#include "numeric/quantizers.hpp"
#include "formats/record_util.hpp"
#include "formats/records.hpp"
#include "formats/block_checks.hpp"
#include "formats/shard_util.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "numeric/swizzle.hpp"

namespace mixq::formats {
namespace {

struct Geometry {
  int64_t rows, k_padded;
};

Geometry stored(const Layer& layer) {
  const TensorView& w = layer.tensor("weight");
  require_matrix(layer, w, "F8_E4M3 [N, K] weight");
  const Geometry g{w.shape[0], w.shape[1]};
  if (g.k_padded % 32 != 0)
    fail("layer '{}': mxfp8 weight '{}' has K = {}, which is not a multiple of the block size 32", layer.prefix,
         w.name, g.k_padded);
  const TensorView& s = layer.tensor("weight_scale");
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
  const int64_t n = logical_rows(layer, g.rows, 32, "mxfp8");
  layer.warnings.push_back(fmt::format(
      "layer '{}': mxfp8 pads K to 32 and nothing stores the logical in_features; reporting the stored {}",
      layer.prefix, g.k_padded));
  return {n, g.k_padded, 32};
}

int64_t tp_input_unit(const Layer&) { return 32; }

// Without a bias the stored (32-padded) rows are N, so a rank's rows must be too.
int64_t tp_output_unit(const Layer& layer) { return layer.find("bias") ? 1 : 32; }

// Code rows or columns and swizzled E8M0 exponents re-laid per rank.
void shard(const Layer&, ShardBuilder& b) { shard_block_scaled(b, {.block = 32, .k_per_byte = 1, .row_pad = 32}); }

std::string method(const Layer& layer) { return method_or_full_precision(layer, "mxfp8", "mxfp8:full_precision"); }

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
        const float scale = e8m0_to_f32(exps[swizzled_offset(r, b, blocks)]);
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
      .quantizes_activation = true,
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
