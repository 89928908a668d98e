#pragma once
// The runtime table: how each format of the format table (mixq/format.hpp)
// runs. One row per format name: the factory that prepares the layer's
// weights for its kernels and picks the kernel (through kernel_path.hpp).
// This is the second of the two tables: the on-disk records never see it.
#include <memory>
#include <span>
#include <string_view>

#include "mixq/layer.hpp"
#include "mixq/linear.hpp"

namespace mixq::linear {

using LinearFactory = std::unique_ptr<Linear> (*)(const Layer& layer, const LinearOptions& options);

struct FormatRuntime {
  std::string_view format;  // FormatTraits::name
  LinearFactory make;
};

// Every row; each record of all_formats() has exactly one (a test checks).
std::span<const FormatRuntime> runtime_table();
// The row for a format name; nullptr when none.
const FormatRuntime* find_runtime(std::string_view format);

// The factories, one per format family (each in its own *_linear.cpp).
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
