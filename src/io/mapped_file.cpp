#include "io/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

#include "io/file_checks.hpp"
#include "io/sigbus_guard.hpp"
#include "mixq/error.hpp"

namespace mixq {
namespace {

// The live mappings made by map(), [begin, end) page-rounded: release_pages
// touches nothing else. The lock is held across madvise so that a mapping
// cannot be unmapped (and its addresses reused) in between.
std::mutex g_live_lock;
std::vector<std::pair<uintptr_t, uintptr_t>> g_live;

uintptr_t page_size() {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

std::unique_ptr<MappedFile> MappedFile::map(const std::string& path) {
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  struct stat st {};
  file->fd_ = open_regular_file(path, st);
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ == 0) return file;  // nothing to map; callers reject it as too short
  // pread (the header, markers: read()) then reads only the pages asked for,
  // not the kernel's readahead window of neighbouring tensor data: a cold
  // `mixq inspect` reads no weight page (BENCHMARKS.md, inspect). Reads
  // through the mapping keep their read-around: Linux decides that from the
  // mapping's advice, not from this.
  ::posix_fadvise(file->fd_, 0, 0, POSIX_FADV_RANDOM);
  // MAP_PRIVATE + PROT_READ: the checkpoint is never written through the
  // mapping. No MAP_POPULATE: pages are read only when a view is used.
  void* mapping = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, file->fd_, 0);
  if (mapping == MAP_FAILED) fail("{}: cannot map {} bytes: {}", path, file->size_, std::strerror(errno));
  file->mapping_ = mapping;
  file->data_ = static_cast<const std::byte*>(mapping);
  file->guard_ = io::guard_mapping(mapping, file->size_);
  const auto begin = reinterpret_cast<uintptr_t>(mapping);
  std::lock_guard<std::mutex> lock(g_live_lock);
  g_live.emplace_back(begin, (begin + file->size_ + page_size() - 1) & ~(page_size() - 1));
  return file;
}

std::unique_ptr<MappedFile> MappedFile::copy_of(std::span<const std::byte> bytes, std::string name) {
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->path_ = std::move(name);
  file->owned_.assign(bytes.begin(), bytes.end());
  file->data_ = file->owned_.data();
  file->size_ = file->owned_.size();
  return file;
}

MappedFile::~MappedFile() {
  if (mapping_) {
    std::lock_guard<std::mutex> lock(g_live_lock);
    const auto begin = reinterpret_cast<uintptr_t>(mapping_);
    std::erase_if(g_live, [&](const auto& live) { return live.first == begin; });
  }
  if (guard_ >= 0) io::unguard_mapping(guard_);
  if (mapping_) ::munmap(mapping_, size_);
  if (fd_ >= 0) ::close(fd_);
}

void MappedFile::read(uint64_t offset, void* out, size_t count) const {
  if (offset > size_ || count > size_ - offset)
    fail("{}: read of {} bytes at offset {} is past the end of the file ({} bytes)", path_, count,
         offset, size_);
  if (fd_ < 0) {
    if (count) std::memcpy(out, data_ + offset, count);
    return;
  }
  auto* dst = static_cast<char*>(out);
  while (count > 0) {
    ssize_t got = ::pread(fd_, dst, count, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail("{}: read failed at offset {}: {}", path_, offset, std::strerror(errno));
    if (got == 0) fail("{}: file shrank while reading (offset {})", path_, offset);
    dst += got;
    offset += static_cast<uint64_t>(got);
    count -= static_cast<size_t>(got);
  }
}

void MappedFile::check_intact() const {
  if (fd_ < 0) return;
  struct stat st {};
  const bool faulted = guard_ >= 0 && io::mapping_faulted(guard_);
  const bool stat_ok = ::fstat(fd_, &st) == 0;
  if (stat_ok && static_cast<uint64_t>(st.st_size) < size_)
    fail("{}: the file shrank from {} to {} bytes while mixq was reading it (truncated by another process?)",
         path_, size_, st.st_size);
  if (faulted)
    fail("{}: part of the file vanished while mixq was reading it (truncated by another process?)", path_);
}

uint64_t MappedFile::release_pages(std::span<const std::byte> range) {
  if (range.empty()) return 0;
  const uintptr_t page = page_size();
  const auto first = reinterpret_cast<uintptr_t>(range.data());
  const uintptr_t last = first + range.size();
  const uintptr_t begin = (first + page - 1) & ~(page - 1);  // interior: whole pages only
  const uintptr_t end = last & ~(page - 1);
  if (begin >= end) return 0;
  std::lock_guard<std::mutex> lock(g_live_lock);
  for (const auto& [live_begin, live_end] : g_live) {
    if (first < live_begin || last > live_end) continue;
    // Cannot fail on a valid mapping; a failure only leaves the pages resident.
    if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) != 0) return 0;
    return end - begin;
  }
  return 0;
}

}  // namespace mixq
