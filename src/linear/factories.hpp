#pragma once
// The run-time side of each format record: FormatTraits::make_linear points at
// one of these. Each builds the layer's prepared weights and picks its kernel.
#include <memory>

#include "mixq/layer.hpp"
#include "mixq/linear.hpp"

namespace mixq::linear {

std::unique_ptr<Linear> make_unquantized(const Layer& layer, const LinearOptions& options);
std::unique_ptr<Linear> make_fp8(const Layer& layer, const LinearOptions& options);
std::unique_ptr<Linear> make_nvfp4(const Layer& layer, const LinearOptions& options);
std::unique_ptr<Linear> make_mxfp8(const Layer& layer, const LinearOptions& options);
std::unique_ptr<Linear> make_int8(const Layer& layer, const LinearOptions& options);
std::unique_ptr<Linear> make_convrot_w4a4(const Layer& layer, const LinearOptions& options);
std::unique_ptr<Linear> make_asym_w4a8_int8(const Layer& layer, const LinearOptions& options);
std::unique_ptr<Linear> make_awq_w4a16(const Layer& layer, const LinearOptions& options);
std::unique_ptr<Linear> make_svdquant_w4a4(const Layer& layer, const LinearOptions& options);

}  // namespace mixq::linear
