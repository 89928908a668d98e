#pragma once
// Parsing and validation of one safetensors file's header.
//
// Layout: [u64 little-endian N][N bytes of JSON][data section]. The JSON maps
// tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the data section) plus an optional "__metadata__" string map.
#include <cstdint>
#include <string>
#include <vector>

#include "io/mapped_file.hpp"
#include "mixq/checkpoint.hpp"
#include "mixq/dtype.hpp"
#include "mixq/tensor.hpp"

namespace mixq {

inline constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // 100 MiB

struct HeaderEntry {
  std::string name;
  DType dtype = DType::U8;
  Shape shape;
  uint64_t begin = 0;  // relative to the data section
  uint64_t end = 0;
};

struct ParsedHeader {
  FileInfo info;                     // tensors/trailing_bytes/metadata filled in
  uint64_t data_start = 0;           // 8 + header length
  std::vector<HeaderEntry> entries;  // sorted by name
  // Gaps between tensors' data, each naming the tensors around it (trailing
  // bytes are reported by the caller from info.trailing_bytes).
  std::vector<std::string> warnings;
};

// Reads the header with MappedFile::read (the mapping itself is not touched)
// and validates every rule of the format; throws Error naming the file, the
// tensor and what was expected vs found.
ParsedHeader read_safetensors_header(const MappedFile& file);

}  // namespace mixq
