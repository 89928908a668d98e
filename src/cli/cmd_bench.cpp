// mixq bench [--format F[:key=value,..] ..] [--shape MxKxN ..] [--threads N] [--kernel auto|ref] [--json]
// For every format of the table that can quantize (or those named), quantizes
// random weights, writes the layer to a file in the temp directory and builds
// its Linear from there, as from a checkpoint (so INT8 and ConvRot W4A4 run
// on their weights in place: "in_place" in --json), and times forward. Prints time,
// GOPS (2·M·N·K per call), weight bytes streamed per second, and fractions of
// this machine's limits, calibrated at the start of the same run (int8 VNNI,
// int8 AMX and bf16 dot peaks, streaming read bandwidth: mixq/machine.hpp,
// about 1 s; on CPUs without AVX-512 VNNI/BF16 the int8 / bf16 fractions are
// omitted, without AMX-INT8 the AMX one).
// The first line states the load average (the host may be shared).
// The side-by-side comparison with oneDNN is `make bench` (bench/), see
// BENCHMARKS.md. Generic over all_formats(): no per-format code.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "io/strict_json.hpp"
#include "linear/synthetic_layer.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/linear.hpp"
#include "mixq/machine.hpp"
#include "mixq/version.hpp"

namespace mixq::cli {
namespace {

// Measured limits of this run; 0 where the calibration cannot run.
using Limits = MachineLimits;

Limits calibrate(int threads) {
  // Short: 3 repetitions of ~25 ms per peak, 256 MiB read 3 times (beyond the L3 of most CPUs).
  return measure_machine(threads, 3, size_t(256) << 20);
}

// part / whole, or null when the whole was not measured.
nlohmann::json fraction(double part, double whole) { return whole > 0 ? nlohmann::json(part / whole) : nlohmann::json(); }
std::string percent(double part, double whole) {
  return whole > 0 ? fmt::format("{:.1f}%", 100 * part / whole) : std::string("-");
}

struct Options {
  std::vector<std::string> formats;
  std::vector<std::string> shapes;
  std::string kernel = "auto";
  int threads = 0;
  bool json = false;
};

struct Shape3 {
  int64_t m, k, n;
};

Shape3 parse_shape(const std::string& s) {
  Shape3 out{};
  char x1 = 0, x2 = 0;
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%ld%c%ld%c%ld%n", &out.m, &x1, &out.k, &x2, &out.n, &consumed) != 5 ||
      x1 != 'x' || x2 != 'x' || consumed != static_cast<int>(s.size()) || out.m <= 0 || out.k <= 0 ||
      out.n <= 0 || out.m * out.k > (int64_t(1) << 31) || out.n * out.k > (int64_t(1) << 31))
    throw UsageError(fmt::format("--shape '{}': expected MxKxN with positive sizes (e.g. 4096x3072x3072)", s));
  return out;
}

// "name" or "name:key=value,key=value"; values parse as JSON when they can
// (true, 64) and are strings otherwise (int8).
std::pair<const FormatTraits*, nlohmann::json> parse_format(const std::string& spec) {
  const auto colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  const FormatTraits* f = name == "unquantized" ? &unquantized_format() : find_format(name);
  if (!f) throw UsageError(fmt::format("--format '{}': unknown format", name));
  nlohmann::json params = nlohmann::json::object();
  if (colon != std::string::npos) {
    std::string rest = spec.substr(colon + 1);
    size_t pos = 0;
    while (pos <= rest.size()) {
      const size_t comma = std::min(rest.find(',', pos), rest.size());
      const std::string item = rest.substr(pos, comma - pos);
      const auto eq = item.find('=');
      if (eq == std::string::npos || eq == 0)
        throw UsageError(fmt::format("--format '{}': expected key=value, found '{}'", spec, item));
      const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
      auto v = try_parse_strict_json(value);
      params[key] = v ? std::move(*v) : nlohmann::json(value);
      pos = comma + 1;
    }
  }
  return {f, params};
}

double seconds_per_call(const Linear& linear, const float* x, int64_t m, float* y) {
  using clock = std::chrono::steady_clock;
  linear.forward(x, m, y);  // warm-up (first touch, caches)
  std::vector<double> reps;
  const auto start = clock::now();
  while (reps.size() < 5 || (std::chrono::duration<double>(clock::now() - start).count() < 0.5 && reps.size() < 1000)) {
    const auto t0 = clock::now();
    linear.forward(x, m, y);
    reps.push_back(std::chrono::duration<double>(clock::now() - t0).count());
  }
  std::sort(reps.begin(), reps.end());
  return reps[reps.size() / 2];
}

// The 1, 5 and 15 minute load averages ("0.52 0.58 0.59").
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return in ? a + " " + b + " " + c : std::string("unknown");
}

void run(const Options& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  const int threads = num_threads();
  std::vector<std::pair<const FormatTraits*, nlohmann::json>> formats;
  if (o.formats.empty()) {
    for (const FormatTraits* f : all_formats())
      if (f->quantize) formats.emplace_back(f, nlohmann::json::object());
  } else {
    for (const std::string& s : o.formats) formats.push_back(parse_format(s));
  }
  std::vector<Shape3> shapes;
  for (const std::string& s : o.shapes) shapes.push_back(parse_shape(s));
  // The shapes of issue 5's targets: K = N = 3072 at M = 1 and 4096, and the
  // MiniMax-H3 MLP shapes at M = 1.
  if (shapes.empty()) shapes = {{1, 3072, 3072}, {4096, 3072, 3072}, {1, 5376, 21504}, {1, 14336, 5376}};

  const std::string load = load_average();
  const Limits limits = calibrate(threads);
  set_num_threads(threads);
  nlohmann::json results = nlohmann::json::array();
  if (!o.json) std::cout << fmt::format("# mixq {}, load average {}\n", MIXQ_VERSION, load);
  if (!o.json)
    std::cout << fmt::format("{:<34} {:>16} {:<12} {:>10} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7}\n", "format",
                             "MxKxN", "kernel", "time", "GOPS", "w GB/s", "%int8", "%bf16", "%read", "%amx");
  for (const auto& [format, params] : formats) {
    for (const Shape3& s : shapes) {
      nlohmann::json r = {{"format", format->name}, {"params", params}, {"m", s.m}, {"k", s.k},
                          {"n", s.n}, {"threads", threads}};
      std::string label = std::string(format->name);
      if (!params.empty()) label += ":" + params.dump();
      try {
        auto layer = linear::make_random_layer(*format, params, s.n, s.k, 42);
        const auto mapped = linear::map_synthetic_layer(*layer);
        LinearOptions lo;
        lo.kernel = o.kernel == "ref" ? KernelChoice::reference : KernelChoice::automatic;
        auto lin = Linear::create(*mapped->layer, lo);
        std::vector<float> x(static_cast<size_t>(s.m * lin->in_features()));
        std::mt19937 rng(3);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (float& v : x) v = nd(rng);
        std::vector<float> y(static_cast<size_t>(s.m * s.n));
        const double t = seconds_per_call(*lin, x.data(), s.m, y.data());
        const double gops = 2.0 * s.m * s.n * s.k / t / 1e9;
        const double wbytes = static_cast<double>(layer->layer.bytes());
        r["kernel"] = lin->kernel_name();
        r["in_place"] = lin->reads_file_in_place();
        r["seconds"] = t;
        r["gops"] = gops;
        r["weight_bytes"] = wbytes;
        r["weight_gbs"] = wbytes / t / 1e9;
        r["fraction_int8_peak"] = fraction(gops, limits.int8_gops);
        r["fraction_bf16_peak"] = fraction(gops, limits.bf16_gflops);
        r["fraction_amx_peak"] = fraction(gops, limits.amx_int8_gops);
        r["fraction_read_bandwidth"] = fraction(wbytes / t / 1e9, limits.read_gbs);
        r["fraction_read_bandwidth_best"] = fraction(wbytes / t / 1e9, limits.read_best_gbs);
        r["error"] = nullptr;
        if (!o.json)
          std::cout << fmt::format("{:<34} {:>16} {:<12} {:>8.3f}ms {:>9.1f} {:>9.1f} {:>7} {:>7} {:>7} {:>7}\n",
                                   label, fmt::format("{}x{}x{}", s.m, s.k, s.n), lin->kernel_name(),
                                   t * 1e3, gops, wbytes / t / 1e9, percent(gops, limits.int8_gops),
                                   percent(gops, limits.bf16_gflops), percent(wbytes / t / 1e9, limits.read_gbs),
                                   percent(gops, limits.amx_int8_gops));
      } catch (const Error& e) {
        r["error"] = e.what();
        if (!o.json)
          std::cout << fmt::format("{:<34} {:>16} not run: {}\n", label,
                                   fmt::format("{}x{}x{}", s.m, s.k, s.n), e.what());
      }
      results.push_back(r);
    }
  }
  if (o.json) {
    auto measured = [](double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(); };
    nlohmann::json out = {{"threads", threads},
                          {"limits", {{"int8_peak_gops", measured(limits.int8_gops)},
                                      {"amx_int8_peak_gops", measured(limits.amx_int8_gops)},
                                      {"bf16_peak_gflops", measured(limits.bf16_gflops)},
                                      {"read_bandwidth_gbs", measured(limits.read_gbs)},
                                      {"read_bandwidth_best_gbs", measured(limits.read_best_gbs)},
                                      {"source", "measured at the start of this run (median of 3; read: also the best)"}}},
                          {"load_average", load},
                          {"results", results}};
    print_json(std::move(out));
  } else {
    if (limits.bf16_gflops > 0)
      std::cout << fmt::format(
          "limits measured in this run ({} threads): int8 VNNI {:.0f} GOPS, {}bf16 dot {:.0f} GFLOPS, "
          "read {:.1f} GB/s (256 MiB); the same weights are reused between calls, so layers smaller than the "
          "last-level cache can exceed the read bandwidth; oneDNN side by side and DRAM-bound M=1: make bench\n",
          threads, limits.int8_gops,
          limits.amx_int8_gops > 0 ? fmt::format("int8 AMX {:.0f} GOPS, ", limits.amx_int8_gops) : "",
          limits.bf16_gflops, limits.read_gbs);
    else if (limits.read_gbs > 0)
      std::cout << fmt::format(
          "limits measured in this run ({} threads): no AVX-512 (no bf16 dot peak), int8 dot (ymm) {:.0f} GOPS, "
          "f32 FMA (ymm) {:.0f} GFLOPS, read {:.1f} GB/s (256 MiB, median; best {:.1f}); the same weights are "
          "reused between calls; oneDNN side by side and DRAM-bound M=1: make bench\n",
          threads, limits.int8_gops, limits.f32_gflops, limits.read_gbs, limits.read_best_gbs);
    else
      std::cout << "limits not measured: the calibration loops need AVX2 or AVX-512 VNNI/BF16\n";
  }
}

}  // namespace

void add_bench(CLI::App& root) {
  auto* cmd = root.add_subcommand("bench", "Time the fast kernels per format and shape");
  static Options o;
  cmd->add_option("--format", o.formats, "format[:key=value,..] (default: every format that can quantize)");
  cmd->add_option("--shape", o.shapes, "MxKxN (default: 1x3072x3072, 4096x3072x3072, 1x5376x21504, 1x14336x5376)");
  cmd->add_option("--threads", o.threads, "threads (default: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--kernel", o.kernel, "auto (default) or ref")->check(CLI::IsMember({"auto", "ref"}));
  cmd->add_flag("--json", o.json, "print one JSON object");
  cmd->callback([] { run(o); });
}

}  // namespace mixq::cli
