#include "io/file_checks.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mixq/error.hpp"

namespace mixq {

void check_path(const std::string& path) {
  if (path.empty()) fail("an empty path names no file");
  if (path.find('\0') != std::string::npos) fail("{}: the path holds a NUL byte", path);
}

struct stat stat_regular_file(const std::string& path) {
  check_path(path);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail("{}: is a folder, not a file", path);
  if (!S_ISREG(st.st_mode)) fail("{}: not a regular file", path);
  return st;
}

int open_regular_file(const std::string& path, struct stat& st) {
  stat_regular_file(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("{}: cannot stat: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {  // replaced between the stat and the open
    ::close(fd);
    fail("{}: not a regular file", path);
  }
  // Reads of a regular file never block; clear the flag anyway so that
  // nothing downstream sees EAGAIN.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

std::string read_whole_file(const std::string& path, uint64_t limit, std::string_view what) {
  struct stat st {};
  const int fd = open_regular_file(path, st);
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > limit) {
    ::close(fd);
    fail("{}: {} bytes is more than the {} byte limit for a {}", path, size, limit, what);
  }
  std::string bytes(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(fd, bytes.data() + done, size - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const int err = errno;
      ::close(fd);
      if (got == 0) fail("{}: file shrank while reading ({} of {} bytes)", path, done, size);
      fail("{}: read failed: {}", path, std::strerror(err));
    }
    done += static_cast<size_t>(got);
  }
  ::close(fd);
  return bytes;
}

void refuse_output_over_inputs(const std::string& output, const std::vector<std::string>& inputs,
                               std::string_view flag) {
  check_path(output);
  struct stat out {};
  if (::stat(output.c_str(), &out) != 0) return;  // nothing there (or unreachable): nothing to overwrite
  for (const std::string& input : inputs) {
    struct stat in {};
    if (::stat(input.c_str(), &in) != 0) continue;
    if (in.st_dev == out.st_dev && in.st_ino == out.st_ino)
      fail("{} {}: is the input {} ({}); refusing to overwrite an input", flag, output, input,
           output == input ? "the same path" : "a link to the same file");
  }
}

}  // namespace mixq
