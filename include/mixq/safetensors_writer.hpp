#pragma once
// Writes safetensors files atomically: data goes to a temporary file in the
// target folder, which is fsync'd and renamed over the target only when
// complete. The header is padded with spaces to a multiple of 8 bytes. Tensor
// data is contiguous (the safetensors crate behind Python/ComfyUI rejects gaps),
// stored largest element size first, so every tensor starts aligned to its
// element size within the file.
#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mixq/tensor.hpp"

namespace mixq {

// Streaming writer: declare every tensor first (the header needs all offsets),
// then hand over their bytes in declaration order, then commit. Destroying an
// uncommitted writer removes the temporary file.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::string path, std::map<std::string, std::string> metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  void declare(const std::string& name, DType dtype, const Shape& shape);
  // Appends the next declared tensor's bytes (size must match its declaration).
  void write(std::span<const std::byte> bytes);
  // Bytes the declared tensors will occupy (data section, with alignment).
  uint64_t data_bytes() const;
  // fsync + rename; throws if not every declared tensor was written.
  void commit();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Convenience: writes `tensors` in the given order.
void write_safetensors(const std::string& path, std::span<const OwnedTensor> tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace mixq
