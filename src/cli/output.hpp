#pragma once
// Small helpers shared by the subcommands: aligned text tables, human-readable
// sizes, and whether stdout is a terminal (progress output only then).
#include <cstdint>
#include <string>
#include <vector>

namespace mixq::cli {

// Prints rows as left-aligned columns separated by two spaces; columns listed
// in `right_aligned` (0-based) are right-aligned (numbers).
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

}  // namespace mixq::cli
