#pragma once
// Inputs shared by the side-by-side benchmarks.
#include <cstdint>
#include <vector>

namespace mixq::bench {

// `count` activations drawn from N(0, 1) with a fixed seed (the same in every
// benchmark and run, so runs compare like with like).
std::vector<float> random_activations(int64_t count);

}  // namespace mixq::bench
