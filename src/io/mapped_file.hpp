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

  // Drops the whole pages inside `range` from this process' resident memory
  // when the range lies in a live mapping made by map() (madvise
  // MADV_DONTNEED on the page-aligned interior; the partial pages at either
  // edge, shared with neighbouring bytes, stay). The bytes stay readable: the
  // mapping is read-only and private and never written, so the next read
  // faults them in again from the file (or, past a truncation the SIGBUS guard
  // absorbed, from its zero pages). Any other memory (copy_of buffers, a
  // caller's arrays) is left alone. Returns the bytes released, 0 when none.
  // For callers that copied what they need out of the range (linear.cpp).
  static uint64_t release_pages(std::span<const std::byte> range);

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
