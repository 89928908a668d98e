#pragma once
// Small helpers shared by the subcommands: aligned text tables, human-readable
// sizes, whether stdout is a terminal (progress output only then), and the
// escaping of hostile text (names, paths, messages) on its way out.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mixq::cli {

// Prints rows as left-aligned columns separated by two spaces; columns listed
// in `right_aligned` (0-based) are right-aligned (numbers). Every cell is
// escaped (escape_text): a name holding ESC or a newline cannot redraw the
// terminal or forge a row.
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::vector<size_t> right_aligned = {});
  void add(std::vector<std::string> row);
  std::string str() const;
  bool empty() const { return rows_.empty(); }

 private:
  std::vector<std::string> header_;
  std::vector<size_t> right_;
  std::vector<std::vector<std::string>> rows_;
};

// 1536 -> "1.5 KiB"; < 1024 -> "512 B".
std::string human_bytes(uint64_t bytes);
bool stdout_is_terminal();
// escape_text: one printable line, for every name, path or message printed.
std::string esc(std::string_view text);
// `value` as indented JSON on stdout; strings that are not valid UTF-8 (paths
// from the command line) get their bad bytes written as \xNN first.
void print_json(nlohmann::json value);
// "mixq: warning: <escaped message>" on stderr.
void print_warning(std::string_view message);

}  // namespace mixq::cli
