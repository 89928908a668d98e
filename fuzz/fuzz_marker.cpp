// libFuzzer target: arbitrary bytes as one layer's Comfy marker, through
// marker collection, layer binding, the inspect report and every plan
// profile. The first byte picks the dialect: even, a `.comfy_quant` U8
// tensor holding the rest; odd, the rest as the layer's entry in the header's
// _quantization_metadata (bytes that are not UTF-8 are replaced, as a JSON
// string must be valid). The layer has an F8_E4M3 weight and the companion
// tensors of several formats, so that formats and their validators run.
// mixq::Error is the only acceptable way to reject input.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/inspect.hpp"
#include "mixq/plan.hpp"

namespace {

// A safetensors image: x.weight F8_E4M3 [4, 32], x.weight_scale F32 [], x.input_scale F32 [],
// x.weight_scale_2 F32 [], x.bias F32 [4], plus the marker tensor when given.
std::string image(const std::string& marker, bool as_tensor, const std::string& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  auto add = [&](const std::string& name, const char* dtype, nlohmann::json shape, std::string bytes) {
    header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data += bytes;
  };
  std::string codes(128, '\0');
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<char>((i * 37 + 11) & 0x7F);
  const std::string half("\x00\x00\x00\x3f", 4);
  add("x.weight", "F8_E4M3", {4, 32}, codes);
  add("x.weight_scale", "F32", nlohmann::json::array(), half);
  add("x.weight_scale_2", "F32", nlohmann::json::array(), half);
  add("x.input_scale", "F32", nlohmann::json::array(), half);
  add("x.bias", "F32", {4}, std::string(16, '\0'));
  if (as_tensor) add("x.comfy_quant", "U8", {marker.size()}, marker);
  if (!metadata.empty()) header["__metadata__"] = {{"_quantization_metadata", metadata}};
  const std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return out + text + data;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool as_tensor = data[0] % 2 == 0;
  const std::string marker(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string metadata = as_tensor ? std::string() : R"({"layers": {"x": )" + marker + "}}";
  const std::string bytes = image(marker, as_tensor, metadata);
  try {
    auto checkpoint = mixq::Checkpoint::from_bytes(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()), "fuzz.safetensors");
    auto report = mixq::inspect_report(checkpoint);
    volatile size_t length = report.dump().size();
    (void)length;
    for (const char* profile : {"comfyui", "sglang", "sglang-minimax-h3"}) {
      auto plan = mixq::Plan::build(checkpoint, mixq::PlanOptions{profile, 2});
      volatile size_t plan_length = plan.to_json().dump().size();
      (void)plan_length;
    }
  } catch (const mixq::Error&) {
  }
  return 0;
}
