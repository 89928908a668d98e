#pragma once
// The table the *_tunings benchmarks print for variants timed in alternating
// rounds (alternating_medians): a header, then a row per variant with its
// median time and its ratio to the first variant's. Weights streamed from a
// ring (stored_bytes > 0) add the stored bytes' rate and its fraction of the
// run's calibrated read (median and best pass); otherwise `ops` per call > 0
// adds the rate in G`ops_label`.
#include <string>
#include <vector>

#include "support/calibrate.hpp"

namespace mixq::bench {

struct VariantColumns {
  const char* first;   // "tuning", "weights"
  const char* versus;  // "vs default", "vs packed"
  int width;           // of the first column
};

void print_variant_table(const VariantColumns& columns, const std::vector<std::string>& names,
                         const std::vector<double>& seconds, double stored_bytes, const Rate& bw, double ops = 0,
                         const char* ops_label = "int GOPS");

}  // namespace mixq::bench
