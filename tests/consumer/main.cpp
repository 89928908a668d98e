// Uses only installed public headers: reads the checkpoint given on the
// command line, plans it for ComfyUI and runs its first quantized layer.
#include <cstdio>
#include <string>
#include <vector>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/linear.hpp"
#include "mixq/plan.hpp"
#include "mixq/version.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer CHECKPOINT\n");
    return 2;
  }
  try {
    const mixq::Checkpoint checkpoint = mixq::Checkpoint::open(std::string(argv[1]));
    const mixq::Plan plan = mixq::Plan::build(checkpoint, {});
    for (const mixq::LayerPlan& entry : plan.layers()) {
      if (entry.layer.format == nullptr || entry.format_name().empty()) continue;
      auto linear = mixq::Linear::create(entry.layer);
      std::vector<float> x(static_cast<size_t>(linear->in_features()), 1.0f);
      std::vector<float> y(static_cast<size_t>(linear->out_features()));
      linear->forward(x.data(), 1, y.data());
      std::printf("mixq %s: %s %s [%lld x %lld] y[0]=%g\n", MIXQ_VERSION, entry.prefix().c_str(),
                  entry.format_name().c_str(), static_cast<long long>(linear->out_features()),
                  static_cast<long long>(linear->in_features()), y[0]);
      return 0;
    }
    std::fprintf(stderr, "consumer: no quantized layer in %s\n", argv[1]);
    return 1;
  } catch (const mixq::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
