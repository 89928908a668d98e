#include "util/phase_timer.hpp"

#include <atomic>
#include <mutex>

namespace mixq::util {
namespace {

std::atomic<bool> enabled{false};
std::mutex totals_mutex;
// Few phases (under ten): a vector keeps first-seen order and is searched by address.
std::vector<std::pair<const char*, double>> totals;

}  // namespace

void set_phase_timing(bool on) { enabled.store(on, std::memory_order_relaxed); }

bool phase_timing() { return enabled.load(std::memory_order_relaxed); }

void add_phase_time(const char* phase, double seconds) {
  std::lock_guard<std::mutex> lock(totals_mutex);
  for (auto& [name, total] : totals)
    if (name == phase) {
      total += seconds;
      return;
    }
  totals.emplace_back(phase, seconds);
}

std::vector<std::pair<std::string, double>> take_phase_times() {
  std::lock_guard<std::mutex> lock(totals_mutex);
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [name, total] : totals) out.emplace_back(name, total);
  totals.clear();
  return out;
}

void PhaseScope::end() {
  if (phase_) add_phase_time(phase_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  phase_ = nullptr;
}

}  // namespace mixq::util
