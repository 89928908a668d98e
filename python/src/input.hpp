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

  // The rows as contiguous f32: the caller's memory when zero_copy, else a
  // converted copy (the whole array, not row chunks: NVFP4 and FP8 derive a
  // dynamic activation scale from all rows, so forward must see them at once)
  // in this thread's ScratchRole::input buffer, valid until the thread's next
  // prepare(). Does not touch Python objects (call with the GIL released).
  // `y` and `y_count` are the output, to detect aliasing.
  const float* prepare(const float* y, int64_t y_count);
};

// Per-thread f32 buffers that a forward call needs only while it runs, kept
// from one call to the next (grow-only, not zero-filled). Why: a model's
// bfloat16 activations are converted to f32 for every linear, and a buffer
// over glibc's mmap threshold (32 MiB at most) was mapped afresh by every
// call: at 4096 tokens x 3072 features torch's own conversion into a fresh
// array takes 12.3 ms, into a kept one 1.3 ms (BENCHMARKS.md, "bfloat16
// activations"). Each role holds what the largest call of this thread needed.
enum class ScratchRole { input, output };
float* thread_scratch(ScratchRole role, size_t count);

// Checks x (last dimension == k) and wraps it; throws mixq::Error naming
// `where` for a wrong type, device, dtype or shape.
Input read_input(nb::handle x, int64_t k, const std::string& where);

// The caller's output array. Keep it until the last write through `data`:
// `array` holds the DLPack managed tensor, and a producer may free the buffer
// in its deleter, which runs as soon as the last reference to it goes.
// A bfloat16 `out` is written through f32: forward writes `data` (this
// thread's ScratchRole::output buffer), then finish() rounds it into `out`.
struct Output {
  nb::ndarray<> array;
  float* data = nullptr;
  uint16_t* bf16 = nullptr;  // set for a bfloat16 out
  int64_t count = 0;
  // Rounds data into a bfloat16 out (round to nearest even, as torch's
  // Tensor.to(torch.bfloat16); a NaN as 0xFFFF); nothing for a float32 one.
  // GIL not needed.
  void finish() const;
};

// `out` as a writable float32 or bfloat16 C-contiguous buffer, which must
// have exactly `shape`; throws mixq::Error otherwise.
Output read_output(nb::handle out, const std::vector<size_t>& shape, const std::string& where);

}  // namespace mixq::py
