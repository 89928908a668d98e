#pragma once
// What the pipe probes share (isa/dot_pipes.avx512.cpp, isa/shift_pipes.avx2.cpp):
// their result rows and their timer.
#include <algorithm>
#include <chrono>

namespace mixq::bench {

// An op's time next to the probe's base ops, relative to the base ops alone.
struct PipeShare {
  const char* op;
  double share;
};

namespace {  // each per-target probe file keeps its own copy (no shared weak symbol)

constexpr long kPipeRounds = 20'000'000;

// Seconds for kPipeRounds iterations of loop(n), the best of three.
template <class Loop>
double best_pipe_time(Loop loop) {
  double best = 1e30;
  for (int t = 0; t < 3; ++t) {
    const auto t0 = std::chrono::steady_clock::now();
    loop(kPipeRounds);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace
}  // namespace mixq::bench
