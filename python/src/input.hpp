#pragma once
// Activation arrays from Python: NumPy arrays and anything with __dlpack__
// (PyTorch CPU tensors), float32 / float16 / bfloat16 / float64, any strides.
#include <cstdint>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

namespace mixq::py {

namespace nb = nanobind;

struct Input {
  nb::ndarray<nb::ro> array;    // holds a reference to the caller's object
  std::vector<size_t> leading;  // shape without the last (K) dimension
  int64_t rows = 0;             // product of `leading`
  int64_t cols = 0;             // K
  // f32, C-contiguous, aligned and not overlapping the output: used in place.
  bool zero_copy = false;
  std::vector<float> converted;

  // The rows as contiguous f32: the caller's memory when zero_copy, else a
  // converted copy (the whole array, not row chunks: NVFP4 and FP8 derive a
  // dynamic activation scale from all rows, so forward must see them at once).
  // Does not touch Python objects (call with the GIL released). `y` and
  // `y_count` are the output, to detect aliasing.
  const float* prepare(const float* y, int64_t y_count);
};

// Checks x (last dimension == k) and wraps it; throws mixq::Error naming
// `where` for a wrong type, device, dtype or shape.
Input read_input(nb::handle x, int64_t k, const std::string& where);

// The caller's output array. Keep it until the last write through `data`:
// `array` holds the DLPack managed tensor, and a producer may free the buffer
// in its deleter, which runs as soon as the last reference to it goes.
struct Output {
  nb::ndarray<> array;
  float* data = nullptr;
};

// `out` as a writable f32 C-contiguous buffer, which must have exactly
// `shape`; throws mixq::Error otherwise.
Output read_output(nb::handle out, const std::vector<size_t>& shape, const std::string& where);

}  // namespace mixq::py
