// The table of formats: one entry per record, marker formats first,
// "unquantized" last. Adding a format = its file + one line here.
#include <array>

#include "formats/awq.hpp"
#include "formats/records.hpp"
#include "formats/svdquant.hpp"
#include "formats/w4a8.hpp"
#include "mixq/format.hpp"

namespace mixq {

std::span<const FormatTraits* const> all_formats() {
  static const std::array<const FormatTraits*, 10> table = {
      &formats::float8_e4m3fn_format(),   &formats::float8_e5m2_format(), &formats::nvfp4_format(),
      &formats::mxfp8_format(),           &formats::int8_tensorwise_format(),
      &formats::convrot_w4a4_format(),
      &formats::asym_w4a8_int8_format(),  // w4a8.cpp
      &formats::awq_w4a16_format(),       // awq.cpp
      &formats::svdquant_w4a4_format(),   // svdquant.cpp
      &formats::unquantized_record(),
  };
  return table;
}

const FormatTraits* find_format(std::string_view name) {
  for (const FormatTraits* format : all_formats())
    if (format->from_marker && format->name == name) return format;
  return nullptr;
}

const FormatTraits& unquantized_format() { return formats::unquantized_record(); }

nlohmann::json apply_defaults(const FormatTraits& format, const nlohmann::json& params) {
  nlohmann::json out = format.defaults.is_object() ? format.defaults : nlohmann::json::object();
  if (params.is_object())
    for (const auto& [key, value] : params.items())
      if (key != "format") out[key] = value;
  return out;
}

}  // namespace mixq
