#pragma once
// An output file that appears under its final name only when complete: data
// goes to `.<name>.tmp-<pid>-<random>` in the target folder, which commit()
// fsyncs, renames over the target, and makes durable by fsyncing the folder.
// Destroying an uncommitted AtomicFile removes the temporary file.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace mixq {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  // Writes all of `bytes` at `offset` (retrying short writes).
  void write_at(uint64_t offset, std::span<const std::byte> bytes);
  // Sets the final size (zero-fills when growing).
  void resize(uint64_t size);
  void commit();
  bool committed() const { return committed_; }

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace mixq
