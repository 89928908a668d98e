#pragma once
// Element types of safetensors tensors, with their on-disk names.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mixq {

// F8_E8M0 (MX power-of-two scales, §1.5) comes last so older codes keep their values.
enum class DType : uint8_t { F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, I16, I8, U8, BOOL, F8_E8M0 };
inline constexpr size_t kDTypeCount = 13;

// The safetensors spelling: "F32", "BF16", "F8_E4M3", ...
std::string_view dtype_name(DType dtype);
// Parses a safetensors dtype string; nullopt for anything mixq does not support.
std::optional<DType> parse_dtype(std::string_view name);
// Bytes per element.
size_t dtype_size(DType dtype);
// I8, U8 and the fp8 codes: a weight stored in one of these is quantized and
// needs a marker to be read.
bool is_quantized(DType dtype);
// F64, F32, F16, BF16 (the dtypes a float source checkpoint or a bias may use).
bool is_float(DType dtype);

}  // namespace mixq
