#include "io/safetensors_header.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "io/strict_json.hpp"
#include "mixq/error.hpp"

namespace mixq {
namespace {

using nlohmann::json;

// A JSON value for an error message, cut short: hostile headers can hold
// megabytes in one value.
std::string brief(const json& value) {
  std::string text = value.dump();
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

std::string supported_dtypes() {
  std::string list;
  for (size_t i = 0; i < kDTypeCount; ++i) {
    if (i) list += ", ";
    list += dtype_name(static_cast<DType>(i));
  }
  return list;
}

// Reads a JSON value that must be a non-negative integer fitting in int64.
uint64_t non_negative_int(const json& value, const std::string& where, const char* what) {
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("{}: {} {} is too large (at most 2^63-1)", where, what, v);
    return v;
  }
  if (value.is_number_integer())
    fail("{}: {} must be a non-negative integer, found {}", where, what, brief(value));
  fail("{}: {} must be a non-negative integer, found {} {}", where, what, value.type_name(),
       brief(value));
}

std::map<std::string, std::string> parse_metadata(const json& value, const std::string& path) {
  if (!value.is_object())
    fail("{}: __metadata__ must be an object of strings, found {}", path, value.type_name());
  std::map<std::string, std::string> metadata;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string())
      fail("{}: __metadata__ key '{}' must hold a string, found {} {}", path, key, v.type_name(),
           brief(v));
    metadata.emplace(key, v.get<std::string>());
  }
  return metadata;
}

HeaderEntry parse_entry(const std::string& name, const json& value, uint64_t data_size,
                        const std::string& path) {
  const std::string where = fmt::format("{}: tensor '{}'", path, name);
  if (name.empty()) fail("{}: a tensor has an empty name", path);
  // A NUL ends the name for every C API that sees it: two different names
  // could look alike downstream.
  if (name.find('\0') != std::string::npos) fail("{}: the tensor name holds a NUL byte", where);
  if (!value.is_object())
    fail("{}: entry must be an object with dtype, shape and data_offsets, found {}", where,
         value.type_name());
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!value.contains(key)) fail("{}: missing '{}'", where, key);

  HeaderEntry entry;
  entry.name = name;
  const json& dtype = value["dtype"];
  if (!dtype.is_string()) fail("{}: dtype must be a string, found {}", where, brief(dtype));
  auto parsed = parse_dtype(dtype.get_ref<const std::string&>());
  if (!parsed)
    fail("{}: unsupported dtype '{}' (supported: {})", where, dtype.get_ref<const std::string&>(),
         supported_dtypes());
  entry.dtype = *parsed;

  const json& shape = value["shape"];
  if (!shape.is_array()) fail("{}: shape must be an array, found {}", where, brief(shape));
  int64_t numel = 1;
  for (const json& dim : shape) {
    auto d = static_cast<int64_t>(non_negative_int(dim, where, "shape dimension"));
    entry.shape.push_back(d);
    if (__builtin_mul_overflow(numel, d, &numel))
      fail("{}: shape {} has more elements than fit in 64 bits", where, brief(shape));
  }
  int64_t expected_bytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<int64_t>(dtype_size(entry.dtype)), &expected_bytes))
    fail("{}: shape {} of {} is larger than 2^63 bytes", where, brief(shape),
         dtype_name(entry.dtype));

  const json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    fail("{}: data_offsets must be [begin, end], found {}", where, brief(offsets));
  entry.begin = non_negative_int(offsets[0], where, "data_offsets begin");
  entry.end = non_negative_int(offsets[1], where, "data_offsets end");
  if (entry.begin > entry.end)
    fail("{}: data_offsets [{}, {}] are reversed (begin must be <= end)", where, entry.begin,
         entry.end);
  if (entry.end > data_size)
    fail("{}: data_offsets end {} is past the end of the data section ({} bytes)", where,
         entry.end, data_size);
  if (entry.end - entry.begin != static_cast<uint64_t>(expected_bytes))
    fail("{}: data_offsets [{}, {}] span {} bytes, expected {} ({} x {} elements of shape {})",
         where, entry.begin, entry.end, entry.end - entry.begin, expected_bytes,
         dtype_size(entry.dtype), numel, shape_str(entry.shape), dtype_name(entry.dtype));
  return entry;
}

// Tensors must not share bytes. Sorted by begin, each non-empty tensor must
// start at or after the furthest end seen so far. Returns that furthest end.
//
// The reference reader (the safetensors library, which ComfyUI and SGLang
// load with) is stricter: sorted by (begin, end), every tensor must begin
// exactly where the previous one ended, and the last must end at the end of
// the file. mixq reads such files, but says what the reference reader would
// raise in `layout_error` (empty when it would accept the data layout) and
// adds a warning naming the tensors.
uint64_t check_layout(const std::vector<HeaderEntry>& entries, const std::string& path, uint64_t data_size,
                      std::string& layout_error, std::vector<std::string>& warnings) {
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(entries[a].begin, entries[a].end) < std::tie(entries[b].begin, entries[b].end);
  });
  uint64_t furthest = 0;
  const HeaderEntry* owner = nullptr;
  for (size_t i : order) {
    const HeaderEntry& e = entries[i];
    if (e.begin != e.end && owner && e.begin < furthest)
      fail("{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", path, owner->name, owner->begin,
           owner->end, e.name, e.begin, e.end);
    if (layout_error.empty() && e.begin != furthest) {
      layout_error = fmt::format("invalid offset for tensor `{}`", e.name);
      if (e.begin > furthest)
        warnings.push_back(fmt::format(
            "{}: {} unused bytes between {} and tensor '{}' (offsets {}..{}); the reference "
            "safetensors reader rejects such a file (InvalidOffset: {})",
            path, e.begin - furthest,
            owner ? fmt::format("the data of tensor '{}'", owner->name) : std::string("the header"),
            e.name, furthest, e.begin, layout_error));
      else
        warnings.push_back(fmt::format(
            "{}: empty tensor '{}' sits at offset {}, inside the data of tensor '{}'; the reference safetensors "
            "reader rejects such a file (InvalidOffset: {})",
            path, e.name, e.begin, owner ? owner->name : std::string(), layout_error));
    }
    if (e.end > furthest || !owner) {
      furthest = std::max(furthest, e.end);
      owner = &e;
    }
  }
  if (layout_error.empty() && furthest != data_size)
    layout_error = "incomplete metadata, file not fully covered";
  return furthest;
}

}  // namespace

ParsedHeader read_safetensors_header(const MappedFile& file) {
  const std::string& path = file.path();
  const uint64_t size = file.size();
  if (size < 8)
    fail("{}: file is {} bytes, too short for the 8-byte header length", path, size);
  unsigned char prefix[8];
  file.read(0, prefix, 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];  // little-endian
  if (n > kMaxHeaderBytes)
    fail("{}: header length {} exceeds the limit of {} bytes (100 MiB)", path, n, kMaxHeaderBytes);
  if (n > size - 8)
    fail("{}: header length {} extends past the end of the file ({} bytes, at most {} header bytes)",
         path, n, size, size - 8);

  ParsedHeader out;
  out.info.path = path;
  out.info.bytes = size;
  out.info.header_bytes = n;
  out.data_start = 8 + n;
  const uint64_t data_size = size - out.data_start;

  // Streamed member by member: only one tensor's entry is a JSON DOM at a
  // time, so memory is the header text plus a HeaderEntry per tensor (a
  // whole-header DOM cost ~1.3 KB per tensor: 1.8 GB for 1.4 M tensors).
  const std::string where = path + ": header";
  {
    std::string text(n, '\0');
    file.read(8, text.data(), n);
    bool have_metadata = false;
    parse_strict_json_members(text, where, [&](std::string&& key, json&& value) {
      if (key == "__metadata__") {
        if (have_metadata) fail("{}: duplicate key '__metadata__' in JSON", where);
        have_metadata = true;
        out.info.metadata = parse_metadata(value, path);
      } else {
        out.entries.push_back(parse_entry(key, value, data_size, path));
      }
    });
  }
  std::sort(out.entries.begin(), out.entries.end(),
            [](const HeaderEntry& a, const HeaderEntry& b) { return a.name < b.name; });
  for (size_t i = 1; i < out.entries.size(); ++i)
    if (out.entries[i].name == out.entries[i - 1].name)
      fail("{}: duplicate key '{}' in JSON", where, out.entries[i].name);
  out.info.tensors = out.entries.size();
  out.info.trailing_bytes =
      data_size - check_layout(out.entries, path, data_size, out.info.reference_reader_error, out.warnings);
  return out;
}

}  // namespace mixq
