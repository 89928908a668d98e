#pragma once
// Small helpers shared by the integer-4 formats asym_w4a8_int8, awq_w4a16 and
// svdquant_w4a4: nibble access (docs/FORMATS.md §2.2 b: low nibble = even
// element) and the dtype / shape checks their `validate` functions use.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "mixq/error.hpp"
#include "mixq/layer.hpp"
#include "mixq/numeric.hpp"

namespace mixq::formats::w4 {

// Nibble k (0-based) of a row of packed bytes: byte k/2, low nibble for even k.
inline uint8_t nibble(const std::byte* row, int64_t k) {
  const auto byte = static_cast<uint8_t>(row[k >> 1]);
  return (k & 1) ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0x0F);
}
// Two's complement 4-bit value: nibble n -> n - 16 when n >= 8.
inline int signed_nibble(uint8_t n) { return n >= 8 ? int(n) - 16 : int(n); }
// Packs v[2j] into the low and v[2j+1] into the high nibble.
inline std::byte pack_pair(int lo, int hi) {
  return static_cast<std::byte>((lo & 0x0F) | ((hi & 0x0F) << 4));
}

// A rounded code clamped to [lo, hi], as an integer. A NaN (the quantizers'
// arithmetic on weights near the float range: (hi - lo) / 15 overflowing to
// an infinite scale) becomes lo instead of an undefined float-to-integer
// conversion; its layer's scale is then not finite, and quantize refuses a
// layer that does not decode to finite values.
inline int clamped_code(float q, float lo, float hi) {
  return static_cast<int>(std::isnan(q) ? lo : std::clamp(q, lo, hi));
}

inline std::string dtype_list(std::initializer_list<DType> dtypes) {
  std::string s;
  for (DType d : dtypes) {
    if (!s.empty()) s += " or ";
    s += dtype_name(d);
  }
  return s;
}

// Throws unless the layer's tensor `role` has one of `dtypes`.
inline const TensorView& require_dtype(const Layer& layer, std::string_view role,
                                       std::initializer_list<DType> dtypes) {
  const TensorView& t = layer.tensor(role);
  for (DType d : dtypes)
    if (t.dtype == d) return t;
  fail("layer '{}': tensor '{}' must be {}, found {}", layer.prefix, t.name, dtype_list(dtypes),
       dtype_name(t.dtype));
}

// Throws unless the tensor has exactly `shape`.
inline void require_shape(const Layer& layer, const TensorView& t, const Shape& shape,
                          std::string_view why) {
  if (t.shape != shape)
    fail("layer '{}': tensor '{}' must have shape {} ({}), found {}", layer.prefix, t.name,
         shape_str(shape), why, shape_str(t.shape));
}

// A float tensor (F32/F16/BF16/F8) as f32 values.
inline std::vector<float> floats(const TensorView& t) { return to_f32(t); }

// Fetches an integer marker parameter that must be positive.
inline int64_t positive_param(const Layer& layer, std::string_view key) {
  const int64_t v = layer.param_int(key);
  if (v <= 0) fail("layer '{}': marker parameter \"{}\" must be positive, found {}", layer.prefix, key, v);
  return v;
}

}  // namespace mixq::formats::w4
