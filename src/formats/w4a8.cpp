// The asym_w4a8_int8 record: validation, decode to int8, dequantize
// (docs/FORMATS.md §3.7, docs/DISPATCH.md §1.4, §2.2, §4.1). The quantizer is
// in w4a8_quantize.cpp.
#include "formats/w4a8.hpp"

#include <cmath>
#include <cstring>
#include <numeric>

#include "formats/record_util.hpp"
#include "formats/shard_util.hpp"
#include "formats/w4_common.hpp"
#include "mixq/error.hpp"
#include "numeric/hadamard.hpp"
#include "mixq/numeric.hpp"

namespace mixq::formats {

QuantizedLayer w4a8_quantize(const float* weight, int64_t n, int64_t k, const nlohmann::json& params);

const float kW4a8LloydMax[16] = {-0.980602f, -0.794529f, -0.638165f, -0.500986f, -0.377321f, -0.263187f,
                                 -0.155210f, -0.050720f, 0.052541f,  0.156985f,  0.265284f,  0.379533f,
                                 0.502636f,  0.638953f,  0.794876f,  0.980671f};

namespace {

struct Geometry {
  int64_t n, k, gs, g;
};

Geometry geometry(const Layer& layer) {
  const TensorView& w = w4::require_dtype(layer, "weight", {DType::I8});
  if (w.rank() != 2 || w.shape[0] <= 0 || w.shape[1] <= 0)
    fail("layer '{}': weight '{}' must be a non-empty 2-D I8 [N, K/2] tensor, found shape {}", layer.prefix,
         w.name, shape_str(w.shape));
  return {w.shape[0], 2 * w.shape[1], w4::positive_param(layer, "group_size"),
          w4::positive_param(layer, "convrot_groupsize")};
}

LogicalShape validate(Layer& layer) {
  const auto [n, k, gs, g] = geometry(layer);
  if (gs < 4 || !(16 % gs == 0 || gs % 16 == 0))
    fail("layer '{}': asym_w4a8_int8 group_size must be >= 4 and divide or be a multiple of 16, found {}",
         layer.prefix, gs);
  if (!is_power_of_4(g))
    fail("layer '{}': convrot_groupsize must be a power of 4 (16, 64, 256, ...), found {}", layer.prefix, g);
  if (k % 16 != 0 || k % gs != 0 || k % g != 0)
    fail("layer '{}': in_features K = {} (2 x {} packed bytes) must be divisible by 16, group_size {} and "
         "convrot_groupsize {}",
         layer.prefix, k, k / 2, gs, g);
  const TensorView& s_rel = w4::require_dtype(layer, "weight_s_rel", {DType::F8_E4M3, DType::U8, DType::F32});
  w4::require_shape(layer, s_rel, {n, k / gs}, "[N, K/group_size]");
  const TensorView& s_ch = w4::require_dtype(layer, "weight_s_channel", {DType::F32});
  w4::require_shape(layer, s_ch, {n}, "[N]");
  if (layer.find("weight_codebook")) {
    const TensorView& cb = w4::require_dtype(layer, "weight_codebook", {DType::F32});
    w4::require_shape(layer, cb, {16}, "16 levels");
  }
  if (layer.find("weight_correction")) {
    const TensorView& c =
        w4::require_dtype(layer, "weight_correction", {DType::F32, DType::F16, DType::BF16});
    w4::require_shape(layer, c, {k / gs, n}, "[K/group_size, N]");
  }
  if (auto it = layer.params.find("convrot"); it != layer.params.end() && it->is_boolean() && !it->get<bool>())
    layer.warnings.push_back(fmt::format(
        "layer '{}': marker says convrot=false, but asym_w4a8_int8 weights are always ConvRot-rotated "
        "(ComfyUI ignores the key; SGLang rejects the layer)",
        layer.prefix));
  if (const TensorView* b = layer.find("bias"); b && (b->rank() != 1 || b->shape[0] != n))
    fail("layer '{}': bias '{}' must have shape [{}], found {}", layer.prefix, b->name, n, shape_str(b->shape));
  return {n, k};
}

// docs/DISPATCH.md §4.1 (KitchenW4A8): in_pp % 16, % group_size and % convrot_groupsize.
int64_t tp_input_unit(const Layer& layer) {
  const auto [n, k, gs, g] = geometry(layer);
  return std::lcm(std::lcm(int64_t{16}, gs), g);
}

// Rows: codes, s_rel rows, s_channel, correction columns. A K band (whole
// groups and ConvRot groups): packed bytes, s_rel columns, correction rows.
// The codebook is copied to every rank.
void shard(const Layer& layer, ShardBuilder& b) {
  const int64_t gs = geometry(layer).gs;
  shard_by_axes(b, {{"weight", 0, 1, 1, 2},
                    {"weight_s_rel", 0, 1, 1, gs},
                    {"weight_s_channel", 0},
                    {"weight_correction", 1, 1, 0, gs}});
}

std::string method(const Layer& layer) {
  if (layer.param_bool("full_precision_matrix_mult")) return "asym_w4a8_int8:full_precision";
  // With a correction term the eager reference runs a float linear (§3.7).
  if (layer.find("weight_correction")) return "asym_w4a8_int8:float_correction";
  return "asym_w4a8_int8";
}

void dequantize(const Layer& layer, Basis basis, float* out) {
  const W4a8Decoded d = w4a8_decode(layer);
  for (int64_t r = 0; r < d.n; ++r) {
    for (int64_t c = 0; c < d.k; ++c) {
      float v = static_cast<float>(d.w8[r * d.k + c]) * d.s_channel[r];
      if (!d.correction.empty()) v += d.correction[(c / d.group_size) * d.n + r];
      out[r * d.k + c] = v;
    }
  }
  // W = W_rot · H per group (H symmetric and orthogonal), fp32.
  if (basis == Basis::original) hadamard_rotate(out, d.n, d.k, d.convrot_groupsize);
}

}  // namespace

int8_t w4a8_decode_code(uint8_t code, float s_rel, const float* codebook) {
  const float level = codebook ? codebook[code & 0x0F] : static_cast<float>(int(code & 0x0F) - 8);
  const float product = level * s_rel;  // one fp32 multiply
  const float r = std::nearbyint(product);  // ties to even (default rounding mode)
  // NaN only from a quantizer's non-finite s_rel (files' are checked finite):
  // 0, not an undefined conversion; quantize then refuses the layer.
  if (std::isnan(r)) return 0;
  return static_cast<int8_t>(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
}

W4a8Codes w4a8_codes(const Layer& layer) {
  const auto [n, k, gs, g] = geometry(layer);
  W4a8Codes c;
  c.n = n;
  c.k = k;
  c.group_size = gs;
  c.convrot_groupsize = g;
  const int64_t groups = k / gs;
  const TensorView& w = layer.tensor("weight");
  if (static_cast<int64_t>(w.data.size()) != n * (k / 2))
    fail("layer '{}': weight holds {} bytes, expected {}", layer.prefix, w.data.size(), n * (k / 2));
  c.codes = reinterpret_cast<const uint8_t*>(w.data.data());
  // s_rel: U8 bytes are E4M3 (ComfyUI views them as float8_e4m3fn).
  const TensorView& s_rel = layer.tensor("weight_s_rel");
  const bool bytes = s_rel.dtype == DType::U8 || s_rel.dtype == DType::F8_E4M3;
  if (!bytes && s_rel.dtype != DType::F32)
    fail("layer '{}': weight_s_rel must be F8_E4M3, U8 or F32, found {}", layer.prefix, dtype_name(s_rel.dtype));
  if (static_cast<int64_t>(s_rel.data.size()) != n * groups * (bytes ? 1 : 4))
    fail("layer '{}': weight_s_rel holds {} bytes, expected {} values", layer.prefix, s_rel.data.size(), n * groups);
  for (int64_t i = 0; i < n * groups; ++i) {
    float v;
    if (bytes) {
      v = e4m3_to_f32(static_cast<uint8_t>(s_rel.data[static_cast<size_t>(i)]));
    } else {
      std::memcpy(&v, s_rel.data.data() + 4 * i, 4);
    }
    if (!std::isfinite(v))
      fail("layer '{}': weight_s_rel[{}, {}] is not finite ({})", layer.prefix, i / groups, i % groups, v);
  }
  if (bytes) c.s_rel_e4m3 = reinterpret_cast<const uint8_t*>(s_rel.data.data());
  else c.s_rel_f32 = s_rel.data.data();
  if (const TensorView* cb = layer.find("weight_codebook")) {
    c.codebook = w4::floats(*cb);
    for (float v : c.codebook)
      if (!std::isfinite(v)) fail("layer '{}': weight_codebook holds a non-finite level", layer.prefix);
  }
  c.s_channel = w4::floats(layer.tensor("weight_s_channel"));
  return c;
}

W4a8Decoded w4a8_decode(const Layer& layer) {
  const W4a8Codes c = w4a8_codes(layer);
  W4a8Decoded d;
  d.n = c.n;
  d.k = c.k;
  d.group_size = c.group_size;
  d.convrot_groupsize = c.convrot_groupsize;
  const int64_t groups = c.k / c.group_size;
  const float* book = c.codebook.empty() ? nullptr : c.codebook.data();
  d.w8.resize(static_cast<size_t>(c.n * c.k));
  for (int64_t r = 0; r < c.n; ++r) {
    const auto* row = reinterpret_cast<const std::byte*>(c.codes + r * (c.k / 2));
    for (int64_t col = 0; col < c.k; ++col) {
      const int64_t i = r * groups + col / c.group_size;
      float s;
      if (c.s_rel_e4m3) {
        s = e4m3_to_f32(c.s_rel_e4m3[i]);
      } else {
        std::memcpy(&s, static_cast<const char*>(c.s_rel_f32) + 4 * i, 4);
      }
      d.w8[r * c.k + col] = w4a8_decode_code(w4::nibble(row, col), s, book);
    }
  }
  d.s_channel = c.s_channel;
  if (const TensorView* corr = layer.find("weight_correction")) d.correction = w4::floats(*corr);
  return d;
}

const FormatTraits& asym_w4a8_int8_format() {
  static const FormatTraits record{
      .name = "asym_w4a8_int8",
      .summary = "4-bit codes per group of 16 decoded to int8 (e4m3 scale, codebook), ConvRot INT8 GEMM",
      .defaults = {{std::string(kFullPrecision), false}, {"group_size", 16}, {"convrot_groupsize", 256}},
      .quantize_options = {{"mode", "codebook"}, {"scale_dtype", "e4m3"}},
      .tensors = {{"weight", true, {DType::I8}},
                  {"weight_s_rel", true, {DType::F8_E4M3, DType::U8, DType::F32}},
                  {"weight_s_channel", true, {DType::F32}},
                  {"weight_codebook", false, {DType::F32}},
                  {"weight_correction", false, {DType::F32, DType::F16, DType::BF16}}},
      .expected_rel_error = 0.074,  // measured 0.0729
      .validate = validate,
      .tp_input_unit = tp_input_unit,
      .shard = shard,
      .method = method,
      .dequantize = dequantize,
      .quantize = w4a8_quantize,
  };
  return record;
}

}  // namespace mixq::formats
