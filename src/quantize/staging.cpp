#include "quantize/staging.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "mixq/error.hpp"

namespace mixq::quantize {
namespace fs = std::filesystem;
namespace {

constexpr char kDone = 'D';
constexpr std::string_view kStagingTag = ".mixq-tmp-";

std::string random_suffix() {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid()));
  std::string s(8, 'x');
  for (char& c : s) c = kChars[gen() % (sizeof(kChars) - 1)];
  return s;
}

// Runs in the forked child: only waits and removes. Never returns.
[[noreturn]] void watchdog_main(int read_fd, const fs::path& dir) {
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  // Hold no pipe or terminal of the parent: whoever reads the parent's output
  // must see EOF when the parent exits.
  int high = fcntl(read_fd, F_DUPFD, 64);
  int null_fd = open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
  }
  if (high >= 0) {
    dup2(high, 3);
    read_fd = 3;
  }
  for (int fd = 4; fd < 1024; ++fd) close(fd);
  bool done = false;
  char byte = 0;
  for (;;) {
    ssize_t got = ::read(read_fd, &byte, 1);
    if (got == 1) {
      if (byte == kDone) done = true;
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    break;  // EOF: the parent closed the pipe or died
  }
  if (!done) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  _exit(0);
}

// The pid of a staging folder name ".<base>.mixq-tmp-<pid>@<host>-<random>"
// made on this host, or 0 for any other name.
pid_t staging_owner(const std::string& name, const std::string& host) {
  if (name.empty() || name[0] != '.') return 0;
  const size_t tag = name.rfind(kStagingTag);
  if (tag == std::string::npos) return 0;
  const std::string_view rest = std::string_view(name).substr(tag + kStagingTag.size());
  const size_t at = rest.find('@'), dash = rest.rfind('-');
  if (at == std::string_view::npos || dash == std::string_view::npos || dash < at || at == 0 ||
      at > 9 || rest.substr(at + 1, dash - at - 1) != host || rest.size() - dash - 1 != 8)
    return 0;
  pid_t pid = 0;
  for (char c : rest.substr(0, at)) {
    if (c < '0' || c > '9') return 0;
    pid = pid * 10 + (c - '0');
  }
  return pid;
}

}  // namespace

std::string staging_host_name() {
  char buffer[256] = {};
  std::string host = gethostname(buffer, sizeof(buffer) - 1) == 0 ? buffer : "";
  if (host.empty()) host = "localhost";
  if (host.size() > 64) host.resize(64);
  for (char& c : host)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
  return host;
}

std::vector<fs::path> remove_stale_staging(const fs::path& folder) {
  const std::string host = staging_host_name();
  std::vector<fs::path> stale;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const pid_t pid = staging_owner(it->path().filename().string(), host);
    std::error_code status_ec;  // a failed status check skips the entry, not the scan
    if (pid <= 0 || it->is_symlink(status_ec) || !it->is_directory(status_ec)) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (EPERM: alive, not ours)
    stale.push_back(it->path());
  }
  std::vector<fs::path> removed;
  for (const fs::path& path : stale) {
    std::error_code remove_ec;
    fs::remove_all(path, remove_ec);
    if (!remove_ec) removed.push_back(path);
  }
  return removed;
}

void sync_path(const fs::path& path, bool folder, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (folder ? O_DIRECTORY : 0));
  if (fd < 0) fail("{}: cannot open {} to sync it: {}", what, path.string(), std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && !(folder && (err == EINVAL || err == ENOTSUP)))
    fail("{}: cannot sync {}: {}", what, path.string(), std::strerror(err));
}

StagingDir::StagingDir(const fs::path& folder, const std::string& base, bool watchdog) {
  removed_stale_ = remove_stale_staging(folder);
  const std::string owner = fmt::format("{}@{}-", ::getpid(), staging_host_name());
  for (int attempt = 0;; ++attempt) {
    fs::path candidate = folder / ("." + base + std::string(kStagingTag) + owner + random_suffix());
    std::error_code ec;
    if (fs::create_directory(candidate, ec)) {
      path_ = candidate;
      break;
    }
    if (ec || attempt > 16)
      fail("{}: cannot create a staging folder for the output: {}", folder.string(),
           ec ? ec.message() : "name collisions");
  }
  if (!watchdog) return;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;  // no watchdog; RAII cleanup still works
  pid_t pid = fork();
  if (pid == 0) watchdog_main(fds[0], path_);
  close(fds[0]);
  if (pid < 0) {
    close(fds[1]);
    return;
  }
  pipe_fd_ = fds[1];
  watchdog_ = pid;
}

void StagingDir::stop_watchdog() {
  if (pipe_fd_ >= 0) {
    ssize_t ignored = ::write(pipe_fd_, &kDone, 1);
    (void)ignored;
    close(pipe_fd_);
    pipe_fd_ = -1;
  }
  if (watchdog_ > 0) {
    int status = 0;
    while (waitpid(watchdog_, &status, 0) < 0 && errno == EINTR) {
    }
    watchdog_ = -1;
  }
}

void StagingDir::finish() {
  std::error_code ec;
  fs::remove_all(path_, ec);
  finished_ = true;
  stop_watchdog();
}

StagingDir::~StagingDir() {
  if (!finished_) {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  stop_watchdog();
}

SpillFile::SpillFile(const fs::path& folder) {
  fs::path path = folder / (".spill-" + random_suffix());
  where_ = path.string();
#ifdef O_TMPFILE
  fd_ = ::open(folder.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
  if (fd_ < 0) {
    fd_ = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd_ < 0) fail("{}: cannot create spill file: {}", where_, std::strerror(errno));
    ::unlink(path.c_str());
  }
}

SpillFile::~SpillFile() {
  if (fd_ >= 0) close(fd_);
}

uint64_t SpillFile::append(std::span<const std::byte> bytes) {
  uint64_t offset = size_;
  const std::byte* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::pwrite(fd_, p, left, static_cast<off_t>(size_));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("{}: writing spill file failed: {}", where_, std::strerror(errno));
    }
    p += n;
    left -= static_cast<size_t>(n);
    size_ += static_cast<uint64_t>(n);
  }
  return offset;
}

void SpillFile::read(uint64_t offset, uint64_t size, std::vector<std::byte>& out) const {
  if (offset + size > size_) fail("{}: spill read past end", where_);
  out.resize(size);
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd_, out.data() + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("{}: reading spill file failed: {}", where_, std::strerror(errno));
    done += static_cast<uint64_t>(n);
  }
}

void release_pages(std::span<const std::byte> bytes) {
#ifdef MADV_PAGEOUT
  if (bytes.empty()) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data()) & ~(page - 1);
  uintptr_t end = reinterpret_cast<uintptr_t>(bytes.data() + bytes.size());
  end = (end + page - 1) & ~(page - 1);
  // Errors are harmless here (memory that is not a mapping, old kernels).
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#else
  (void)bytes;
#endif
}

}  // namespace mixq::quantize
