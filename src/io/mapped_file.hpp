#pragma once
// A file mapped read-only into memory (or an owned in-memory copy standing in
// for one). Mapping never touches the pages: the kernel reads them on first
// access, so opening a 20 GB checkpoint costs neither time nor RAM.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mixq {

class MappedFile {
 public:
  // mmap(PROT_READ, MAP_PRIVATE), no MAP_POPULATE. Throws Error naming the
  // path when the file cannot be opened, stat'ed or mapped, or is not a
  // regular file (checked before opening: a FIFO would block). The mapping is
  // guarded against truncation by another process (io/sigbus_guard.hpp).
  static std::unique_ptr<MappedFile> map(const std::string& path);
  // Copies `bytes` into an owned buffer.
  static std::unique_ptr<MappedFile> copy_of(std::span<const std::byte> bytes, std::string name);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }
  // Reads `count` bytes at `offset` with pread (mapped files) or memcpy (owned
  // copies) without touching the mapping. The range must lie within the file.
  void read(uint64_t offset, void* out, size_t count) const;
  // Throws Error naming the file when it shrank since it was mapped (another
  // process truncated it): reads past the new end returned zeros, so nothing
  // computed from the mapping can be trusted.
  void check_intact() const;

 private:
  MappedFile() = default;
  std::string path_;
  int fd_ = -1;
  const std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;      // munmap'ed on destruction when non-null
  int guard_ = -1;               // io::guard_mapping slot of the mapping
  std::vector<std::byte> owned_;  // backing store of copy_of
};

}  // namespace mixq
