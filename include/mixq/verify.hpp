#pragma once
// `mixq verify`: checks every quantized layer of a checkpoint.
//
// Per layer, in order (a failed "valid" skips the rest):
//   valid   the format record's validator accepts dtypes, shapes, parameters
//   decode  the format dequantizes the layer and every value is finite
//   scales  companion tensors whose role names a scale ("*scale*",
//           "weight_s_*") are finite and not negative; per-tensor and per-row
//           scales are > 0 (block scales may be 0 for all-zero blocks).
//           U8-stored scales are left to the format's own check.
//   ...     the format record's optional `check` (block-scale layout etc.:
//           src/formats/block_checks.hpp)
//   error   with a source: ||W_deq - W|| / ||W|| over the logical [N, K]
//           (stored padding, if any, counts as error) <= the layer's limit:
//           VerifyOptions::max_rel_error when set, else kVerifyErrorFactor x
//           the format record's expected_rel_error (INT8 0.0375, FP8 E4M3 and
//           MXFP8 0.081, NVFP4 0.288, ...; `mixq verify --max-rel-error X`).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixq/format.hpp"

namespace mixq {

class Checkpoint;
struct Layer;

struct VerifiedLayer {
  std::string prefix;
  std::string format;
  nlohmann::json params = nlohmann::json::object();
  int64_t out_features = 0;
  int64_t in_features = 0;
  std::vector<LayerCheck> checks;
  std::optional<double> rel_error;  // with a source
  double max_rel_error = 0;         // the limit rel_error was held to
  bool ok = true;
};

// A layer's default limit is this many times its format's expected error
// (FormatTraits::expected_rel_error, measured on Gaussian weights): room for
// less friendly weight distributions, while an INT8 layer 40 % off (scale off
// by 1.4), swapped NVFP4 nibbles (~1.4) or a wrong scale layout (~1) fail.
// Heavy-tailed weights can exceed it with per-tensor INT8 scales (measured:
// 0.16-0.35 for Student-t(3) or 0.1 % of 30-sigma outliers; per-row 0.03-0.045;
// ConvRot 0.008): that is the error such a layer really has.
inline constexpr double kVerifyErrorFactor = 3.0;

struct VerifyOptions {
  // Overrides every layer's limit when set (`--max-rel-error`).
  std::optional<double> max_rel_error;
};

// The limit verify holds `format`'s layers to under `options`.
double verify_error_limit(const FormatTraits& format, const VerifyOptions& options);

struct VerifyReport {
  std::vector<VerifiedLayer> layers;  // quantized layers, by prefix
  size_t unquantized_layers = 0;
  std::vector<std::string> warnings;
  size_t failed = 0;
  bool ok() const { return failed == 0; }
};

VerifyReport verify_checkpoint(const Checkpoint& checkpoint, const Checkpoint* against,
                               const VerifyOptions& options = {});

// {"ok", "layers": [{"prefix", "format", "params", "out_features",
//  "in_features", "ok", "checks": [{"name", "ok", "detail"}], "rel_error",
//  "max_rel_error"}],
//  "summary": {"quantized_layers", "unquantized_layers", "failed"}, "warnings"}
nlohmann::json verify_report_json(const VerifyReport& report);

}  // namespace mixq
