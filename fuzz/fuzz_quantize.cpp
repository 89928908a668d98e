// libFuzzer target: arbitrary bytes as a float source checkpoint (in
// memory), every candidate layer quantized to every format that quantizes
// (and the parameters that change its arithmetic: ConvRot, per-tensor INT8,
// the asym_w4a8_int8 modes) the way `mixq quantize` does one layer
// (quantize_layer: the finite and range checks, the format's quantizer, the
// self-validation of what it wrote). A refusal is LayerResult::error;
// mixq::Error is the only acceptable way to reject the file; a crash, a
// sanitizer report or any other exception is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/layer.hpp"
#include "mixq/marker.hpp"
#include "mixq/recipe.hpp"
#include "quantize/stages.hpp"

namespace {

// Layers past this many weights are skipped, so that one input stays a few
// milliseconds under the sanitizers.
constexpr int64_t kMaxWeights = int64_t{1} << 15;

const std::vector<mixq::RecipeRule>& rules() {
  static const std::vector<mixq::RecipeRule> all = [] {
    std::vector<mixq::RecipeRule> r;
    for (const char* text :
         {"*=float8_e4m3fn", "*=float8_e5m2", "*=nvfp4", "*=mxfp8", "*=int8_tensorwise",
          "*=int8_tensorwise:convrot=true", "*=int8_tensorwise:per_channel=false", "*=convrot_w4a4",
          "*=asym_w4a8_int8", "*=asym_w4a8_int8:mode=uniform", "*=asym_w4a8_int8:mode=asymmetric",
          "*=awq_w4a16"})
      r.push_back(mixq::parse_rule(text));
    return r;
  }();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto checkpoint = mixq::Checkpoint::from_bytes(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz.safetensors");
    const auto layers = mixq::group_layers(checkpoint, mixq::collect_markers(checkpoint));
    for (const mixq::Layer& layer : layers.layers) {
      if (!mixq::quantize::is_candidate(layer)) continue;
      const mixq::TensorView& weight = layer.tensor("weight");
      if (weight.shape[0] * weight.shape[1] > kMaxWeights) continue;
      for (const mixq::RecipeRule& rule : rules()) (void)mixq::quantize::quantize_layer(layer, rule);
    }
  } catch (const mixq::Error&) {
  }
  return 0;
}
