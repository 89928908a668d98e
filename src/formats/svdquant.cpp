// The svdquant_w4a4 record (docs/FORMATS.md §3.8, §5.3): validation of both
// layouts and both companion spellings, conversion to the natural layout, and
// the dequantized effective weight. quantize is null (needs calibration).
#include "formats/svdquant.hpp"

#include <cstring>

#include "formats/record_util.hpp"
#include "formats/shard_util.hpp"
#include "formats/w4_common.hpp"
#include "mixq/error.hpp"

namespace mixq::formats {
namespace {

constexpr int64_t G = kSvdquantGroup;

// Tile-packed when the marker says so; a 4-D weight without the key is taken
// as tile-packed too (validate() records a warning).
bool tile_packed(const Layer& layer) {
  if (auto it = layer.params.find("layout"); it != layer.params.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>() != kSvdquantTileLayout)
      fail("layer '{}': svdquant_w4a4 \"layout\" must be \"{}\" (or absent for the natural layout), found {}",
           layer.prefix, kSvdquantTileLayout, it->dump());
    return true;
  }
  const TensorView* w = layer.find("weight");
  return w && w->rank() == 4;
}

struct Geometry {
  int64_t n, k, rank;
  bool tile;
};

Geometry geometry(const Layer& layer) {
  const bool tile = tile_packed(layer);
  const TensorView& w = w4::require_dtype(layer, "weight", {DType::I8});
  int64_t n = 0, k = 0;
  if (tile) {
    if (w.rank() != 4 || w.shape[2] != 32 || w.shape[3] != 128 || w.shape[0] <= 0 || w.shape[1] <= 0)
      fail("layer '{}': tile-packed weight '{}' must have shape [N/128, K/64, 32, 128], found {}", layer.prefix,
           w.name, shape_str(w.shape));
    n = 128 * w.shape[0];
    k = G * w.shape[1];
  } else {
    if (w.rank() != 2 || w.shape[0] <= 0 || w.shape[1] <= 0)
      fail("layer '{}': weight '{}' must be a non-empty 2-D I8 [N, K/2] tensor, found shape {}", layer.prefix,
           w.name, shape_str(w.shape));
    n = w.shape[0];
    k = 2 * w.shape[1];
  }
  const TensorView& down = layer.tensor("weight_proj_down");
  if (down.rank() != 2)
    fail("layer '{}': proj_down '{}' must be 2-D [K, R], found {}", layer.prefix, down.name, shape_str(down.shape));
  return {n, k, down.shape[1], tile};
}

LogicalShape validate(Layer& layer) {
  const auto [n, k, rank, tile] = geometry(layer);
  if (tile && layer.params.find("layout") == layer.params.end())
    layer.warnings.push_back(fmt::format(
        "layer '{}': 4-D svdquant weight without \"layout\" in the marker; read as \"{}\"", layer.prefix,
        kSvdquantTileLayout));
  if (k % G != 0)
    fail("layer '{}': svdquant_w4a4 needs K % 64 == 0, found K = {} (2 x {} packed bytes)", layer.prefix, k, k / 2);
  if (layer.param_int("group_size") != G)
    fail("layer '{}': svdquant_w4a4 group_size is fixed at 64, found {}", layer.prefix,
         layer.param_int("group_size"));
  (void)layer.param_bool("act_unsigned");  // type check
  if (auto it = layer.params.find("lowrank_branch_input_basis"); it != layer.params.end())
    if (!it->is_string() || it->get<std::string>() != "raw")
      fail("layer '{}': lowrank_branch_input_basis {} is not supported (the low-rank branch reads the raw "
           "activation, \"raw\")",
           layer.prefix, it->dump());
  if (auto it = layer.params.find("proj_down_smooth_folded"); it != layer.params.end())
    if (!it->is_boolean() || !it->get<bool>())
      fail("layer '{}': proj_down_smooth_folded {} is not supported (proj_down must already include the "
           "smoothing, true)",
           layer.prefix, it->dump());
  const auto floats = {DType::BF16, DType::F16, DType::F32};
  const TensorView& scale = w4::require_dtype(layer, "weight_scale", floats);
  const TensorView& down = w4::require_dtype(layer, "weight_proj_down", floats);
  const TensorView& up = w4::require_dtype(layer, "weight_proj_up", floats);
  const TensorView& smooth = w4::require_dtype(layer, "weight_smooth_factor", floats);
  if (tile) {
    w4::require_shape(layer, scale, {n / 128, k / G, 128}, "tile-packed [N/128, K/64, 128]");
    w4::require_shape(layer, up, {n / 128, rank, 128}, "tile-packed [N/128, R, 128]");
  } else {
    w4::require_shape(layer, scale, {k / G, n}, "[K/64, N]");
    w4::require_shape(layer, up, {n, rank}, "[N, R]");
  }
  w4::require_shape(layer, down, {k, rank}, "[K, R]");
  w4::require_shape(layer, smooth, {k}, "[K]");
  if (const TensorView* b = layer.find("bias"); b && (b->rank() != 1 || b->shape[0] != n))
    fail("layer '{}': bias '{}' must have shape [{}], found {}", layer.prefix, b->name, n, shape_str(b->shape));
  return {n, k};
}

int64_t tp_input_unit(const Layer&) { return G; }

// Tile-packed weights can only be cut into whole 128-row tiles.
int64_t tp_output_unit(const Layer& layer) { return tile_packed(layer) ? 128 : 1; }

// The low-rank factors split with their side: a column split takes the rows of
// proj_up (and every rank keeps proj_down [K, R]), a K band the rows of
// proj_down and of the smooth factor (and every rank keeps proj_up), so the
// ranks' low-rank terms are the column blocks / the K-partial sums of the
// whole branch. Tile-packed tensors are cut along their tile axes.
void shard(const Layer& layer, ShardBuilder& b) {
  const ShardAxes down{"weight_proj_down", -1, 1, 0, 1}, smooth{"weight_smooth_factor", -1, 1, 0, 1};
  if (tile_packed(layer))  // [N/128, K/64, 32, 128], [N/128, K/64, 128], [N/128, R, 128]
    shard_by_axes(b, {{"weight", 0, 128, 1, G}, {"weight_scale", 0, 128, 1, G}, {"weight_proj_up", 0, 128}, down,
                      smooth});
  else  // [N, K/2], [K/64, N], [N, R]
    shard_by_axes(b, {{"weight", 0, 1, 1, 2}, {"weight_scale", 1, 1, 0, G}, {"weight_proj_up", 0}, down, smooth});
}

std::string method(const Layer& layer) {
  return layer.param_bool("full_precision_matrix_mult") ? "svdquant_w4a4:full_precision" : "svdquant_w4a4";
}

// W_eff[n,k] = qw·ws[k/64, n] / smooth[k] + Σ_r proj_down[k,r]·proj_up[n,r] (fp32).
void dequantize(const Layer& layer, Basis, float* out) {
  const SvdquantTensors t = svdquant_tensors(layer);
  const int64_t half = t.k / 2;
  for (int64_t r = 0; r < t.n; ++r)
    for (int64_t c = 0; c < t.k; ++c) {
      const uint8_t byte = t.weight[r * half + c / 2];
      const int q = w4::signed_nibble((c & 1) ? byte >> 4 : byte & 0x0F);
      float low_rank = 0;
      for (int64_t j = 0; j < t.rank; ++j) low_rank += t.proj_down[c * t.rank + j] * t.proj_up[r * t.rank + j];
      out[r * t.k + c] = static_cast<float>(q) * t.wscale[(c / G) * t.n + r] / t.smooth[c] + low_rank;
    }
}

}  // namespace

void svdquant_tile_weight(const uint8_t* from, uint8_t* to, int64_t n, int64_t k, bool to_natural) {
  const int64_t kg_count = k / G, half = k / 2;
  for (int64_t row = 0; row < n; ++row) {
    const int64_t t = row / 128, q = (row % 128) / 4, i = row % 4;
    for (int64_t kg = 0; kg < kg_count; ++kg) {
      const int64_t packed = ((t * kg_count + kg) * 32 + q) * 128 + 32 * i;
      const int64_t natural = row * half + 32 * kg;
      if (to_natural)
        std::memcpy(to + natural, from + packed, 32);
      else
        std::memcpy(to + packed, from + natural, 32);
    }
  }
}

void svdquant_tile_scales(const float* from, float* to, int64_t n, int64_t k, bool to_natural) {
  const int64_t groups = k / G;
  for (int64_t t = 0; t < n / 128; ++t)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t j = 0; j < 128; ++j) {
        const int64_t tiled = (t * groups + g) * 128 + j, natural = g * n + 128 * t + j;
        if (to_natural)
          to[natural] = from[tiled];
        else
          to[tiled] = from[natural];
      }
}

void svdquant_tile_proj_up(const float* from, float* to, int64_t n, int64_t rank, bool to_natural) {
  for (int64_t t = 0; t < n / 128; ++t)
    for (int64_t r = 0; r < rank; ++r)
      for (int64_t j = 0; j < 128; ++j) {
        const int64_t tiled = (t * rank + r) * 128 + j, natural = (128 * t + j) * rank + r;
        if (to_natural)
          to[natural] = from[tiled];
        else
          to[tiled] = from[natural];
      }
}

SvdquantTensors svdquant_tensors(const Layer& layer) {
  const auto [n, k, rank, tile] = geometry(layer);
  SvdquantTensors t;
  t.n = n;
  t.k = k;
  t.rank = rank;
  t.tile_packed = tile;
  t.act_unsigned = layer.param_bool("act_unsigned");
  const TensorView& w = layer.tensor("weight");
  if (static_cast<int64_t>(w.data.size()) != n * k / 2)
    fail("layer '{}': weight '{}' holds {} bytes, expected {}", layer.prefix, w.name, w.data.size(), n * k / 2);
  const auto* bytes = reinterpret_cast<const uint8_t*>(w.data.data());
  t.weight.resize(static_cast<size_t>(n * k / 2));
  std::vector<float> scale = w4::floats(layer.tensor("weight_scale"));
  std::vector<float> up = w4::floats(layer.tensor("weight_proj_up"));
  if (static_cast<int64_t>(scale.size()) != (k / G) * n || static_cast<int64_t>(up.size()) != n * rank)
    fail("layer '{}': svdquant scale / proj_up sizes do not match N = {}, K = {}, R = {}", layer.prefix, n, k, rank);
  if (tile) {
    svdquant_tile_weight(bytes, t.weight.data(), n, k, true);
    t.wscale.resize(scale.size());
    svdquant_tile_scales(scale.data(), t.wscale.data(), n, k, true);
    t.proj_up.resize(up.size());
    svdquant_tile_proj_up(up.data(), t.proj_up.data(), n, rank, true);
  } else {
    std::memcpy(t.weight.data(), bytes, t.weight.size());
    t.wscale = std::move(scale);
    t.proj_up = std::move(up);
  }
  t.proj_down = w4::floats(layer.tensor("weight_proj_down"));
  t.smooth = w4::floats(layer.tensor("weight_smooth_factor"));
  if (static_cast<int64_t>(t.proj_down.size()) != k * rank || static_cast<int64_t>(t.smooth.size()) != k)
    fail("layer '{}': svdquant proj_down / smooth_factor sizes do not match K = {}, R = {}", layer.prefix, k, rank);
  return t;
}

const FormatTraits& svdquant_w4a4_format() {
  const auto floats = std::vector<DType>{DType::BF16, DType::F16, DType::F32};
  static const FormatTraits record{
      .name = "svdquant_w4a4",
      .summary = "signed int4 residual per 64-group + low-rank branch + smoothing (nunchaku); no quantizer",
      .defaults = {{std::string(kFullPrecision), false}, {"act_unsigned", false}, {"group_size", 64}},
      .tensors = {{"weight", true, {DType::I8}},
                  {"weight_scale", true, floats},
                  {"weight_proj_down", true, floats, {"proj_down"}},
                  {"weight_proj_up", true, floats, {"proj_up"}},
                  {"weight_smooth_factor", true, floats, {"smooth_factor"}}},
      // No quantizer here: the signed int4 per-64-group error of Gaussian
      // weights (the residual when the low-rank branch takes little), 0.108.
      .expected_rel_error = 0.11,
      .validate = validate,
      .tp_input_unit = tp_input_unit,
      .tp_output_unit = tp_output_unit,
      .shard = shard,
      .method = method,
      .dequantize = dequantize,
      .quantize = nullptr,  // needs calibration data (DeepCompressor / nunchaku)
  };
  return record;
}

}  // namespace mixq::formats
