#pragma once
// The table the *_tunings benchmarks print for variants timed in alternating
// rounds (AlternatingRun::time): a header, then a row per variant with its
// median time and its ratio to the first variant's. Weights streamed from a
// ring (stored_bytes > 0) add the stored bytes' rate and its fraction of the
// read of the same bytes timed beside them (VariantTimes::read_seconds) and
// of the run's calibrated read (median and best pass); otherwise `ops` per
// call > 0 adds the rate in G`ops_label`.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/args.hpp"
#include "support/calibrate.hpp"
#include "support/timing.hpp"

namespace mixq::bench {

// M = 1 at issue 14 §2's three decode shapes (K=3072 N=12288, K=12288
// N=3072, K=5376 N=21504), where the flags chose no M or shape.
void default_to_decode_shapes(BenchArgs& o);

// The start of an alternating-rounds benchmark: prints the run header, sets
// the threads, calibrates the read bandwidth and prints it after `what` (the
// variants' kernel, e.g. "avx2 tunings"), then the rounds line.
struct AlternatingRun {
  int rounds = 0;        // >= 1 call per round: >= 5 calls per point
  double min_seconds = 0;  // per variant and round
  Rate bw;
  std::shared_ptr<kernels::StreamingRead> buffer;  // the calibration's 1 GiB, read again beside the variants
  // alternating_with_read over call(0 .. variants - 1) with this run's
  // rounds, reading stored_bytes from `buffer` beside them where
  // stored_bytes > 0 (a shared host's read moved 1.5-2x within seconds on
  // the VMs this was written on: BENCHMARKS.md).
  VariantTimes time(size_t variants, double stored_bytes, const std::function<void(size_t variant)>& call) const;
};
AlternatingRun start_alternating(const BenchArgs& o, const std::string& what);

// parse_args plus the tunings benchmarks' `--tuning TEXT` (repeatable),
// each TEXT appended to `picked` (for keep_picked); other flags go to `more`.
BenchArgs parse_tuning_args(const char* tool, int argc, char** argv, std::vector<std::string>& picked,
                            const ExtraFlag& more = {});

// The variants whose name contains one of `picked` (all when none is),
// the first (the default, which the ratios are against) always kept.
template <class Variant>
std::vector<Variant> keep_picked(std::vector<Variant> variants, const std::vector<std::string>& picked) {
  if (picked.empty() || variants.empty()) return variants;
  std::vector<Variant> kept{variants.front()};
  for (size_t v = 1; v < variants.size(); ++v)
    for (const std::string& text : picked)
      if (std::string(variants[v].name).find(text) != std::string::npos) {
        kept.push_back(variants[v]);
        break;
      }
  return kept;
}

// The variants' names, in order (the rows of print_variant_table).
template <class Variant>
std::vector<std::string> variant_names(const std::vector<Variant>& variants) {
  std::vector<std::string> names;
  for (const Variant& v : variants) names.push_back(v.name);
  return names;
}

struct VariantColumns {
  const char* first;   // "tuning", "weights"
  const char* versus;  // "vs default", "vs packed"
  int width;           // of the first column
};

void print_variant_table(const VariantColumns& columns, const std::vector<std::string>& names,
                         const VariantTimes& times, double stored_bytes, const Rate& bw, double ops = 0,
                         const char* ops_label = "int GOPS");

}  // namespace mixq::bench
