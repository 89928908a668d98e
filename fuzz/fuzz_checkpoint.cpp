// libFuzzer target: arbitrary bytes as one safetensors file, through the
// whole read-only path of `mixq inspect --json`:
//   Checkpoint::from_bytes -> collect_markers -> group_layers -> inspect_report.
// mixq::Error is the only acceptable way to reject input; anything else
// (crash, sanitizer report, other exception, leak) is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/inspect.hpp"
#include "mixq/layer.hpp"
#include "mixq/marker.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto checkpoint = mixq::Checkpoint::from_bytes(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz.safetensors");
    auto markers = mixq::collect_markers(checkpoint);
    auto layers = mixq::group_layers(checkpoint, markers);
    auto report = mixq::inspect_report(checkpoint, markers, layers);
    volatile size_t length = report.dump().size();
    (void)length;
  } catch (const mixq::Error&) {
  }
  return 0;
}
