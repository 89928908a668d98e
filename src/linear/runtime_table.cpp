// The runtime table's rows. Adding a format = its record under src/formats/,
// its factory here, one row each.
#include "linear/runtime_table.hpp"

#include <array>

namespace mixq::linear {

std::span<const FormatRuntime> runtime_table() {
  static const std::array<FormatRuntime, 10> table = {{
      {"float8_e4m3fn", make_fp8},
      {"float8_e5m2", make_fp8},
      {"nvfp4", make_nvfp4},
      {"mxfp8", make_mxfp8},
      {"int8_tensorwise", make_int8},
      {"convrot_w4a4", make_convrot_w4a4},
      {"asym_w4a8_int8", make_asym_w4a8_int8},
      {"awq_w4a16", make_awq_w4a16},
      {"svdquant_w4a4", make_svdquant_w4a4},
      {"unquantized", make_unquantized},
  }};
  return table;
}

const FormatRuntime* find_runtime(std::string_view format) {
  for (const FormatRuntime& row : runtime_table())
    if (row.format == format) return &row;
  return nullptr;
}

}  // namespace mixq::linear
