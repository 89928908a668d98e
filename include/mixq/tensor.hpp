#pragma once
// Non-owning views of tensors inside mapped checkpoint files, and owning
// tensors produced by quantizers and writers.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mixq/dtype.hpp"

namespace mixq {

class MappedFile;

using Shape = std::vector<int64_t>;

// Element count of a shape (1 for a scalar, shape []).
int64_t shape_numel(const Shape& shape);
// "[3, 128]"
std::string shape_str(const Shape& shape);

// A tensor inside a mapped file. `data` points into the mapping and stays valid
// as long as the Checkpoint that produced the view lives, or `storage`.
// `data` is NOT guaranteed to be aligned for its dtype (safetensors offsets are
// arbitrary): read elements with memcpy or unaligned loads.
struct TensorView {
  std::string name;
  DType dtype = DType::U8;
  Shape shape;
  std::span<const std::byte> data;
  int file = 0;         // index into Checkpoint::files()
  uint64_t offset = 0;  // absolute byte offset of the data within that file
  // The checkpoint file `data` lies in, for views a Checkpoint made (null for
  // a caller's or an OwnedTensor's bytes). Holding it keeps the bytes valid
  // after the Checkpoint is gone: a kernel that reads the weight in place
  // instead of copying it keeps this (README.md, "Loaded models hold each
  // weight once").
  std::shared_ptr<const MappedFile> storage = nullptr;

  int64_t numel() const { return shape_numel(shape); }
  size_t rank() const { return shape.size(); }
};

// A tensor that owns its bytes (quantizer output, test fixtures).
struct OwnedTensor {
  std::string name;
  DType dtype = DType::U8;
  Shape shape;
  std::vector<std::byte> data;

  TensorView view() const { return TensorView{name, dtype, shape, data, 0, 0}; }
};

}  // namespace mixq
