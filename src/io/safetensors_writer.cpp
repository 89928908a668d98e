#include "mixq/safetensors_writer.hpp"

#include <algorithm>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "io/atomic_file.hpp"
#include "io/safetensors_header.hpp"
#include "mixq/error.hpp"

namespace mixq {

// Data layout: tensors are stored back to back (the safetensors crate that
// Python, ComfyUI and SGLang load through rejects gaps between tensors and
// bytes after the last one), ordered by element size, largest first, then by
// declaration. The header is padded to a multiple of 8, so the data section
// starts 8-aligned and every tensor starts aligned to its own element size.
struct SafetensorsWriter::State {
  struct Decl {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t bytes = 0;
    uint64_t begin = 0;  // within the data section, set by lay_out()
  };
  explicit State(std::string p) : file(std::move(p)) {}

  AtomicFile file;
  std::map<std::string, std::string> metadata;
  std::vector<Decl> decls;
  std::set<std::string> names;
  bool laid_out = false;
  size_t next = 0;  // next declaration to receive its bytes
  uint64_t data_start = 0;
  uint64_t total = 0;

  void lay_out() {
    std::vector<size_t> order(decls.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return dtype_size(decls[a].dtype) > dtype_size(decls[b].dtype);
    });
    total = 0;
    for (size_t i : order) {
      decls[i].begin = total;
      total += decls[i].bytes;
    }
    nlohmann::json header = nlohmann::json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    for (const Decl& d : decls)
      header[d.name] = {{"dtype", dtype_name(d.dtype)},
                        {"shape", d.shape},
                        {"data_offsets", {d.begin, d.begin + d.bytes}}};
    std::string text;
    try {
      text = header.dump();
    } catch (const nlohmann::json::exception& e) {
      fail("{}: cannot encode the header (tensor names and metadata must be UTF-8): {}",
           file.path(), e.what());
    }
    text.append((8 - text.size() % 8) % 8, ' ');
    if (text.size() > kMaxHeaderBytes)
      fail("{}: header of {} bytes exceeds the {} byte limit", file.path(), text.size(), kMaxHeaderBytes);
    std::byte prefix[8];
    for (int i = 0; i < 8; ++i) prefix[i] = static_cast<std::byte>((text.size() >> (8 * i)) & 0xff);
    file.write_at(0, prefix);
    file.write_at(8, std::as_bytes(std::span(text)));
    data_start = 8 + text.size();
    laid_out = true;
  }
};

SafetensorsWriter::SafetensorsWriter(std::string path, std::map<std::string, std::string> metadata)
    : state_(std::make_unique<State>(std::move(path))) {
  state_->metadata = std::move(metadata);
}

SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::declare(const std::string& name, DType dtype, const Shape& shape) {
  State& s = *state_;
  const std::string& path = s.file.path();
  if (s.laid_out) fail("{}: tensor '{}' declared after writing started", path, name);
  if (name.empty() || name == "__metadata__") fail("{}: invalid tensor name '{}'", path, name);
  // Readers (ours included) refuse a NUL in a name: it would end the name for
  // every C API, so the file could not be read back.
  if (const size_t nul = name.find('\0'); nul != std::string::npos)
    fail("{}: tensor name '{}\\0...' holds a NUL byte", path, name.substr(0, nul));
  if (!s.names.insert(name).second) fail("{}: tensor '{}' declared twice", path, name);
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("{}: tensor '{}' has a negative dimension in shape {}", path, name, shape_str(shape));
    if (__builtin_mul_overflow(numel, d, &numel))
      fail("{}: tensor '{}' shape {} overflows", path, name, shape_str(shape));
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<int64_t>(dtype_size(dtype)), &bytes))
    fail("{}: tensor '{}' shape {} overflows", path, name, shape_str(shape));
  s.decls.push_back(State::Decl{name, dtype, shape, static_cast<uint64_t>(bytes), 0});
}

void SafetensorsWriter::write(std::span<const std::byte> bytes) {
  State& s = *state_;
  if (!s.laid_out) s.lay_out();
  if (s.next >= s.decls.size())
    fail("{}: write of {} bytes past the {} declared tensors", s.file.path(), bytes.size(), s.decls.size());
  const State::Decl& d = s.decls[s.next];
  if (bytes.size() != d.bytes)
    fail("{}: tensor '{}' ({} {}) needs {} bytes, got {}", s.file.path(), d.name,
         dtype_name(d.dtype), shape_str(d.shape), d.bytes, bytes.size());
  s.file.write_at(s.data_start + d.begin, bytes);
  ++s.next;
}

uint64_t SafetensorsWriter::data_bytes() const {
  uint64_t total = 0;
  for (const auto& d : state_->decls) total += d.bytes;
  return total;
}

void SafetensorsWriter::commit() {
  State& s = *state_;
  if (!s.laid_out) s.lay_out();
  if (s.next < s.decls.size())
    fail("{}: commit with {} of {} declared tensors written (next: '{}')", s.file.path(), s.next,
         s.decls.size(), s.decls[s.next].name);
  s.file.resize(s.data_start + s.total);
  s.file.commit();
}

void write_safetensors(const std::string& path, std::span<const OwnedTensor> tensors,
                       const std::map<std::string, std::string>& metadata) {
  SafetensorsWriter writer(path, metadata);
  for (const auto& t : tensors) writer.declare(t.name, t.dtype, t.shape);
  for (const auto& t : tensors) writer.write(t.data);
  writer.commit();
}

}  // namespace mixq
