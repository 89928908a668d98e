#pragma once
// Inputs shared by the side-by-side benchmarks.
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "mixq/linear.hpp"

namespace mixq::bench {

// `count` activations drawn from N(0, 1) with a fixed seed (the same in every
// benchmark and run, so runs compare like with like).
std::vector<float> random_activations(int64_t count);

// Random E4M3 codes from rng, never NaN (0x7F, 0xFF): magnitudes 0x00-0x7E,
// either sign.
void random_e4m3_codes(std::mt19937& rng, std::span<uint8_t> codes);

// Separately repacked copies of one layer, handed out in turn, so that M = 1
// runs read their weights from DRAM rather than cache.
struct LinearRing {
  std::vector<std::unique_ptr<Linear>> copies;
  size_t next = 0;
  void push_back(std::unique_ptr<Linear> linear) { copies.push_back(std::move(linear)); }
  const Linear& operator[](size_t i) const { return *copies[i]; }
  const Linear& take() {
    const Linear& l = *copies[next];
    next = (next + 1) % copies.size();
    return l;
  }
};

}  // namespace mixq::bench
