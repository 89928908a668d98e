#pragma once
// Helpers shared by the format records in this folder: shape checks with
// messages that name the layer, the tensor, what was expected and what was
// found; owned output tensors; method naming; row-parallel loops.
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixq/format.hpp"
#include "mixq/layer.hpp"
#include "mixq/tensor.hpp"

namespace mixq::formats {

constexpr std::string_view kFullPrecision = "full_precision_matrix_mult";

inline int64_t roundup(int64_t a, int64_t m) { return (a + m - 1) / m * m; }

// Throws unless `t` is 2-D with positive sizes.
void require_matrix(const Layer& layer, const TensorView& t, std::string_view what);
// Throws unless `t` has exactly one of the listed shapes (`want` describes them).
void require_shape_in(const Layer& layer, const TensorView& t, std::initializer_list<Shape> shapes,
                      std::string_view want);
// A per-tensor scalar: shape [] or [1].
void require_scalar(const Layer& layer, std::string_view role);
// Reads element 0 of an F32 tensor (unaligned-safe). Validation ensured the dtype.
float read_f32(const TensorView& t, int64_t index = 0);

// The bias (when bound) gives the logical N of a format that pads its rows:
// it must satisfy stored_rows - pad < len <= stored_rows. Without a bias, N is
// the stored row count and a warning says so.
int64_t logical_rows(Layer& layer, int64_t stored_rows, int64_t pad, std::string_view format);

// "<method>", or "<full_name>" when the marker asks for full-precision matmul.
std::string method_or_full_precision(const Layer& layer, std::string method, std::string full_name);

// ConvRot group of a layer's params, checked: a power of 4 dividing `k`.
int64_t checked_convrot_group(const Layer& layer, int64_t k);

// Output helpers for quantizers: a tensor named by its role.
OwnedTensor owned_bytes(std::string role, DType dtype, Shape shape, const void* data, size_t bytes);
OwnedTensor owned_f32(std::string role, Shape shape, const std::vector<float>& values);
OwnedTensor owned_f32_scalar(std::string role, float value);  // shape []

// Marker with "format" and, when set in params, full_precision_matrix_mult.
nlohmann::json base_marker(std::string_view format, const nlohmann::json& params);
// A boolean / integer / string parameter from quantizer params, with default.
bool param_bool(const nlohmann::json& params, std::string_view key, bool fallback);
int64_t param_int(const nlohmann::json& params, std::string_view key, int64_t fallback);
std::string param_string(const nlohmann::json& params, std::string_view key, std::string fallback);

// Runs body(row_begin, row_end) over [0, rows) on the kernel thread pool.
void for_rows(int64_t rows, int64_t row_cost, const std::function<void(int64_t, int64_t)>& body);

}  // namespace mixq::formats
