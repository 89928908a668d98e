#include "mixq/dtype.hpp"

#include <array>

namespace mixq {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, kDTypeCount> kDTypes{{
    {DType::F64, "F64", 8},     {DType::F32, "F32", 4},         {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},   {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
    {DType::I64, "I64", 8},     {DType::I32, "I32", 4},         {DType::I16, "I16", 2},
    {DType::I8, "I8", 1},       {DType::U8, "U8", 1},           {DType::BOOL, "BOOL", 1},
    {DType::F8_E8M0, "F8_E8M0", 1},
}};

}  // namespace

std::string_view dtype_name(DType dtype) { return kDTypes[static_cast<size_t>(dtype)].name; }

size_t dtype_size(DType dtype) { return kDTypes[static_cast<size_t>(dtype)].size; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

bool is_quantized(DType dtype) {
  return dtype == DType::I8 || dtype == DType::U8 || dtype == DType::F8_E4M3 || dtype == DType::F8_E5M2 ||
         dtype == DType::F8_E8M0;
}

bool is_float(DType dtype) {
  return dtype == DType::F64 || dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

}  // namespace mixq
