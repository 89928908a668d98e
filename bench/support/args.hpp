#pragma once
// The command-line flags the benchmarks share:
//   --quick         3 shorter repetitions (still >= kMinTimedCalls calls per point)
//   --threads N     threads (default 2)
//   --format NAME   only these formats (repeatable)
//   --shape KxN     shapes (repeatable)
//   --m M           row counts (repeatable)
//   --in-cache      where a benchmark streams weights from a ring at small M:
//                   one copy instead, reused (the compute side)
// A benchmark's own flags go to `extra`, which returns false for a flag it
// does not take; anything else is an error naming the benchmark.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mixq::bench {

struct BenchArgs {
  bool quick = false;
  int threads = 2;
  std::vector<std::string> formats;
  std::vector<std::pair<int64_t, int64_t>> shapes;
  std::vector<int64_t> ms;
  bool in_cache = false;

  double min_seconds() const { return quick ? 0.05 : 0.15; }  // per repetition
  int reps() const { return quick ? 3 : 7; }
  // No --format given, or `format` among them.
  bool wants(std::string_view format) const;
};

// extra(flag, value): `value()` takes the next argument (an error when there
// is none).
using ExtraFlag = std::function<bool(const std::string& flag, const std::function<const char*()>& value)>;

BenchArgs parse_args(const char* tool, int argc, char** argv, const ExtraFlag& extra = {});

// Fails, naming `tool`, unless the K of every --shape is a multiple of
// `multiple` (`what`: the block or group it must hold whole).
void require_k_multiple(const BenchArgs& o, const char* tool, int64_t multiple, const char* what);

}  // namespace mixq::bench
