#pragma once
// A float array kept at the width the checkpoint stores it (F32, F16 or BF16
// bits), for the per-group scales, zeros and low-rank factors the packed
// kernels read (AWQ, SVDQuant): a loaded layer then holds those tensors at the
// file's size rather than widened to f32. The kernels widen while they load
// (simd_traits.hpp: load_stored); f16 -> f32 and bf16 -> f32 are exact, so
// what they compute is the same f32 arithmetic as over a widened copy.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mixq/dtype.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::kernels {

enum class FloatWidth : uint8_t { f32, f16, bf16 };

// Where packing reads one tensor from: the bytes of a checkpoint tensor (or
// any array) at one width, little-endian.
struct FloatSource {
  FloatWidth width = FloatWidth::f32;
  const void* data = nullptr;
  static FloatSource of(const float* p) { return {FloatWidth::f32, p}; }
  // F32, F16 or BF16 bytes; anything else is a caller bug (the format table
  // admits only these for the tensors read through here).
  static FloatSource of(DType dtype, const void* p) {
    switch (dtype) {
      case DType::F32: return {FloatWidth::f32, p};
      case DType::F16: return {FloatWidth::f16, p};
      case DType::BF16: return {FloatWidth::bf16, p};
      default: fail("stored float tensor of dtype {}: expected F32, F16 or BF16", dtype_name(dtype));
    }
  }
};

class StoredFloats {
 public:
  // `count` zeros (all-zero bits are +0.0 at every width) of `width`.
  void assign(FloatWidth width, size_t count) {
    width_ = width;
    f32_.clear();
    h16_.clear();
    if (width == FloatWidth::f32) f32_.assign(count, 0.0f);
    else h16_.assign(count, 0);
  }
  // Element `to` = element `from` of src (same width: a bit copy).
  void set(size_t to, const FloatSource& src, size_t from) {
    if (width_ == FloatWidth::f32) std::memcpy(&f32_[to], static_cast<const char*>(src.data) + 4 * from, 4);
    else std::memcpy(&h16_[to], static_cast<const char*>(src.data) + 2 * from, 2);
  }
  // Element `to` = element `from` of src widened to f32 (this array is f32).
  void set_f32(size_t to, const FloatSource& src, size_t from) {
    const char* p = static_cast<const char*>(src.data);
    uint16_t h = 0;
    if (src.width != FloatWidth::f32) std::memcpy(&h, p + 2 * from, 2);
    switch (src.width) {
      case FloatWidth::f16: f32_[to] = f16_to_f32(h); break;
      case FloatWidth::bf16: f32_[to] = bf16_to_f32(h); break;
      default: std::memcpy(&f32_[to], p + 4 * from, 4);
    }
  }
  FloatWidth width() const { return width_; }
  size_t size() const { return width_ == FloatWidth::f32 ? f32_.size() : h16_.size(); }
  size_t bytes() const { return f32_.size() * 4 + h16_.size() * 2; }
  size_t element_bytes() const { return width_ == FloatWidth::f32 ? 4 : 2; }
  // The f32 array (width f32) or the 16-bit words (f16 / bf16).
  const float* f32() const { return f32_.data(); }
  const uint16_t* h16() const { return h16_.data(); }
  // Address of element i (for prefetches).
  const void* at(size_t i) const {
    return width_ == FloatWidth::f32 ? static_cast<const void*>(f32_.data() + i) : h16_.data() + i;
  }
  // Element i widened to f32 (exact).
  float get(size_t i) const {
    switch (width_) {
      case FloatWidth::f16: return f16_to_f32(h16_[i]);
      case FloatWidth::bf16: return bf16_to_f32(h16_[i]);
      default: return f32_[i];
    }
  }

 private:
  FloatWidth width_ = FloatWidth::f32;
  std::vector<float> f32_;
  std::vector<uint16_t> h16_;
};

}  // namespace mixq::kernels
