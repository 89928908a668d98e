#pragma once
// Ready-made FormatTraits::check functions for `mixq verify`.
#include <vector>

#include "mixq/format.hpp"
#include "mixq/layer.hpp"

namespace mixq {

// Block-scaled formats with swizzled scales (docs/FORMATS.md §2.3): per block,
// the scale must be finite and >= 0, a block holding non-zero codes must have
// a non-zero scale and vice versa, swizzle padding must be zero, and the
// block's largest |element| must match how the quantizer picks the scale
// (NVFP4: exactly 6; MXFP8: in [224, 448]); more than 5% of non-zero blocks
// off that marks the layer (catches mis-strided or mis-typed data and,
// through padding and zero blocks, linear-layout scales). Swapped NVFP4
// nibbles keep every block's codes and cannot be seen without a source:
// `verify --against` catches them through the error.
std::vector<LayerCheck> check_nvfp4_layout(const Layer& layer);
std::vector<LayerCheck> check_mxfp8_layout(const Layer& layer);

}  // namespace mixq
