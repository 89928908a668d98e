#pragma once
// Element types of safetensors tensors, with their on-disk names.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mixq {

enum class DType : uint8_t { F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, I16, I8, U8, BOOL };

// The safetensors spelling: "F32", "BF16", "F8_E4M3", ...
std::string_view dtype_name(DType dtype);
// Parses a safetensors dtype string; nullopt for anything mixq does not support.
std::optional<DType> parse_dtype(std::string_view name);
// Bytes per element.
size_t dtype_size(DType dtype);
// F64, F32, F16, BF16 (the dtypes a float source checkpoint or a bias may use).
bool is_float(DType dtype);

}  // namespace mixq
