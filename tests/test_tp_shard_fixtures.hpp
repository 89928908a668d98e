#pragma once
// Generated checkpoints for the tensor-parallel shard tests: one checkpoint per
// format case holding one layer of every split kind, named as MiniMax-H3 names
// them (fused QKV x3, fused fc1 x2, row-parallel out_proj and fc2, plain
// column layers with and without a bias). Shapes are chosen so that N or K is
// not a multiple of 128 (swizzled scale tiles straddle shard edges), N of the
// row layer is not a multiple of 16 (NVFP4 / MXFP8 pad it), and every degree
// 1, 2, 4, 8 is admitted by some layers and refused by others.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixq/format.hpp"
#include "mixq/numeric.hpp"
#include "support/test_support.hpp"
#include "test_format_svdquant_helpers.hpp"

namespace mixq::testing {

struct TpLayer {
  const char* prefix;
  int64_t n, k;
  bool bias;
};

// parts x rows-per-part, K: see the header comment for what each one covers.
inline const std::vector<TpLayer>& tp_layers() {
  static const std::vector<TpLayer> layers = {
      {"blocks.0.attn.qkv_proj", 3 * 96, 320, true},        // column x3
      {"blocks.0.mlp.fc1", 2 * 512, 320, true},             // column x2
      {"blocks.0.attn.out_proj", 200, 768, true},           // row; N % 16 != 0
      {"blocks.0.mlp.fc2", 256, 640, true},                 // row
      {"blocks.0.adaln_proj.linear", 352, 192, false},      // column, no bias
      {"final_layer.linear", 512, 128, true},               // column: whole 128-row tiles at d 2, 4
  };
  return layers;
}

// How a format's activations meet a row split. `local`: quantized per element
// or per block inside one rank's K band (float, FP8 with a static or unit
// scale, MXFP8 per 32, NVFP4 with a static global scale, SVDQuant per 64), so
// the ranks see the unsharded layer's quantized activations and the summed
// result differs only by float32 summation order. Otherwise the quantization
// scale spans K (per row or per tensor), so each rank quantizes its own slice
// with its own scale, as SGLang's row-parallel layers do.
struct TpCase {
  const char* name;
  const char* format;  // "" unquantized; "svdquant_w4a4" hand-built
  nlohmann::json params;
  bool local;
  // Bound on ||y_tp - y|| / ||y - y_float|| for non-local cases: the row-split
  // difference relative to the unsharded layer's own error against a float
  // linear over its dequantized weight (<= 3x the measured value, given next
  // to it).
  double max_row_ratio = 0;
  bool input_scale = false;  // add a static F32 input_scale (NVFP4)
};

inline const std::vector<TpCase>& tp_cases() {
  using nlohmann::json;
  static const std::vector<TpCase> cases = {
      {"unquantized", "", json::object(), true},
      {"fp8_e4m3", "float8_e4m3fn", json::object(), true},
      {"fp8_e5m2_static", "float8_e5m2", {{"input_scale", 0.5}}, true},
      {"nvfp4_dynamic", "nvfp4", json::object(), false, 2.7},  // measured 0.905
      {"nvfp4_static", "nvfp4", json::object(), true, 0, true},
      {"mxfp8", "mxfp8", json::object(), true},
      {"int8_convrot", "int8_tensorwise", {{"convrot", true}, {"convrot_groupsize", 64}}, false, 3.2},  // 1.07
      {"int8_rowwise", "int8_tensorwise", json::object(), false, 3.5},  // 1.19
      {"w4a4_int4", "convrot_w4a4", {{"convrot_groupsize", 64}}, false, 3.1},  // 1.03
      {"w4a4_int8", "convrot_w4a4", {{"convrot_groupsize", 16}, {"linear_dtype", "int8"}}, false, 3.4},  // 1.14
      {"w4a8", "asym_w4a8_int8", {{"convrot_groupsize", 64}}, false, 3.2},  // 1.07
      {"awq", "awq_w4a16", {{"group_size", 64}}, true},
      {"svdquant", "svdquant_w4a4", json::object(), true},
  };
  return cases;
}

// Writes the case's checkpoint (every layer of tp_layers()) and returns its path.
inline std::filesystem::path write_tp_checkpoint(const TpCase& c, const std::filesystem::path& dir) {
  CheckpointBuilder b;
  uint64_t seed = 7;
  const std::string format = c.format;
  for (const TpLayer& l : tp_layers()) {
    const std::string prefix = l.prefix;
    const std::vector<float> w = random_floats(static_cast<size_t>(l.n * l.k), seed++, 0.05f);
    const std::vector<float> bias = random_floats(static_cast<size_t>(l.n), seed++, 0.1f);
    if (format.empty()) {
      b.add_float(prefix + ".weight", DType::BF16, {l.n, l.k}, w);
    } else if (format == "svdquant_w4a4") {
      // Tile-packed where N allows it (whole 128-row tiles), natural otherwise.
      const bool tile = l.n % 128 == 0;
      for (OwnedTensor& t : svd_tensors(random_svd(l.n, l.k, 4, seed++, false), tile)) {
        t.name = prefix + "." + t.name;
        b.add(std::move(t));
      }
      b.add_marker(prefix, tile ? R"({"format": "svdquant_w4a4", "layout": "kitchen_tile_packed_w4a4"})"
                                : R"({"format": "svdquant_w4a4"})");
    } else {
      const FormatTraits* f = find_format(format);
      QuantizedLayer q = f->quantize(w.data(), l.n, l.k, apply_defaults(*f, c.params));
      for (OwnedTensor& t : q.tensors) {
        t.name = prefix + "." + t.name;
        b.add(std::move(t));
      }
      b.add_marker(prefix, q.marker.dump());
      if (c.input_scale) b.add_float(prefix + ".input_scale", DType::F32, {}, {0.004f});
    }
    if (l.bias) b.add_float(prefix + ".bias", DType::F32, {l.n}, bias);
  }
  // Tensors that are not linear layers travel whole to every rank.
  b.add_float("blocks.0.norm1.weight", DType::F32, {320}, random_floats(320, seed++));
  const auto path = dir / (std::string(c.name) + ".safetensors");
  b.write(path);
  return path;
}

}  // namespace mixq::testing
