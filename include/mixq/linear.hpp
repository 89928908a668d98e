#pragma once
// Runs one planned layer: y = x·Wᵀ + b with the format's own arithmetic
// (activation rotation and quantization where the format has them).
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "mixq/threads.hpp"

namespace mixq {

struct Layer;

enum class KernelChoice { automatic, reference };

struct LinearOptions {
  KernelChoice kernel = KernelChoice::automatic;
  // Once the Linear has copied (packed) what it needs, the whole file pages
  // under the layer's tensors leave the process' resident memory, so that a
  // loaded model holds each weight once, not the mapped file pages as well.
  // The tensors stay readable (a later read faults them in again from the
  // file). Only memory-mapped checkpoint files are affected, never a
  // caller's buffers. Off: the pages stay until the checkpoint is closed (or
  // the kernel reclaims them), e.g. when the caller reads every tensor again
  // right away.
  bool release_file_pages = true;
};

class Linear {
 public:
  virtual ~Linear() = default;
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  // x: [m, in_features] f32 row-major; y: [m, out_features] f32. Bias included.
  virtual void forward(const float* x, int64_t m, float* y) const = 0;
  // Which kernel runs it: "ref", "avx2", "avx512_vnni", ...
  virtual std::string_view kernel_name() const = 0;
  // Bytes of weight data the Linear holds itself (packed weights, scales,
  // bias; not the checkpoint's mapped pages), or nullopt for layer kinds that
  // do not count them yet.
  virtual std::optional<int64_t> packed_bytes() const { return std::nullopt; }
  // True when forward reads the layer's weight from the checkpoint's mapped
  // file in place instead of a packed copy (INT8 and ConvRot W4A4 rows on the
  // AVX2 and AVX-512 paths): the Linear then keeps that file mapped, after the
  // Checkpoint is closed too, and the file's pages are the weight's memory.
  virtual bool reads_file_in_place() const { return false; }

  // Builds the layer's linear through its format record.
  static std::unique_ptr<Linear> create(const Layer& layer, const LinearOptions& options = {});

 protected:
  Linear(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}

 private:
  int64_t in_features_;
  int64_t out_features_;
};

}  // namespace mixq
