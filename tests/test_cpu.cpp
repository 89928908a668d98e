// kernels::l1d_bytes (CPUID's cache descriptors) against what Linux reports
// for the same cache in sysfs, read independently of CPUID's decoding here.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "kernels/cpu.hpp"

namespace {

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The size of cpu0's level-1 data cache in sysfs ("48K"), or 0 where sysfs
// lists none.
int64_t sysfs_l1d_bytes() {
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string level = read_line(dir + "level"), type = read_line(dir + "type");
    if (level.empty()) break;
    if (level != "1" || type != "Data") continue;
    const std::string size = read_line(dir + "size");
    if (size.empty()) return 0;
    int64_t bytes = std::stoll(size);
    if (size.back() == 'K') bytes <<= 10;
    if (size.back() == 'M') bytes <<= 20;
    return bytes;
  }
  return 0;
}

TEST(Cpu, L1DataCacheSizeMatchesSysfs) {
  const int64_t expected = sysfs_l1d_bytes();
  if (expected == 0) GTEST_SKIP() << "sysfs lists no L1 data cache here";
  EXPECT_EQ(mixq::kernels::l1d_bytes(), expected);
}

TEST(Cpu, L1DataCacheSizeIsPlausible) {
  const int64_t bytes = mixq::kernels::l1d_bytes();
  EXPECT_GE(bytes, int64_t{16} << 10);
  EXPECT_LE(bytes, int64_t{1} << 20);
  EXPECT_EQ(bytes % 4096, 0);
}

}  // namespace
