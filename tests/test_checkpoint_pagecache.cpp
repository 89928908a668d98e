// Opening a checkpoint reads headers only: after evicting a 256 MiB file from
// the page cache, Checkpoint::open must leave its data pages unread, and
// reading its per-layer markers (what inspect and plan do) must not fault in
// the weights around them. mincore() on the checkpoint's own mapping reports
// page-cache residency per page.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>

#include "mixq/checkpoint.hpp"
#include "mixq/marker.hpp"
#include "mixq/safetensors_writer.hpp"
#include "support/test_support.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;

constexpr int kTensors = 64;
constexpr int64_t kTensorBytes = 4 << 20;  // 64 x 4 MiB = 256 MiB

// Resident bytes of the pages spanned by `data` (whole pages).
uint64_t resident_bytes(std::span<const std::byte> data) {
  if (data.empty()) return 0;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto begin = reinterpret_cast<uintptr_t>(data.data()) & ~(page - 1);
  auto end = reinterpret_cast<uintptr_t>(data.data() + data.size());
  size_t pages = (end - begin + page - 1) / page;
  std::vector<unsigned char> vec(pages);
  if (::mincore(reinterpret_cast<void*>(begin), end - begin, vec.data()) != 0) return UINT64_MAX;
  uint64_t resident = 0;
  for (unsigned char v : vec) resident += (v & 1) ? page : 0;
  return resident;
}

uint64_t resident_data(const Checkpoint& c) {
  uint64_t total = 0;
  for (const auto& t : c.tensors()) total += resident_bytes(t.data);
  return total;
}

bool evict(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  ::fdatasync(fd);
  bool ok = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  ::close(fd);
  return ok;
}

TEST(CheckpointPageCache, OpenDoesNotReadTensorData) {
  fs::path path = testing::temp_dir("pagecache") / "big.safetensors";
  {
    SafetensorsWriter writer(path.string(), {{"purpose", "page cache test"}});
    for (int i = 0; i < kTensors; ++i) writer.declare("blocks." + std::to_string(i) + ".weight", DType::BF16, {kTensorBytes / 2});
    std::vector<std::byte> bytes(kTensorBytes, std::byte{0x5a});
    for (int i = 0; i < kTensors; ++i) writer.write(bytes);
    writer.commit();
  }
  ASSERT_EQ(fs::file_size(path), static_cast<uintmax_t>(kTensors) * kTensorBytes + 8 +
                                     Checkpoint::open(path.string()).files()[0].header_bytes);
  if (!evict(path)) GTEST_SKIP() << "posix_fadvise(DONTNEED) failed";

  Checkpoint c = Checkpoint::open(path.string());
  ASSERT_EQ(c.tensors().size(), static_cast<size_t>(kTensors));
  const uint64_t resident = resident_data(c);
  if (resident == UINT64_MAX) GTEST_SKIP() << "mincore() is not available here";
  // A file system that ignores DONTNEED (tmpfs, some overlays) keeps the
  // whole file resident; then this test cannot tell anything.
  if (resident > 128ull << 20) GTEST_SKIP() << "page cache not evictable here (" << resident << " bytes resident)";
  // Header pages and the kernel's read-ahead after the header read are
  // allowed; 256 MiB of data are not.
  RecordProperty("resident_bytes_after_open", std::to_string(resident));
  EXPECT_LT(resident, 8ull << 20) << "opening read tensor data";

  // The measurement does see reads: touching one tensor makes it resident.
  const TensorView& last = c.tensors().back();
  volatile uint8_t sum = 0;
  for (size_t i = 0; i < last.data.size(); i += 4096) sum = sum + static_cast<uint8_t>(last.data[i]);
  EXPECT_GE(resident_bytes(last.data), static_cast<uint64_t>(kTensorBytes) - 4096);
  (void)sum;
  fs::remove(path);
}

// 64 layers of a 4 MiB weight, each with its comfy_quant marker stored between
// the weights. Reading the markers through the mapping left all 256 MiB of
// weights resident (measured 268693504 bytes: the fault read-around grows as
// the faults march through the file); read with pread, 589824 bytes (the
// readahead of each small read). Bound: 3x that.
TEST(CheckpointPageCache, ReadingMarkersDoesNotReadWeights) {
  fs::path path = testing::temp_dir("pagecache-markers") / "layers.safetensors";
  const std::string marker = R"({"format": "float8_e4m3fn"})";
  {
    SafetensorsWriter writer(path.string(), {});
    for (int i = 0; i < kTensors; ++i) {
      writer.declare("blocks." + std::to_string(i) + ".comfy_quant", DType::U8, {int64_t(marker.size())});
      writer.declare("blocks." + std::to_string(i) + ".weight", DType::F8_E4M3, {kTensorBytes});
    }
    std::vector<std::byte> bytes(kTensorBytes, std::byte{0x38});
    const std::span<const std::byte> text(reinterpret_cast<const std::byte*>(marker.data()), marker.size());
    for (int i = 0; i < kTensors; ++i) {
      writer.write(text);
      writer.write(bytes);
    }
    writer.commit();
  }
  if (!evict(path)) GTEST_SKIP() << "posix_fadvise(DONTNEED) failed";
  Checkpoint c = Checkpoint::open(path.string());
  const uint64_t after_open = resident_data(c);
  if (after_open == UINT64_MAX) GTEST_SKIP() << "mincore() is not available here";
  if (after_open > 128ull << 20) GTEST_SKIP() << "page cache not evictable here";
  const MarkerSet markers = collect_markers(c);
  ASSERT_EQ(markers.markers.size(), static_cast<size_t>(kTensors));
  uint64_t weights = 0;
  for (const auto& t : c.tensors())
    if (t.name.ends_with(".weight")) weights += resident_bytes(t.data);
  RecordProperty("weight_bytes_resident_after_markers", std::to_string(weights));
  EXPECT_LT(weights, 3 * 589824ull) << "reading the markers read " << weights << " bytes of weights";
  fs::remove(path);
}

}  // namespace
}  // namespace mixq
