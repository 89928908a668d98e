#pragma once
// svdquant_w4a4 has no quantizer (it needs calibration): a random natural-
// layout layer with int4 codes in [-7, 7], small group scales, a rank-`rank`
// low-rank pair and a smooth factor (BF16 tensors, as nunchaku ships them).
#include <cstdint>
#include <memory>
#include <vector>

#include "mixq/layer.hpp"
#include "mixq/tensor.hpp"

namespace mixq::bench {

struct SvdLayer {
  std::vector<OwnedTensor> tensors;
  Layer layer;
};

std::unique_ptr<SvdLayer> make_svdquant(int64_t k, int64_t n, int64_t rank);

}  // namespace mixq::bench
