// The quantize report as JSON, shared by `mixq quantize --json` and Python.
#include "mixq/quantize.hpp"

#include "mixq/escape.hpp"

namespace mixq {

nlohmann::json quantize_report_json(const QuantizeReport& report) {
  nlohmann::json layers = nlohmann::json::array();
  for (const QuantizedLayerReport& l : report.layers)
    layers.push_back({{"prefix", l.prefix},
                      {"format", l.format},
                      {"marker", l.marker},
                      {"out_features", l.out_features},
                      {"in_features", l.in_features},
                      {"source_bytes", l.source_bytes},
                      {"output_bytes", l.output_bytes},
                      {"fell_back", l.fell_back},
                      {"reason", l.fell_back ? nlohmann::json(l.reason) : nlohmann::json()}});
  nlohmann::json out = {{"files", report.files},
          {"layers", layers},
          {"source_bytes", report.source_bytes},
          {"output_bytes", report.output_bytes},
          {"tensors", report.tensors_written},
          {"seconds", report.seconds},
          {"warnings", report.warnings}};
  make_json_utf8(out);  // paths come from the command line
  return out;
}

}  // namespace mixq
