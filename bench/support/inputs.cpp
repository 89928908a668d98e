#include "support/inputs.hpp"

#include <random>

namespace mixq::bench {

std::vector<float> random_activations(int64_t count) {
  std::vector<float> x(static_cast<size_t>(count));
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(rng);
  return x;
}

void random_e4m3_codes(std::mt19937& rng, std::span<uint8_t> codes) {
  for (uint8_t& c : codes) c = static_cast<uint8_t>(rng() % 0x7F | (rng() & 0x80));
}

}  // namespace mixq::bench
