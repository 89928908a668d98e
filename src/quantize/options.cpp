// Small parsers and formatters of the quantize command: marker dialects, byte
// sizes, and the marker JSON spelling.
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "mixq/error.hpp"
#include "mixq/quantize.hpp"

namespace mixq {

MarkerDialect parse_marker_dialect(std::string_view text) {
  if (text == "tensor") return MarkerDialect::tensor;
  if (text == "header") return MarkerDialect::header;
  if (text == "both") return MarkerDialect::both;
  throw UsageError(fmt::format("--markers: expected tensor, header or both, found '{}'", text));
}

uint64_t parse_byte_size(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) ||
                                  text[digits] == '.'))
    ++digits;
  std::string number(text.substr(0, digits));
  std::string unit(text.substr(digits));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double value = 0;
  try {
    size_t used = 0;
    value = number.empty() ? -1 : std::stod(number, &used);
    if (used != number.size()) value = -1;
  } catch (const std::exception&) {
    value = -1;
  }
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "KB") scale = 1e3;
  else if (unit == "M" || unit == "MB") scale = 1e6;
  else if (unit == "G" || unit == "GB") scale = 1e9;
  else if (unit == "T" || unit == "TB") scale = 1e12;
  else if (unit == "KIB") scale = 1024.0;
  else if (unit == "MIB") scale = 1024.0 * 1024;
  else if (unit == "GIB") scale = 1024.0 * 1024 * 1024;
  else if (unit == "TIB") scale = 1024.0 * 1024 * 1024 * 1024;
  double bytes = value * scale;
  if (value < 0 || scale == 0 || !(bytes >= 1) || bytes > 1.8e19)
    throw UsageError(fmt::format(
        "size '{}': expected a positive number of bytes with an optional unit (KB, MB, GB, "
        "KiB, MiB, GiB), e.g. 2GB",
        text));
  return static_cast<uint64_t>(std::llround(bytes));
}

}  // namespace mixq
