#pragma once
// The table of formats: bytes on disk. Every quantized format is described
// once, by a FormatTraits record in its own file under src/formats/; inspect,
// plan, dequantize, quantize and verify read this table and never switch on
// format names. How a format runs (its Linear and kernels) is a second table,
// in the runtime layer (src/linear/runtime_table.cpp), keyed by format name;
// this layer never includes the runtime.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixq/dtype.hpp"
#include "mixq/tensor.hpp"

namespace mixq {

struct Layer;
class ShardBuilder;  // src/formats/shard_util.hpp

enum class Basis { original, stored };  // undo ConvRot, or keep the rotated basis

struct LogicalShape {
  int64_t out_features = 0;
  int64_t in_features = 0;
  // > 0 when in_features is the stored K, padded to a multiple of this unit,
  // because nothing in the layer gives the logical K (NVFP4 16, MXFP8 32).
  int64_t k_pad_unit = 0;
};

// One tensor a format stores next to (or as) its weight, by role: the suffix
// after "<prefix>." ("weight", "weight_scale", "input_scale", ...).
struct CompanionSpec {
  std::string_view role;
  bool required = true;
  std::vector<DType> dtypes;                  // accepted on-disk dtypes
  std::vector<std::string_view> aliases = {}; // other spellings of the suffix
};

// What a quantizer produces for one layer: tensors named by role, and the
// marker to write (with "format" and the canonical parameters).
struct QuantizedLayer {
  std::vector<OwnedTensor> tensors;
  nlohmann::json marker;
};

// One plausibility finding about a stored layer, reported by `mixq verify`.
struct LayerCheck {
  std::string name;    // "block_scales", ...
  bool ok = true;
  std::string detail;  // what was found, and what was expected
};

struct FormatTraits {
  std::string_view name;     // the marker's "format" string
  bool from_marker = true;   // false only for the "unquantized" record
  std::string_view summary;  // one line for help texts
  // Marker parameters the format reads, with their defaults.
  nlohmann::json defaults = nlohmann::json::object();
  // Parameters only the quantizer reads (never written to or read from a
  // marker), with their defaults, e.g. int8_tensorwise "per_channel". Recipes
  // may set them next to the marker parameters of `defaults`.
  nlohmann::json quantize_options = nlohmann::json::object();
  // "weight" first. "bias" is implicit for every format.
  std::vector<CompanionSpec> tensors;
  // The relative weight error ||W_deq - W|| / ||W|| a correct layer of this
  // format shows on Gaussian weights (measured with the format's quantizer at
  // its coarsest setting, [3072, 768]; the value in each record's comment).
  // `mixq verify --against` fails a layer above 3x this (kVerifyErrorFactor in
  // mixq/verify.hpp) unless --max-rel-error overrides it. 0: not verified.
  double expected_rel_error = 0.0;

  // Checks dtypes, shapes and parameters of a bound layer and returns its
  // logical [out, in]; may append to layer.warnings. Throws Error naming the
  // layer, the tensor, what was expected and what was found.
  LogicalShape (*validate)(Layer& layer) = nullptr;
  // A row-parallel split of the input features into tp parts must keep
  // (K / tp) % unit == 0 (1 = any split).
  int64_t (*tp_input_unit)(const Layer& layer) = nullptr;
  // A column-parallel split must give each rank a multiple of this many rows
  // of every logical part, so that the shard can be stored in the format's
  // layout (1 = any split; e.g. whole 128-row tiles). Null: 1.
  int64_t (*tp_output_unit)(const Layer& layer) = nullptr;
  // The shard rule: puts one rank's share of a valid layer into `out`
  // (rows of every part for a column split, a band of K for a row split;
  // mixq/shard.hpp). Called only for admitted splits with degree > 1.
  void (*shard)(const Layer& layer, ShardBuilder& out) = nullptr;
  // The method that runs the layer, e.g. "int8_convrot", "nvfp4:full_precision".
  std::string (*method)(const Layer& layer) = nullptr;
  // Writes the f32 weight [out_features, in_features] (logical, unpadded).
  void (*dequantize)(const Layer& layer, Basis basis, float* out) = nullptr;
  // Quantizes an f32 weight [n, k] with the given marker parameters (defaults
  // applied by the caller). Null when the format needs calibration data.
  QuantizedLayer (*quantize)(const float* weight, int64_t n, int64_t k,
                             const nlohmann::json& params) = nullptr;
  // Optional format-specific checks for `mixq verify`, beyond validate and
  // dequantize (e.g. block-scale layout plausibility; see mixq/verify.hpp for
  // ready-made ones). Null: none.
  std::vector<LayerCheck> (*check)(const Layer& layer) = nullptr;
};

// Every record, marker formats first, "unquantized" last.
std::span<const FormatTraits* const> all_formats();
// nullptr for an unknown name. Never returns the "unquantized" record.
const FormatTraits* find_format(std::string_view name);
const FormatTraits& unquantized_format();

// The marker parameters with the record's defaults applied (marker wins).
nlohmann::json apply_defaults(const FormatTraits& format, const nlohmann::json& params);

}  // namespace mixq
