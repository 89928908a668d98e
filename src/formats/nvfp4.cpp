// nvfp4 (docs/FORMATS.md §3.2): E2M1 codes, E4M3 scale per 16 along K, F32
// global scale. value(n, k) = e2m1(code) · e4m3(S[n, k/16]) · g.
//
// Stored (roles): weight U8 [Np, Kp/2] (Np, Kp = N, K padded to 16 with zeros;
// byte j = code[2j] << 4 | code[2j+1], high nibble first, §2.2a);
// weight_scale F8_E4M3 or U8, Rp·Cp bytes of swizzled block scales (§2.3;
// Rp = roundup(Np, 128), Cp = roundup(Kp/16, 4); any 1-D or 2-D shape with
// that many bytes); weight_scale_2 F32 [] or [1] (g); optional input_scale F32
// [] or [1] (activation global scale); optional pre_quant_scale [K] (multiplies
// the activation). Logical N comes from the bias, logical K from
// pre_quant_scale; without them the stored padded size is reported, with a
// warning.
#include <cmath>

#include <fmt/format.h>

#include "formats/nvfp4_layout.hpp"
#include "numeric/quantizers.hpp"
#include "formats/record_util.hpp"
#include "formats/records.hpp"
#include "formats/block_checks.hpp"
#include "formats/shard_util.hpp"
#include "mixq/error.hpp"
#include "numeric/swizzle.hpp"

namespace mixq::formats {
namespace {

LogicalShape validate(Layer& layer) {
  const Nvfp4Geometry g = nvfp4_geometry(layer, Nvfp4Layout{});
  if (!g.n_known)
    layer.warnings.push_back(fmt::format(
        "layer '{}': nvfp4 pads N to 16 and no bias gives the logical out_features; reporting the stored {}",
        layer.prefix, g.rows));
  if (!g.k_known)
    layer.warnings.push_back(fmt::format(
        "layer '{}': nvfp4 pads K to 16 and no pre_quant_scale gives the logical in_features; reporting the "
        "stored {}",
        layer.prefix, g.k_padded));
  return {g.out_features, g.in_features, g.k_known ? 0 : 16};
}

int64_t tp_input_unit(const Layer&) { return 16; }

// Without a bias the stored (16-padded) rows are N, so a rank's rows must be too.
int64_t tp_output_unit(const Layer& layer) { return layer.find("bias") ? 1 : 16; }

// Packed rows (2 K per byte) and swizzled block scales re-laid per rank; the
// global scales are copied; pre_quant_scale follows a K band.
void shard(const Layer&, ShardBuilder& b) {
  shard_block_scaled(b, {.block = 16, .k_per_byte = 2, .row_pad = 16, .per_k = {"pre_quant_scale"}});
}

std::string method(const Layer& layer) { return method_or_full_precision(layer, "nvfp4", "nvfp4:full_precision"); }

void dequantize(const Layer& layer, Basis, float* out) { nvfp4_dequantize(layer, Nvfp4Layout{}, out); }

// quantize_nvfp4 with g = amax/2688 (1.0 for an all-zero weight, whose blocks
// are all zero anyway), codes packed high nibble first, scales swizzled.
QuantizedLayer quantize(const float* weight, int64_t n, int64_t k, const nlohmann::json& params) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n * k; ++i) amax = std::fmax(amax, std::fabs(weight[i]));
  const quant::Nvfp4Blocks b =
      quant::quantize_nvfp4(weight, n, k, amax > 0.0f ? std::nullopt : std::optional<float>(1.0f));
  std::vector<uint8_t> packed(static_cast<size_t>(b.rows * b.cols / 2));
  for (size_t j = 0; j < packed.size(); ++j)
    packed[j] = static_cast<uint8_t>((b.codes[2 * j] << 4) | b.codes[2 * j + 1]);
  const int64_t blocks = b.cols / 16;
  const std::vector<uint8_t> scales = swizzle_scales(b.block_scales.data(), b.rows, blocks);

  QuantizedLayer q;
  q.tensors.push_back(owned_bytes("weight", DType::U8, {b.rows, b.cols / 2}, packed.data(), packed.size()));
  q.tensors.push_back(owned_bytes("weight_scale", DType::F8_E4M3, {swizzled_rows(b.rows), swizzled_cols(blocks)},
                                  scales.data(), scales.size()));
  q.tensors.push_back(owned_f32_scalar("weight_scale_2", b.global_scale));
  q.marker = base_marker("nvfp4", params);
  return q;
}

}  // namespace

const FormatTraits& nvfp4_format() {
  static const FormatTraits record{
      .name = "nvfp4",
      .summary = "E2M1 codes with E4M3 scales per 16 (swizzled) and an F32 global scale; activations NVFP4",
      .defaults = {{std::string(kFullPrecision), false}},
      .tensors = {{.role = "weight", .dtypes = {DType::U8}},
                  {.role = "weight_scale", .dtypes = {DType::F8_E4M3, DType::U8}},
                  {.role = "weight_scale_2", .dtypes = {DType::F32}},
                  {.role = "input_scale", .required = false, .dtypes = {DType::F32}},
                  {.role = "pre_quant_scale", .required = false, .dtypes = {DType::F32, DType::F16, DType::BF16}}},
      .expected_rel_error = 0.096,  // measured 0.0952
      .validate = validate,
      .tp_input_unit = tp_input_unit,
      .tp_output_unit = tp_output_unit,
      .shard = shard,
      .method = method,
      .dequantize = dequantize,
      .quantize = quantize,
      .check = check_nvfp4_layout,  // catches files written with linear scales
  };
  return record;
}

}  // namespace mixq::formats
