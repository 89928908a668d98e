#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "io/file_checks.hpp"
#include "mixq/error.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;

void fsync_directory(const fs::path& dir, const std::string& target) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open its folder to sync it: {}", target, std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some file systems do not support fsync on directories; that is not a
  // failure of the write itself.
  if (rc != 0 && err != EINVAL && err != ENOTSUP)
    fail("{}: cannot sync its folder: {}", target, std::strerror(err));
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  check_path(path_);
  fs::path target(path_);
  if (target.filename().empty()) fail("{}: output path names a folder, not a file", path_);
  std::random_device entropy;
  std::mt19937_64 rng((uint64_t{entropy()} << 32) ^ entropy());
  for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
    fs::path temp = target.parent_path() /
                    fmt::format(".{}.tmp-{}-{:08x}", target.filename().string(), ::getpid(),
                                static_cast<uint32_t>(rng()));
    temp_path_ = temp.string();
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST)
      fail("{}: cannot create temporary file {}: {}", path_, temp_path_, std::strerror(errno));
  }
  if (fd_ < 0) fail("{}: cannot create a unique temporary file next to it", path_);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicFile::write_at(uint64_t offset, std::span<const std::byte> bytes) {
  if (committed_) fail("{}: write after commit", path_);
  const std::byte* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::pwrite(fd_, p, left, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("{}: write of {} bytes at offset {} failed: {}", temp_path_, left, offset, std::strerror(errno));
    p += n;
    left -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

void AtomicFile::resize(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0)
    fail("{}: cannot set size {}: {}", temp_path_, size, std::strerror(errno));
}

void AtomicFile::commit() {
  if (committed_) fail("{}: committed twice", path_);
  if (::fsync(fd_) != 0) fail("{}: fsync failed: {}", temp_path_, std::strerror(errno));
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("{}: close failed: {}", temp_path_, std::strerror(errno));
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0)
    fail("{}: cannot rename {} over it: {}", path_, temp_path_, std::strerror(errno));
  committed_ = true;
  fsync_directory(fs::path(path_).parent_path(), path_);
}

}  // namespace mixq
