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
//           (stored padding, if any, counts as error) <= max_rel_error
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
  bool ok = true;
};

struct VerifyOptions {
  // A relative error above this fails the layer (swapped nibbles or a wrong
  // scale layout give ~1 or more; 4-bit formats stay near 0.1).
  double max_rel_error = 0.5;
};

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
//  "in_features", "ok", "checks": [{"name", "ok", "detail"}], "rel_error"}],
//  "summary": {"quantized_layers", "unquantized_layers", "failed"}, "warnings"}
nlohmann::json verify_report_json(const VerifyReport& report);

}  // namespace mixq
