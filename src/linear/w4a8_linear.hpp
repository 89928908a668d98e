#pragma once
// Shared by the Linears of asym_w4a8_int8, awq_w4a16 and svdquant_w4a4: a
// dense f32 linear over an already dequantized weight, used for
// full_precision_matrix_mult layers, W4A8 layers with a correction term (the
// eager float path of docs/FORMATS.md §3.7) and the AWQ reference.
#include <memory>
#include <string>
#include <vector>

#include "mixq/layer.hpp"
#include "mixq/linear.hpp"

namespace mixq::linear {

// y = x·Wᵀ + b with f32 accumulation; `weight` [out, in] f32. The fast path
// is the float family's f32 panel GEMM (AVX-512), the reference plain loops.
// `tag` prefixes the kernel name ("dequant" -> "dequant:ref").
std::unique_ptr<Linear> make_dense_f32(const Layer& layer, std::vector<float> weight, const LinearOptions& options,
                                       std::string tag);

}  // namespace mixq::linear
