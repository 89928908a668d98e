#pragma once
// Where a kernel call spends its time, for `bench_phases` (bench/): kernels
// mark their phases (activation preparation, GEMM, ...) with PhaseScope.
// Off by default: a scope then costs one relaxed atomic load. When on, each
// scope adds its wall time to its phase's total, summed over threads.
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace mixq::util {

void set_phase_timing(bool on);
bool phase_timing();
// The totals since the last call, in seconds summed over threads, in the
// order the phases were first seen; resets them.
std::vector<std::pair<std::string, double>> take_phase_times();
void add_phase_time(const char* phase, double seconds);

// `phase` must be a string literal (its address names the phase).
class PhaseScope {
 public:
  explicit PhaseScope(const char* phase) : phase_(phase_timing() ? phase : nullptr) {
    if (phase_) start_ = std::chrono::steady_clock::now();
  }
  ~PhaseScope() { end(); }
  // Ends the phase before the scope does (a later end() or the destructor
  // adds nothing). Out of line: kernels built for one instruction set use
  // PhaseScope (mixq/error.hpp's fail says why that matters).
  void end();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  const char* phase_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace mixq::util
