// libFuzzer target: arbitrary bytes as one safetensors file on disk, opened
// as a checkpoint (mapped, as `mixq linear` and the Python loaders open one,
// so that the layers which read their weights in place from the file do so
// here too), then every layer run as a loaded model runs it:
// Linear::create with the automatic and the reference kernels, forward at 1,
// 5 and 17 tokens (the kernels' one-token, few-token and many-token paths)
// and on rows of NaN, infinite, huge and denormal activations,
// `mixq verify`'s checks (validation, dequantize, the format's own layout
// check), and each rank's share of a 2-way tensor-parallel split
// (shard_layer: the format's shard rule) built, dequantized and run.
// mixq::Error is the only acceptable way to reject input; a crash, a
// sanitizer report or any other exception is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/layer.hpp"
#include "mixq/linear.hpp"
#include "mixq/marker.hpp"
#include "mixq/plan.hpp"
#include "mixq/shard.hpp"
#include "mixq/verify.hpp"

namespace {

// Layers past this many weights are validated and verified but not run, so
// that one input stays a few milliseconds under the sanitizers.
constexpr int64_t kMaxWeights = int64_t{1} << 16;
constexpr int64_t kTokenCounts[] = {1, 5, 17};

// One file per fuzzing process, rewritten for every input.
const std::string& scratch_path() {
  static const std::string path = [] {
    std::string p = "/tmp/mixq_fuzz_layers_XXXXXX";
    const int fd = mkstemp(p.data());
    if (fd < 0) std::abort();
    close(fd);
    std::atexit([] { std::remove(scratch_path().c_str()); });
    return p;
  }();
  return path;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) std::abort();
}

void run_layer(const mixq::Layer& layer, mixq::KernelChoice kernel) {
  const auto linear = mixq::Linear::create(layer, {.kernel = kernel});
  const int64_t k = linear->in_features(), n = linear->out_features();
  if (k <= 0 || n <= 0 || k * n > kMaxWeights) return;
  for (const int64_t m : kTokenCounts) {
    std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 13) - 6) * 0.375f;
    linear->forward(x.data(), m, y.data());
  }
  // Activations the quantizers must take without undefined behaviour: a
  // row with a NaN, one with an infinity, one near the float range, one of
  // denormals, one of zeros.
  constexpr float kSpecial[] = {NAN, INFINITY, 3e38f, 1e-40f, 0.0f};
  constexpr int64_t m = std::size(kSpecial);
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < k; ++i)
      x[r * k + i] = i % 3 == 0 ? kSpecial[r] : kSpecial[r] == 0.0f ? 0.0f : static_cast<float>(i % 5) - 2.0f;
  linear->forward(x.data(), m, y.data());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = scratch_path();
  write_file(path, data, size);
  try {
    const auto checkpoint = mixq::Checkpoint::open(path);
    const auto markers = mixq::collect_markers(checkpoint);
    const auto layers = mixq::group_layers(checkpoint, markers);
    volatile bool ok = mixq::verify_checkpoint(checkpoint, nullptr).ok();
    (void)ok;
    for (const mixq::Layer& layer : layers.layers) {
      if (!layer.problem.empty() || !layer.format) continue;
      for (const auto kernel : {mixq::KernelChoice::automatic, mixq::KernelChoice::reference}) {
        try {
          run_layer(layer, kernel);
        } catch (const mixq::Error&) {
        }
      }
    }
    const mixq::Plan plan = mixq::Plan::build(checkpoint, {.tp = 2});
    for (const mixq::LayerPlan& lp : plan.layers())
      for (int rank = 0; rank < 2; ++rank) {
        try {
          const mixq::LayerShard shard = mixq::shard_layer(plan, lp, rank, 2);
          const mixq::Layer& part = shard.layer();
          const int64_t weights = part.out_features * part.in_features;
          if (weights <= 0 || weights > kMaxWeights) continue;
          if (part.format->dequantize) {
            std::vector<float> w(static_cast<size_t>(weights));
            part.format->dequantize(part, mixq::Basis::original, w.data());
          }
          run_layer(part, mixq::KernelChoice::automatic);
        } catch (const mixq::Error&) {
        }
      }
  } catch (const mixq::Error&) {
  }
  return 0;
}
