// mixq-memory-probe CHECKPOINT [--forward M]... [--forward-prefix P]... [--keep-pages] [--threads N]
//
// One fresh process that does what a loader does and reports what it cost:
// opens the checkpoint, builds the Linear of every layer (in file order of
// the layer list), then runs one forward per --forward M (M = 1 over every
// layer; a larger M only over the layers whose prefix starts with one of
// --forward-prefix, e.g. one transformer block). Prints one JSON object:
//   file_bytes, weight_bytes (all tensor data), layers, max_layer_bytes,
//   base / loaded / forward: {"anon", "file", "rss", "hwm"} in bytes from
//     /proc/self/status (RssAnon, RssFile + RssShmem, VmRSS, VmHWM); the
//     high-water mark is reset (clear_refs 5) before the load, so loaded.hwm
//     is the peak during the load,
//   load_s, forward_s: {M: seconds}, kernels: {kernel name: layers}.
// Used by tests/test_memory_residency.cpp (small checkpoints, every format)
// and by mixq-bench-memory (FLUX-sized; bench/memory/flux.cpp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/layer.hpp"
#include "mixq/linear.hpp"
#include "mixq/marker.hpp"
#include "mixq/threads.hpp"

namespace {

using Clock = std::chrono::steady_clock;

nlohmann::json memory() {
  std::ifstream in("/proc/self/status");
  std::map<std::string, int64_t> kib;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t value = 0;
    if (fields >> key >> value && !key.empty() && key.back() == ':') kib[key.substr(0, key.size() - 1)] = value;
  }
  return {{"anon", kib["RssAnon"] * 1024},
          {"file", (kib["RssFile"] + kib["RssShmem"]) * 1024},
          {"rss", kib["VmRSS"] * 1024},
          {"hwm", kib["VmHWM"] * 1024}};
}

void reset_peak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // resets VmHWM to the current RSS (Linux >= 4.0)
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int run(int argc, char** argv) {
  std::string path;
  std::vector<int64_t> ms;
  std::vector<std::string> prefixes;
  mixq::LinearOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) mixq::fail("{} needs a value", arg);
      return argv[++i];
    };
    if (arg == "--forward") ms.push_back(std::stoll(value()));
    else if (arg == "--forward-prefix") prefixes.push_back(value());
    else if (arg == "--keep-pages") options.release_file_pages = false;
    else if (arg == "--threads") mixq::set_num_threads(std::stoi(value()));
    else if (path.empty() && arg.rfind("--", 0) != 0) path = arg;
    else mixq::fail("unknown argument '{}'", arg);
  }
  if (path.empty()) mixq::fail("usage: mixq-memory-probe CHECKPOINT [--forward M]... [--forward-prefix P]...");

  nlohmann::json out;
  out["base"] = memory();
  reset_peak();
  const Clock::time_point start = Clock::now();
  const mixq::Checkpoint checkpoint = mixq::Checkpoint::open(path);
  const mixq::LayerSet set = mixq::group_layers(checkpoint, mixq::collect_markers(checkpoint));
  uint64_t file_bytes = 0, weight_bytes = 0, max_layer = 0;
  for (const mixq::FileInfo& f : checkpoint.files()) file_bytes += f.bytes;
  for (const mixq::TensorView& t : checkpoint.tensors()) weight_bytes += t.data.size();
  std::vector<std::unique_ptr<mixq::Linear>> linears;
  std::map<std::string, int> kernels;
  for (const mixq::Layer& layer : set.layers) {
    max_layer = std::max<uint64_t>(max_layer, layer.bytes());
    linears.push_back(mixq::Linear::create(layer, options));
    ++kernels[std::string(linears.back()->kernel_name())];
  }
  checkpoint.check_intact();
  out["load_s"] = seconds_since(start);
  out["loaded"] = memory();

  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t m : ms) {
    // Inputs drawn before the clock starts; one buffer serves every layer.
    std::vector<char> selected(linears.size(), 0);
    int64_t max_in = 0, max_out = 0;
    for (size_t i = 0; i < linears.size(); ++i) {
      bool use = m == 1 || prefixes.empty();
      for (const std::string& p : prefixes) use = use || set.layers[i].prefix.rfind(p, 0) == 0;
      selected[i] = use;
      if (use) max_in = std::max(max_in, linears[i]->in_features()), max_out = std::max(max_out, linears[i]->out_features());
    }
    std::vector<float> x(static_cast<size_t>(m * max_in)), y(static_cast<size_t>(m * max_out));
    for (float& v : x) v = normal(rng);
    const Clock::time_point t = Clock::now();
    for (size_t i = 0; i < linears.size(); ++i)
      if (selected[i]) linears[i]->forward(x.data(), m, y.data());
    out["forward_s"][std::to_string(m)] = seconds_since(t);
    if (m == 1) out["forward"] = memory();
  }
  if (!out.contains("forward")) out["forward"] = memory();
  out["file_bytes"] = file_bytes;
  out["weight_bytes"] = weight_bytes;
  out["layers"] = set.layers.size();
  out["max_layer_bytes"] = max_layer;
  out["kernels"] = kernels;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mixq-memory-probe: error: %s\n", e.what());
    return 1;
  }
}
