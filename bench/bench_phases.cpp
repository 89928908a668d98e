// Where a layer's forward spends its time, phase by phase (activation
// preparation: rotation and quantization; the GEMM and its epilogue), for
// every format of the table that quantizes plus svdquant_w4a4, on the
// kernel path this CPU runs. The kernels mark their phases with
// util::PhaseScope (src/util/phase_timer.hpp), which costs one relaxed load
// when timing is off; this benchmark turns it on.
//
// A phase that runs on the calling thread around a parallel region counts wall
// time; one marked inside a parallel region (the integer family prepares each
// block of rows on the thread that multiplies it) counts the time summed over
// threads. The shares are of the summed phase time, so the two kinds compare;
// "ms/call" is the forward's wall time with timing on.
//
//   bench_phases [--quick] [--threads N] [--format NAME ..] [--shape KxN ..] [--m M ..]
//   defaults: every format, K = N = 3072, M = 1 and 1024, 2 threads
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "linear/synthetic_layer.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/linear.hpp"
#include "support/args.hpp"
#include "support/inputs.hpp"
#include "support/run_info.hpp"
#include "support/svdquant_layer.hpp"
#include "support/timing.hpp"
#include "util/phase_timer.hpp"

namespace {

using namespace mixq::bench;

BenchArgs parse(int argc, char** argv) {
  BenchArgs o = parse_args("bench_phases", argc, argv);
  if (o.shapes.empty()) o.shapes = {{3072, 3072}};
  if (o.ms.empty()) o.ms = {1, 1024};
  return o;
}

void report(const std::string& name, int64_t k, int64_t n, int64_t m, const mixq::Linear& linear, double min_s,
            int reps) {
  const std::vector<float> x = random_activations(m * k);
  std::vector<float> y(static_cast<size_t>(m * n));
  const auto call = [&] { linear.forward(x.data(), m, y.data()); };
  call();  // warm: first-call allocations stay out of the phases
  mixq::util::set_phase_timing(true);
  mixq::util::take_phase_times();
  int calls = 0;
  const Timing t = time_calls(
      [&] {
        call();
        ++calls;
      },
      min_s, reps);
  mixq::util::set_phase_timing(false);
  const auto phases = mixq::util::take_phase_times();
  double total = 0;
  for (const auto& p : phases) total += p.second;
  std::printf("%-16s %11s %5lld %-24s %9.3f", name.c_str(), (std::to_string(k) + "x" + std::to_string(n)).c_str(),
              static_cast<long long>(m), std::string(linear.kernel_name()).c_str(), t.median * 1e3);
  if (phases.empty()) std::printf("  (this kernel marks no phases)");
  for (const auto& [phase, seconds] : phases)
    std::printf("  %s %.3f ms %.0f%%", phase.c_str(), seconds / calls * 1e3, 100 * seconds / total);
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) try {
  const BenchArgs o = parse(argc, argv);
  const double min_s = o.min_seconds();
  const int reps = o.reps();
  std::printf("# %s\n", run_header().c_str());
  set_threads(o.threads);
  std::printf("# %d threads; per phase: ms per call (summed over threads where marked inside a parallel region) "
              "and share of the phase time\n",
              o.threads);
  std::printf("%-16s %11s %5s %-24s %9s  phases\n", "format", "KxN", "M", "kernel", "ms/call");
  for (auto [k, n] : o.shapes) {
    for (const mixq::FormatTraits* f : mixq::all_formats()) {
      if (!f->quantize || !o.wants(f->name)) continue;
      try {
        const auto synthetic = mixq::linear::make_random_layer(*f, nlohmann::json::object(), n, k, 1, true);
        const auto linear = mixq::Linear::create(synthetic->layer);
        for (int64_t m : o.ms) report(std::string(f->name), k, n, m, *linear, min_s, reps);
      } catch (const mixq::Error& e) {
        std::printf("%-16s %11s not run: %s\n", std::string(f->name).c_str(), (std::to_string(k) + "x" + std::to_string(n)).c_str(),
                    e.what());
      }
    }
    if (o.wants("svdquant_w4a4")) {
      const auto svd = make_svdquant(k, n, 32);
      const auto linear = mixq::Linear::create(svd->layer);
      for (int64_t m : o.ms) report("svdquant_w4a4", k, n, m, *linear, min_s, reps);
    }
  }
  return 0;
} catch (const mixq::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
