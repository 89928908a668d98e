#include "support/variant_table.hpp"

#include <cstdio>

namespace mixq::bench {

void print_variant_table(const VariantColumns& columns, const std::vector<std::string>& names,
                         const std::vector<double>& seconds, double stored_bytes, const Rate& bw, double ops,
                         const char* ops_label) {
  const bool streams = stored_bytes > 0;
  std::printf("%-*s %10s %10s", columns.width, columns.first, "time", columns.versus);
  if (streams) std::printf(" %12s %11s %10s\n", "stored GB/s", "of med. bw", "of best bw");
  else if (ops > 0) std::printf(" %9s\n", ops_label);
  else std::printf("\n");
  for (size_t v = 0; v < names.size() && v < seconds.size(); ++v) {
    const double s = seconds[v];
    std::printf("%-*s %8.3fms %9.3fx", columns.width, names[v].c_str(), s * 1e3, s / seconds[0]);
    if (streams) {
      const double gbs = stored_bytes / s / 1e9;
      std::printf(" %12.1f %10.0f%% %9.0f%%\n", gbs, 100 * gbs / bw.median, 100 * gbs / bw.best);
    } else if (ops > 0) {
      std::printf(" %9.0f\n", ops / s / 1e9);
    } else {
      std::printf("\n");
    }
  }
}

}  // namespace mixq::bench
