#include "formats/nvfp4_layout.hpp"

#include <algorithm>

#include "formats/record_util.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "numeric/swizzle.hpp"

namespace mixq::formats {
namespace {

// The code of element c of a packed row under the given nibble order.
inline uint8_t code_at(const uint8_t* row, int64_t c, bool high_first) {
  const uint8_t byte = row[c >> 1];
  const bool high = ((c & 1) == 0) == high_first;
  return high ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0x0F);
}

const char* layout_name(const Nvfp4Layout& layout) {
  return layout.swizzled_scales ? "swizzled (cuBLAS 128x4 tiles)" : "linear [rows, K/16]";
}

}  // namespace

int64_t nvfp4_scale_bytes(int64_t rows, int64_t k_padded, const Nvfp4Layout& layout) {
  const int64_t blocks = k_padded / 16;
  return layout.swizzled_scales ? swizzled_rows(rows) * swizzled_cols(blocks) : rows * blocks;
}

Nvfp4Geometry nvfp4_geometry(const Layer& layer, const Nvfp4Layout& layout) {
  const TensorView& w = layer.tensor("weight");
  if (w.dtype != DType::U8)
    fail("layer '{}': nvfp4 weight '{}' must be U8 (packed E2M1 codes), found {}", layer.prefix, w.name,
         dtype_name(w.dtype));
  require_matrix(layer, w, "U8 [N, K/2] of packed E2M1 codes");
  Nvfp4Geometry g;
  g.rows = w.shape[0];
  g.k_padded = 2 * w.shape[1];
  if (g.k_padded % 16 != 0)
    fail("layer '{}': nvfp4 weight '{}' holds K = 2 x {} = {} codes per row, which is not a multiple of the "
         "block size 16",
         layer.prefix, w.name, w.shape[1], g.k_padded);

  const TensorView& s = layer.tensor("weight_scale");
  if (s.dtype != DType::F8_E4M3 && s.dtype != DType::U8)
    fail("layer '{}': nvfp4 block scales '{}' must be F8_E4M3 or U8 (E4M3 bytes), found {}", layer.prefix, s.name,
         dtype_name(s.dtype));
  const int64_t want = nvfp4_scale_bytes(g.rows, g.k_padded, layout);
  if (s.rank() < 1 || s.rank() > 2 || s.numel() != want)
    fail("layer '{}': nvfp4 block scales '{}' must hold {} bytes for a {} layout of {} rows x {} blocks "
         "([{}, {}]), found shape {}",
         layer.prefix, s.name, want, layout_name(layout), g.rows, g.k_padded / 16,
         layout.swizzled_scales ? swizzled_rows(g.rows) : g.rows,
         layout.swizzled_scales ? swizzled_cols(g.k_padded / 16) : g.k_padded / 16, shape_str(s.shape));

  for (std::string_view role : {"weight_scale_2", "input_scale"}) {
    const TensorView* t = layer.find(role);
    if (!t) continue;
    if (t->dtype != DType::F32) fail("layer '{}': '{}' must be F32, found {}", layer.prefix, t->name, dtype_name(t->dtype));
    require_scalar(layer, role);
  }
  layer.tensor("weight_scale_2");  // required: throws naming it when absent

  g.out_features = g.rows;
  if (const TensorView* bias = layer.find("bias"); bias && bias->rank() == 1) {
    const int64_t n = bias->shape[0];
    if (n <= 0 || n > g.rows || roundup(n, 16) < g.rows)
      fail("layer '{}': bias '{}' has {} values, but the nvfp4 weight stores {} rows (N padded to 16)",
           layer.prefix, bias->name, n, g.rows);
    g.out_features = n;
    g.n_known = true;
  }
  g.in_features = g.k_padded;
  if (const TensorView* pqs = layer.find("pre_quant_scale")) {
    if (!is_float(pqs->dtype) || pqs->rank() != 1)
      fail("layer '{}': pre_quant_scale '{}' must be a 1-D BF16, F16 or F32 tensor [K], found {} {}", layer.prefix,
           pqs->name, dtype_name(pqs->dtype), shape_str(pqs->shape));
    const int64_t k = pqs->shape[0];
    if (k <= 0 || k > g.k_padded || roundup(k, 16) != g.k_padded)
      fail("layer '{}': pre_quant_scale '{}' has {} values, but the weight stores K = {} (K padded to 16)",
           layer.prefix, pqs->name, k, g.k_padded);
    g.in_features = k;
    g.k_known = true;
  }
  return g;
}

void nvfp4_dequantize(const Layer& layer, const Nvfp4Layout& layout, float* out) {
  const Nvfp4Geometry geo = nvfp4_geometry(layer, layout);
  const auto* codes = reinterpret_cast<const uint8_t*>(layer.tensor("weight").data.data());
  const auto* scales = reinterpret_cast<const uint8_t*>(layer.tensor("weight_scale").data.data());
  const float global = read_f32(layer.tensor("weight_scale_2"));
  const int64_t blocks = geo.k_padded / 16, row_bytes = geo.k_padded / 2;
  const int64_t n = geo.out_features, k = geo.in_features;
  for_rows(n, k, [&](int64_t begin, int64_t end) {
    std::vector<float> block_scale(static_cast<size_t>(blocks));
    for (int64_t r = begin; r < end; ++r) {
      // value = e2m1(code) · (g · e4m3(S)): the block factor in f32, then one product.
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t at = layout.swizzled_scales ? swizzled_offset(r, b, blocks) : r * blocks + b;
        block_scale[static_cast<size_t>(b)] = global * e4m3_to_f32(scales[at]);
      }
      const uint8_t* row = codes + r * row_bytes;
      float* dst = out + r * k;
      for (int64_t c = 0; c < k; ++c)
        dst[c] = e2m1_to_f32(code_at(row, c, layout.high_nibble_first)) * block_scale[static_cast<size_t>(c / 16)];
    }
  });
}

Nvfp4Bytes nvfp4_to_comfy_layout(const uint8_t* weight, const uint8_t* scales, int64_t rows, int64_t k_padded,
                                 const Nvfp4Layout& from) {
  if (rows < 0 || k_padded < 0 || k_padded % 16 != 0)
    fail("nvfp4 layout conversion: bad shape [{}, K = {}] (K must be a multiple of 16)", rows, k_padded);
  Nvfp4Bytes out;
  out.weight.assign(weight, weight + rows * (k_padded / 2));
  if (!from.high_nibble_first) swap_nibbles(out.weight.data(), out.weight.size());
  const int64_t blocks = k_padded / 16;
  if (from.swizzled_scales)
    out.scales.assign(scales, scales + swizzled_rows(rows) * swizzled_cols(blocks));
  else
    out.scales = swizzle_scales(scales, rows, blocks);
  return out;
}

}  // namespace mixq::formats
