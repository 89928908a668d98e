// Bulk conversions between tensor bytes and f32. Tensor data may be unaligned
// (safetensors offsets are arbitrary), so every element is read with memcpy;
// the loops stay simple enough for the compiler to vectorise the 16-bit cases.
#include <cstdint>
#include <cstring>

#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq {
namespace {

template <class T, class Fn>
void decode_each(const std::byte* src, size_t count, float* out, Fn fn) {
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, src + i * sizeof(T), sizeof(T));
    out[i] = fn(v);
  }
}

template <class T, class Fn>
void encode_each(std::span<const float> values, std::byte* dst, Fn fn) {
  for (size_t i = 0; i < values.size(); ++i) {
    const T v = fn(values[i]);
    std::memcpy(dst + i * sizeof(T), &v, sizeof(T));
  }
}

}  // namespace

std::vector<float> to_f32(const TensorView& tensor) {
  const int64_t numel = tensor.numel();
  if (numel < 0) fail("tensor '{}': negative shape {}", tensor.name, shape_str(tensor.shape));
  const size_t count = static_cast<size_t>(numel);
  // count <= bytes first, so that count * size cannot overflow.
  const size_t need = count <= tensor.data.size() ? count * dtype_size(tensor.dtype) : SIZE_MAX;
  if (tensor.data.size() != need)
    fail("tensor '{}': {} {} needs {} elements of {} bytes, found {} bytes", tensor.name,
         dtype_name(tensor.dtype), shape_str(tensor.shape), count, dtype_size(tensor.dtype),
         tensor.data.size());
  std::vector<float> out(count);
  const std::byte* src = tensor.data.data();
  switch (tensor.dtype) {
    case DType::F64: decode_each<double>(src, count, out.data(), [](double v) { return static_cast<float>(v); }); break;
    case DType::F32: if (count) std::memcpy(out.data(), src, need); break;
    case DType::F16: decode_each<uint16_t>(src, count, out.data(), f16_to_f32); break;
    case DType::BF16: decode_each<uint16_t>(src, count, out.data(), bf16_to_f32); break;
    case DType::F8_E4M3: decode_each<uint8_t>(src, count, out.data(), e4m3_to_f32); break;
    case DType::F8_E5M2: decode_each<uint8_t>(src, count, out.data(), e5m2_to_f32); break;
    case DType::I64: decode_each<int64_t>(src, count, out.data(), [](int64_t v) { return static_cast<float>(v); }); break;
    case DType::I32: decode_each<int32_t>(src, count, out.data(), [](int32_t v) { return static_cast<float>(v); }); break;
    case DType::I16: decode_each<int16_t>(src, count, out.data(), [](int16_t v) { return static_cast<float>(v); }); break;
    case DType::I8: decode_each<int8_t>(src, count, out.data(), [](int8_t v) { return static_cast<float>(v); }); break;
    case DType::U8: decode_each<uint8_t>(src, count, out.data(), [](uint8_t v) { return static_cast<float>(v); }); break;
    case DType::BOOL: decode_each<uint8_t>(src, count, out.data(), [](uint8_t v) { return v ? 1.0f : 0.0f; }); break;
    case DType::F8_E8M0: decode_each<uint8_t>(src, count, out.data(), e8m0_to_f32); break;
  }
  return out;
}

std::vector<std::byte> from_f32(DType dtype, std::span<const float> values) {
  std::vector<std::byte> out(values.size() * dtype_size(dtype));
  std::byte* dst = out.data();
  switch (dtype) {
    case DType::F64: encode_each<double>(values, dst, [](float v) { return static_cast<double>(v); }); break;
    case DType::F32: if (!values.empty()) std::memcpy(dst, values.data(), out.size()); break;
    case DType::F16: encode_each<uint16_t>(values, dst, f32_to_f16); break;
    case DType::BF16: encode_each<uint16_t>(values, dst, f32_to_bf16); break;
    case DType::F8_E4M3: encode_each<uint8_t>(values, dst, f32_to_e4m3); break;
    case DType::F8_E5M2: encode_each<uint8_t>(values, dst, f32_to_e5m2); break;
    default: fail("cannot encode f32 values as {}", dtype_name(dtype));
  }
  return out;
}

}  // namespace mixq
