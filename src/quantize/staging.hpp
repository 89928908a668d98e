#pragma once
// Pieces of the quantizer's atomic, durable, low-memory output path: a
// staging folder cleaned up even when the process is killed (and by the next
// run when even the watchdog was killed), fsync of files and folders, an
// unlinked spill file, and releasing the pages of source tensors already
// consumed.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace mixq::quantize {

// A folder ".<base>.mixq-tmp-<pid>@<host>-<random>" inside `folder`.
// Destroying it without finish() removes it with everything inside. With
// `watchdog`, a forked child process removes it too if this process dies first
// (SIGKILL included): the child waits on a pipe and cleans up when the pipe
// closes without the "done" byte. The child ignores SIGINT/SIGTERM/SIGHUP so
// that Ctrl-C on the terminal's process group still leaves it alive to clean
// up; a SIGKILL of the whole process group kills it too, and then the next
// StagingDir in the same folder removes the leftover (see remove_stale_staging).
class StagingDir {
 public:
  // Removes stale staging folders in `folder` first (their paths are in
  // removed_stale()).
  StagingDir(const std::filesystem::path& folder, const std::string& base, bool watchdog);
  ~StagingDir();
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The contents were moved into place: removes what is left of the folder
  // and dismisses the watchdog.
  void finish();
  const std::vector<std::filesystem::path>& removed_stale() const { return removed_stale_; }

 private:
  void stop_watchdog();
  std::filesystem::path path_;
  std::vector<std::filesystem::path> removed_stale_;
  int pipe_fd_ = -1;
  pid_t watchdog_ = -1;
  bool finished_ = false;
};

// This host's name as it appears in staging folder names: [A-Za-z0-9.-] only
// (anything else becomes '_'), at most 64 characters.
std::string staging_host_name();

// Removes every staging folder in `folder` (any base name) left by a dead
// process: its name is "." + base + ".mixq-tmp-<pid>@<host>-<random>", <host>
// is this host's staging_host_name() and no process <pid> exists here
// (kill(pid, 0) fails with ESRCH). A folder of another host, of a live pid
// (even if the pid was reused by an unrelated process), or in the older
// ".mixq-tmp-<random>" form without a pid is left alone: only a dead owner
// is certain. Returns the removed paths; errors are ignored (best effort).
std::vector<std::filesystem::path> remove_stale_staging(const std::filesystem::path& folder);

// fsync() of a file or a folder (its entries: names created, renamed or
// removed in it). Folders on file systems that cannot sync them (EINVAL,
// ENOTSUP) pass. Throws Error naming `what` on failure.
void sync_path(const std::filesystem::path& path, bool folder, const std::string& what);

// An anonymous temporary file (created in `folder` and unlinked at once, so
// it never outlives the process) that tensors are appended to and read back.
class SpillFile {
 public:
  explicit SpillFile(const std::filesystem::path& folder);
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  // Appends bytes; returns their offset.
  uint64_t append(std::span<const std::byte> bytes);
  // Reads `size` bytes at `offset` into `out` (resized).
  void read(uint64_t offset, uint64_t size, std::vector<std::byte>& out) const;
  uint64_t size() const { return size_; }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string where_;  // for messages
};

// Drops the resident pages of a read-only view into a mapped source file, so
// that reading a whole checkpoint does not grow the resident set by the
// checkpoint's size. Never changes the data (MADV_PAGEOUT; a no-op where the
// kernel lacks it).
void release_pages(std::span<const std::byte> bytes);

}  // namespace mixq::quantize
