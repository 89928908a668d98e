#include "support/args.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "mixq/error.hpp"

namespace mixq::bench {
namespace {

// `--shape KxN`: {K, N}, both positive.
std::pair<int64_t, int64_t> parse_shape(const char* tool, const char* text) {
  long k = 0, n = 0;
  char tail = 0;
  if (std::sscanf(text, "%ldx%ld%c", &k, &n, &tail) != 2 || k <= 0 || n <= 0)
    fail("{}: --shape expects KxN (two positive integers), found '{}'", tool, text);
  return {k, n};
}

}  // namespace

bool BenchArgs::wants(std::string_view format) const {
  return formats.empty() || std::find(formats.begin(), formats.end(), format) != formats.end();
}

BenchArgs parse_args(const char* tool, int argc, char** argv, const ExtraFlag& extra) {
  BenchArgs o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc) fail("{}: {} expects a value", tool, a);
      return argv[++i];
    };
    if (a == "--quick") o.quick = true;
    else if (a == "--in-cache") o.in_cache = true;
    else if (a == "--threads") o.threads = std::max(1, std::atoi(value()));
    else if (a == "--format") o.formats.emplace_back(value());
    else if (a == "--m") o.ms.push_back(std::max(1L, std::atol(value())));
    else if (a == "--shape") o.shapes.push_back(parse_shape(tool, value()));
    else if (!extra || !extra(a, value))
      fail("{}: unknown argument '{}' (see the comment at the top of bench/{}.cpp)", tool, a, tool);
  }
  return o;
}

void require_k_multiple(const BenchArgs& o, const char* tool, int64_t multiple, const char* what) {
  for (auto [k, n] : o.shapes)
    if (k % multiple != 0) mixq::fail("{}: K = {} is not a multiple of {} ({})", tool, k, what, multiple);
}

}  // namespace mixq::bench
