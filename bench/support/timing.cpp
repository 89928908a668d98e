#include "support/timing.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>

#include "kernels/calibrate.hpp"
#include "mixq/linear.hpp"

namespace mixq::bench {

Timing time_calls(const std::function<void()>& fn, double min_seconds, int reps) {
  using clock = std::chrono::steady_clock;
  fn();
  fn();
  // Calibrate how many calls make one repetition.
  auto t0 = clock::now();
  fn();
  double one = std::chrono::duration<double>(clock::now() - t0).count();
  // At least kMinTimedCalls calls over all repetitions, however short they are.
  const long at_least = (kMinTimedCalls + reps - 1) / std::max(reps, 1);
  const long calls = std::max<long>(at_least, static_cast<long>(min_seconds / std::max(one, 1e-9)));
  std::vector<double> per_call;
  for (int r = 0; r < reps; ++r) {
    auto start = clock::now();
    for (long i = 0; i < calls; ++i) fn();
    per_call.push_back(std::chrono::duration<double>(clock::now() - start).count() / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  return {per_call.front(), per_call[per_call.size() / 2]};
}

VariantTimes alternating_with_read(kernels::StreamingRead* buffer, double bytes, size_t variants, int rounds,
                                   double min_seconds, const std::function<void(size_t variant)>& call) {
  const bool read = buffer && bytes > 0;
  VariantTimes times;
  times.seconds = alternating_medians(variants + (read ? 1 : 0), rounds, min_seconds, [&](size_t v) {
    if (v < variants) call(v);
    else buffer->read_next(static_cast<size_t>(bytes));
  });
  if (read) {
    times.read_seconds = times.seconds.back();
    times.seconds.pop_back();
  }
  return times;
}

std::vector<double> time_side_by_side(const std::vector<std::function<void()>>& rows, int rounds, double min_seconds) {
  for (const auto& row : rows) row(), row();
  return alternating_medians(rows.size(), side_by_side_rounds(rounds), min_seconds,
                             [&](size_t i) { rows[i](); });
}

BesideRead time_beside_read(kernels::StreamingRead& buffer, double bytes, int rounds, double min_seconds,
                            const std::function<void()>& call) {
  call();
  call();
  const VariantTimes t = alternating_with_read(&buffer, bytes, 1, rounds, min_seconds, [&](size_t) { call(); });
  return {t.seconds[0], t.read_seconds};
}

void set_threads(int threads) {
  mixq::set_num_threads(threads);
  // oneDNN here is built on OpenMP (libgomp, loaded with libdnnl); look the
  // setter up at run time so the benchmarks need no direct -lgomp.
  using SetFn = void (*)(int);
  static auto omp_set = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (omp_set) omp_set(threads);
}

std::string ratio(double num, double den) {
  if (den <= 0) return "-";
  return fmt::format("{:.2f}x", num / den);
}

std::vector<double> alternating_medians(size_t variants, int rounds, double min_seconds,
                                        const std::function<void(size_t variant)>& call) {
  using clock = std::chrono::steady_clock;
  std::vector<std::vector<double>> times(variants);
  for (int r = 0; r < rounds; ++r)
    for (size_t j = 0; j < variants; ++j) {
      const size_t i = r % 2 == 0 ? j : variants - 1 - j;
      long calls = 0;
      const auto t0 = clock::now();
      double s = 0;
      do {
        call(i);
        ++calls;
        s = std::chrono::duration<double>(clock::now() - t0).count();
      } while (s < min_seconds);
      times[i].push_back(s / calls);
    }
  std::vector<double> medians;
  for (std::vector<double>& t : times) {
    std::sort(t.begin(), t.end());
    medians.push_back(t[t.size() / 2]);
  }
  return medians;
}

}  // namespace mixq::bench
