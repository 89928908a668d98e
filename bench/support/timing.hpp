#pragma once
// Timing for side-by-side benchmarks: warm-up calls, then repetitions of at
// least `min_seconds` each; report the best and the median repetition.
#include <functional>
#include <string>

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

// Threads used by our pool and by oneDNN's OpenMP runtime.
void set_threads(int threads);

// "1.23x" style ratio, or "-" when the denominator is 0.
std::string ratio(double num, double den);

}  // namespace mixq::bench
