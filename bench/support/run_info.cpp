#include "support/run_info.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "bench_commit.h"  // MIXQ_BENCH_COMMIT, written at build time (support/commit.cmake)

namespace mixq::bench {
namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  return "unknown CPU";
}

}  // namespace

std::string run_header() {
  const std::string load = first_line("/proc/loadavg");
  // The first three fields: the 1, 5 and 15 minute load averages.
  size_t end = 0;
  for (int i = 0; i < 3 && end != std::string::npos; ++i) end = load.find(' ', end + (i > 0));
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return fmt::format("commit {}, {}, load average {}, {} ({} cpus)", MIXQ_BENCH_COMMIT, when, load.substr(0, end),
                     cpu_model(), sysconf(_SC_NPROCESSORS_ONLN));
}

size_t llc_bytes() {
  size_t best = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", index);
    const std::string level = first_line((dir + "level").c_str()), size = first_line((dir + "size").c_str());
    if (level.empty() || size.empty()) continue;
    size_t bytes = std::stoul(size);
    if (size.back() == 'K') bytes <<= 10;
    if (size.back() == 'M') bytes <<= 20;
    best = std::max(best, bytes);
  }
  return best > 0 ? best : size_t(32) << 20;
}

int ring_copies(double bytes_per_copy) {
  const double ring = static_cast<double>(kRingLlcFactor) * static_cast<double>(llc_bytes());
  return std::max(1, static_cast<int>(std::ceil(ring / bytes_per_copy)));
}

std::string ring_note(int copies, double bytes_per_copy) {
  const double ring = copies * bytes_per_copy, llc = static_cast<double>(llc_bytes());
  return fmt::format("ring: {} copies = {:.0f} MiB = {:.1f}x the {:.0f} MiB LLC", copies, ring / (1 << 20), ring / llc,
                     llc / (1 << 20));
}

std::string ring_suffix(int copies, double bytes_per_copy) {
  return copies > 1 ? "; " + ring_note(copies, bytes_per_copy) : std::string(" (one copy: weights reused)");
}

}  // namespace mixq::bench
