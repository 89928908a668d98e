#include "support/variant_table.hpp"

#include <cstdio>

#include "kernels/stream_prefetch.hpp"
#include "support/run_info.hpp"
#include "support/timing.hpp"

namespace mixq::bench {

void default_to_decode_shapes(BenchArgs& o) {
  if (o.ms.empty()) o.ms = {1};
  if (o.shapes.empty()) o.shapes = {{3072, 12288}, {12288, 3072}, {5376, 21504}};
}

BenchArgs parse_tuning_args(const char* tool, int argc, char** argv, std::vector<std::string>& picked,
                            const ExtraFlag& more) {
  return parse_args(tool, argc, argv, [&](const std::string& flag, const auto& value) {
    if (flag != "--tuning") return more && more(flag, value);
    picked.emplace_back(value());
    return true;
  });
}

AlternatingRun start_alternating(const BenchArgs& o, const std::string& what) {
  AlternatingRun run;
  run.rounds = o.quick ? 5 : 9;
  run.min_seconds = o.quick ? 0.03 : 0.1;
  std::printf("# %s\n", run_header().c_str());
  set_threads(o.threads);
  run.buffer = std::make_shared<kernels::StreamingRead>();
  run.bw = read_bandwidth_gbs(*run.buffer, run.rounds);
  std::printf("# %s, %d threads; read bandwidth (1 GiB, 4 streams per thread, prefetch %zu B): "
              "best %.1f GB/s, median %.1f\n",
              what.c_str(), o.threads, kernels::kStreamPrefetchBytes, run.bw.best, run.bw.median);
  std::printf("# time: median of %d alternating rounds (each >= %.2f s and >= 1 call; >= %d calls in all)\n",
              run.rounds, run.min_seconds, run.rounds);
  return run;
}

VariantTimes AlternatingRun::time(size_t variants, double stored_bytes,
                                  const std::function<void(size_t variant)>& call) const {
  return alternating_with_read(buffer.get(), stored_bytes, variants, rounds, min_seconds, call);
}

void print_variant_table(const VariantColumns& columns, const std::vector<std::string>& names,
                         const VariantTimes& times, double stored_bytes, const Rate& bw, double ops,
                         const char* ops_label) {
  const bool streams = stored_bytes > 0;
  const std::vector<double>& seconds = times.seconds;
  std::printf("%-*s %10s %10s", columns.width, columns.first, "time", columns.versus);
  if (streams) std::printf(" %12s %12s %11s %10s\n", "stored GB/s", "of read bes.", "of med. bw", "of best bw");
  else if (ops > 0) std::printf(" %9s\n", ops_label);
  else std::printf("\n");
  for (size_t v = 0; v < names.size() && v < seconds.size(); ++v) {
    const double s = seconds[v];
    std::printf("%-*s %8.3fms %9.3fx", columns.width, names[v].c_str(), s * 1e3, s / seconds[0]);
    if (streams) {
      const double gbs = stored_bytes / s / 1e9;
      if (times.read_seconds > 0) std::printf(" %12.1f %11.0f%%", gbs, 100 * times.read_seconds / s);
      else std::printf(" %12.1f %12s", gbs, "-");
      std::printf(" %10.0f%% %9.0f%%\n", 100 * gbs / bw.median, 100 * gbs / bw.best);
    } else if (ops > 0) {
      std::printf(" %9.0f\n", ops / s / 1e9);
    } else {
      std::printf("\n");
    }
  }
  if (streams && times.read_seconds > 0)
    std::printf("# of read bes(ide): against reading the same %.1f MB in the same rounds: %.3f ms, %.1f GB/s\n",
                stored_bytes / 1e6, times.read_seconds * 1e3, stored_bytes / times.read_seconds / 1e9);
}

}  // namespace mixq::bench
