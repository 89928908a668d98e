#pragma once
// NumPy .npy arrays (format 1.0 / 2.0, little-endian, C order). Inputs may be
// <f4 or <f2; mixq writes <f4.
#include <string>
#include <string_view>
#include <vector>

#include "mixq/tensor.hpp"

namespace mixq {

struct NpyArray {
  Shape shape;
  std::vector<float> values;  // converted to f32, C order
};

NpyArray read_npy(const std::string& path);
// The same from the file's bytes; `name` stands in for the path in messages
// (the fuzzer's entry point).
NpyArray parse_npy(std::string_view bytes, const std::string& name);
void write_npy(const std::string& path, const Shape& shape, const float* values);

}  // namespace mixq
