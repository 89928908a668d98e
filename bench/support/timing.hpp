#pragma once
// Timing for side-by-side benchmarks: warm-up calls, then repetitions of at
// least `min_seconds` each; report the best and the median repetition.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace mixq::kernels {
class StreamingRead;
}

namespace mixq::bench {

struct Timing {
  double best = 0;    // seconds per call, fastest repetition
  double median = 0;  // seconds per call, median repetition
};

// Every point times at least this many calls (also with --quick).
inline constexpr int kMinTimedCalls = 5;

// Calls fn() 2 times, then `reps` repetitions of as many calls as fit in
// `min_seconds`, and at least kMinTimedCalls calls in all. Returns seconds
// per call.
Timing time_calls(const std::function<void()>& fn, double min_seconds = 0.15, int reps = 7);

// Variants of one computation timed in alternating rounds, so that each sees
// the same machine: even rounds run call(0), call(1), ..., odd rounds the
// same backwards (call(i) = one call of variant i), so that no variant
// always runs right after the same other one; each for at least
// `min_seconds` and at least one call. Returns each variant's median
// seconds per call over the rounds.
std::vector<double> alternating_medians(size_t variants, int rounds, double min_seconds,
                                        const std::function<void(size_t variant)>& call);

// Rows of a side-by-side table (oneDNN's and ours on one shape): two warm-up
// calls of each, then alternating_medians over side_by_side_rounds(rounds)
// rounds, so that their ratios hold on a shared host whose speed drifts by
// 20-30 % within minutes (BENCHMARKS.md, "Issue 14 on Zen 3"). Median
// seconds per call, one per row.
inline int side_by_side_rounds(int rounds) { return rounds > kMinTimedCalls ? rounds : kMinTimedCalls; }
std::vector<double> time_side_by_side(const std::vector<std::function<void()>>& rows, int rounds, double min_seconds);

// The read beside (BENCHMARKS.md, "How every number below is taken"):
// alternating_medians over call(0 .. variants - 1) and, where `buffer` is
// given and bytes > 0, a read of `bytes` from it (DRAM, the calibration's
// loop) as one more variant in every round, so that the read shares the
// calls' phase of a shared host's memory.
struct VariantTimes {
  std::vector<double> seconds;  // median seconds per call, one per variant
  double read_seconds = 0;      // median seconds of the read beside them (0: not timed)
};
VariantTimes alternating_with_read(kernels::StreamingRead* buffer, double bytes, size_t variants, int rounds,
                                   double min_seconds, const std::function<void(size_t variant)>& call);
// One call against the read beside it, after two warm-up calls. Median
// seconds of each; `read_fraction` = read / call: the call's rate as a
// fraction of the read's.
struct BesideRead {
  double call = 0;
  double read = 0;
  double read_fraction() const { return call > 0 ? read / call : 0; }
};
BesideRead time_beside_read(kernels::StreamingRead& buffer, double bytes, int rounds, double min_seconds,
                            const std::function<void()>& call);
// Rounds of time_beside_read in the benchmarks' one-token tables.
inline constexpr int kBesideRounds = 9;

// Threads used by our pool and by oneDNN's OpenMP runtime.
void set_threads(int threads);

// "1.23x" style ratio, or "-" when the denominator is 0.
std::string ratio(double num, double den);

}  // namespace mixq::bench
