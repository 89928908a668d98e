#include "cli/output.hpp"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "mixq/escape.hpp"

namespace mixq::cli {

Table::Table(std::vector<std::string> header, std::vector<size_t> right_aligned)
    : header_(std::move(header)), right_(std::move(right_aligned)) {}

void Table::add(std::vector<std::string> row) {
  row.resize(header_.size());
  for (std::string& cell : row) cell = escape_text(cell);
  rows_.push_back(std::move(row));
}

std::string Table::str() const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  auto format_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      const bool right = std::find(right_.begin(), right_.end(), i) != right_.end();
      const bool last = i + 1 == row.size();
      if (right)
        line += fmt::format("{:>{}}", row[i], width[i]);
      else
        line += last ? row[i] : fmt::format("{:<{}}", row[i], width[i]);
      if (!last) line += "  ";
    }
    return line + "\n";
  };
  std::string out = format_row(header_);
  for (const auto& row : rows_) out += format_row(row);
  return out;
}

std::string human_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

std::string esc(std::string_view text) { return escape_text(text); }

void print_json(nlohmann::json value) {
  make_json_utf8(value);
  std::cout << value.dump(2) << "\n";
}

void print_warning(std::string_view message) { std::cerr << "mixq: warning: " << escape_text(message) << "\n"; }

}  // namespace mixq::cli
