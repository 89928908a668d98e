#pragma once
// A read-only, memory-mapped safetensors checkpoint: one file, a
// `*.safetensors.index.json`, or a directory of shards. Opening parses and
// validates headers only; tensor data is never touched until a caller reads a
// view. Every header is treated as hostile input.
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mixq/tensor.hpp"

namespace mixq {

struct FileInfo {
  std::string path;
  uint64_t bytes = 0;         // file size
  uint64_t header_bytes = 0;  // length of the JSON header (without the 8-byte prefix)
  size_t tensors = 0;
  uint64_t trailing_bytes = 0;  // bytes after the last tensor's data
  std::map<std::string, std::string> metadata;  // __metadata__
  // Empty when the reference safetensors reader (the Python/Rust library that
  // ComfyUI and SGLang load with) accepts the data layout; else what it raises
  // after "Error while deserializing header: " (unused bytes between or after
  // tensors: "invalid offset for tensor `b`", "incomplete metadata, file not
  // fully covered"). mixq reads such files and warns.
  std::string reference_reader_error;
};

class MappedFile;

class Checkpoint {
 public:
  // `paths`: one .safetensors file, one *.safetensors.index.json, one directory
  // of shards, or several .safetensors files of one split checkpoint.
  static Checkpoint open(const std::vector<std::string>& paths);
  static Checkpoint open(const std::string& path) { return open(std::vector<std::string>{path}); }
  // Parses one in-memory safetensors image (the bytes are copied); `name`
  // stands in for the file path in messages. Used by the fuzzer and tests.
  static Checkpoint from_bytes(std::span<const std::byte> bytes, std::string name = "<memory>");

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  const std::vector<FileInfo>& files() const { return files_; }
  // All tensors of all files, sorted by name.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorView* find(std::string_view name) const;
  // Copies tensor `t`'s bytes (t.data.size()) into `out` with pread, without
  // touching the mapping: a few small tensors scattered over a large file
  // (the markers) are read without faulting in the read-around (~128 KiB)
  // of every page they sit on.
  void read(const TensorView& t, void* out) const;
  // Non-fatal findings (trailing bytes, gaps between tensors, ...), one line each.
  const std::vector<std::string>& warnings() const { return warnings_; }
  // Every file opened: the shards, then the index files (for refusing an
  // output path that would overwrite one of them).
  std::vector<std::string> source_paths() const;
  // Throws Error naming the file when a shard shrank after it was opened
  // (truncated by another process): data read from it since then may be
  // zeros instead of the file's bytes (see io/sigbus_guard.hpp). Call it
  // before trusting or writing anything computed from tensor data.
  void check_intact() const;

 private:
  Checkpoint();
  std::vector<std::shared_ptr<const MappedFile>> mappings_;
  std::vector<std::string> index_paths_;
  std::vector<FileInfo> files_;
  std::vector<TensorView> tensors_;
  std::vector<std::string> warnings_;
};

}  // namespace mixq
