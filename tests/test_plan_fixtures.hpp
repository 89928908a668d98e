#pragma once
// Small checkpoints for the plan, profile and TP tests: quantized layers made by
// the format records' own quantizers, markers as tensors or in the header,
// hand-made tensors for invalid cases.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/numeric.hpp"
#include "mixq/plan.hpp"
#include "support/test_support.hpp"

namespace mixq::testing {

enum class Dialect { tensor, header, both, none };

class PlanFixture {
 public:
  // A layer quantized by `format`'s record from random weights; the marker is
  // the record's canonical one with `marker_extra` merged over it.
  PlanFixture& quantized(const std::string& prefix, const std::string& format, int64_t n, int64_t k,
                         const nlohmann::json& params = nlohmann::json::object(),
                         Dialect dialect = Dialect::tensor,
                         const nlohmann::json& marker_extra = nlohmann::json::object()) {
    const FormatTraits* record = find_format(format);
    if (!record || !record->quantize) throw Error("test fixture: no quantizer for " + format);
    const std::vector<float> w = random_floats(static_cast<size_t>(n * k), seed_++, 0.05f);
    QuantizedLayer q = record->quantize(w.data(), n, k, apply_defaults(*record, params));
    for (OwnedTensor& t : q.tensors) {
      t.name = prefix + "." + t.name;
      builder_.add(std::move(t));
    }
    nlohmann::json marker = q.marker;
    for (const auto& [key, value] : marker_extra.items()) marker[key] = value;
    return mark(prefix, marker, dialect);
  }
  // A float layer [n, k] (unquantized), optionally with a bias.
  PlanFixture& dense(const std::string& prefix, int64_t n, int64_t k, DType dtype = DType::BF16,
                     bool bias = false) {
    builder_.add_float(prefix + ".weight", dtype, {n, k}, random_floats(static_cast<size_t>(n * k), seed_++));
    if (bias) builder_.add_float(prefix + ".bias", dtype, {n}, random_floats(static_cast<size_t>(n), seed_++));
    return *this;
  }
  // A hand-made tensor of zero bytes.
  PlanFixture& zeros(const std::string& name, DType dtype, const Shape& shape) {
    builder_.add(name, dtype, shape, std::vector<std::byte>(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype)));
    return *this;
  }
  PlanFixture& f32(const std::string& name, const Shape& shape, float value) {
    builder_.add_float(name, DType::F32, shape, std::vector<float>(static_cast<size_t>(shape_numel(shape)), value));
    return *this;
  }
  // A marker for `prefix` in the given dialect (verbatim JSON text for tensors).
  PlanFixture& mark(const std::string& prefix, const nlohmann::json& marker, Dialect dialect = Dialect::tensor) {
    if (dialect == Dialect::tensor || dialect == Dialect::both) builder_.add_marker(prefix, marker.dump());
    if (dialect == Dialect::header || dialect == Dialect::both) header_layers_[prefix] = marker;
    return *this;
  }
  PlanFixture& mark_text(const std::string& prefix, const std::string& text) {
    builder_.add_marker(prefix, text);
    return *this;
  }
  PlanFixture& metadata(const std::string& key, const std::string& value) {
    builder_.metadata(key, value);
    return *this;
  }
  // Writes the file and returns its path.
  std::string write(const std::string& name = "model") {
    if (!header_layers_.empty())
      builder_.metadata("_quantization_metadata",
                        nlohmann::json{{"format_version", "1.0"}, {"layers", header_layers_}}.dump());
    const auto path = temp_dir("plan") / (name + ".safetensors");
    builder_.write(path);
    return path.string();
  }
  Checkpoint open() { return Checkpoint::open(write()); }

 private:
  CheckpointBuilder builder_;
  nlohmann::json header_layers_ = nlohmann::json::object();
  uint64_t seed_ = 1;
};

inline Plan plan_of(const Checkpoint& checkpoint, const std::string& profile, int tp = 1) {
  return Plan::build(checkpoint, PlanOptions{profile, tp});
}

inline const LayerPlan& layer_of(const Plan& plan, const std::string& prefix) {
  const LayerPlan* layer = plan.find(prefix);
  if (!layer) throw Error("test: no layer " + prefix);
  return *layer;
}

// Asserts a rejection whose message contains every fragment.
inline void expect_rejected(const Plan& plan, std::initializer_list<std::string_view> fragments) {
  EXPECT_FALSE(plan.accepted());
  for (std::string_view f : fragments)
    EXPECT_NE(plan.error().find(f), std::string::npos) << "missing '" << f << "' in: " << plan.error();
}

inline void expect_accepted(const Plan& plan) { EXPECT_TRUE(plan.accepted()) << plan.error(); }

}  // namespace mixq::testing
