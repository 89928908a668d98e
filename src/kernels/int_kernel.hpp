#pragma once
// Integer-family linear kernels (INT8 tensorwise/rowwise, INT8+ConvRot, ConvRot
// W4A4 with int4 or int8 activations): docs/FORMATS.md §3.4–§3.6, T = f32.
//
//   x_rot = x·H_G per group of G along K (when group > 0; radix-4 transform)
//   q_x, s_x = Q8row(x_rot) or Q4row(x_rot)                (per token)
//   acc[m,n] = Σ_k q_x[m,k]·q_w[n,k]                        (exact int32)
//   y = f32(acc)·(s_x·s_w) + b      (Epilogue::scale_product, INT8 §3.4 step 3)
//   y = (f32(acc)·s_x)·s_w + b      (Epilogue::sequential, W4A4 §3.6 step 4)
// each operation one fp32 rounding, no FMA. Every kernel (reference and fast)
// performs exactly these operations in this order, so fast == reference bit
// for bit; tests compare with zero tolerance.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "kernels/cpu.hpp"
#include "mixq/numeric.hpp"

namespace mixq::kernels {

enum class ActQuant { q8row, q4row };
enum class Epilogue { scale_product, sequential };

// asym_w4a8_int8's stored weight (docs/FORMATS.md §3.7): 4-bit codes per
// group of `group_size` along K, each decoded to the int8 value
//   w8[n,k] = clamp(rint(levels[code] · f32(s_rel[n, k/gs])), -127, 127)
// (one fp32 product, ties to even). Fast kernels keep the codes and s_rel at
// their stored width and decode inside the GEMM. s_rel must be finite (the
// format's validation); exactly one of the two s_rel pointers is set.
struct IntCodes {
  const uint8_t* codes = nullptr;       // [n, k/2] unsigned codes 0..15, low nibble = even k
  const uint8_t* s_rel_e4m3 = nullptr;  // [n, k/gs] E4M3 bytes, or
  const void* s_rel_f32 = nullptr;      // [n, k/gs] f32, any alignment
  float levels[16] = {};                // the codebook, or code - 8
  int64_t group_size = 16;              // a multiple of 4 dividing K
  float s_rel(int64_t row, int64_t group, int64_t groups) const {
    const int64_t i = row * groups + group;
    if (s_rel_e4m3) return e4m3_to_f32(s_rel_e4m3[i]);
    float v;
    std::memcpy(&v, static_cast<const char*>(s_rel_f32) + 4 * i, 4);
    return v;
  }
  // The §3.7 decode of one code (the scalar definition the kernels match).
  int8_t decode(uint8_t code, float s) const {
    const float r = std::nearbyint(levels[code & 0x0F] * s);
    return static_cast<int8_t>(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
  }
};

// What an integer kernel is built from. Pointers are only read during
// make_int_kernel (kernels copy or repack what they keep), except `weight` /
// `weight_nibbles` under `weight_in_place`.
struct IntLayerDesc {
  int64_t n = 0, k = 0;
  int64_t group = 0;             // ConvRot group size G (power of 4), 0 = none
  ActQuant act = ActQuant::q8row;
  Epilogue epilogue = Epilogue::scale_product;
  bool int4_weights = false;     // weights in [-8, 7] (nibble-packed by fast kernels)
  const int8_t* weight = nullptr;  // [n, k] row-major integer values
  // `weight` / `weight_nibbles` outlive the kernel (a mapped checkpoint file
  // the caller keeps open): fast kernels that can read int8 rows, or nibble
  // rows with K % 8 == 0, in place keep the pointer instead of a packed copy
  // (IntKernel::reads_weight_in_place says which did), and read it during
  // every forward.
  bool weight_in_place = false;
  // Instead of `weight`, for int4_weights: [n, k/2] bytes, two signed nibbles
  // each, low nibble = even k (the convrot_w4a4 storage, docs/FORMATS.md §2.2
  // b), so that a layer is packed straight from its file without an int8
  // copy twice its size.
  const uint8_t* weight_nibbles = nullptr;
  // Instead of `weight`: grouped 4-bit codes (int4_weights false: the decoded
  // values span [-127, 127]).
  const IntCodes* codes = nullptr;
  const float* weight_scale = nullptr;  // [n] (a tensorwise scale is broadcast by the caller)
  const float* bias = nullptr;   // [n] or null
};

class IntKernel {
 public:
  virtual ~IntKernel() = default;
  // x [m, k] f32 row-major, y [m, n] f32. Thread-safe for concurrent calls.
  virtual void forward(const float* x, int64_t m, float* y) const = 0;
  virtual std::string_view name() const = 0;
  // Bytes of weight data the kernel holds (packed weights, scales, bias).
  virtual int64_t held_bytes() const = 0;
  // True when forward reads the weight rows in place (weight_in_place
  // was set and this kernel supports it): the caller must keep it alive.
  virtual bool reads_weight_in_place() const { return false; }
};

// Largest K the int32 accumulator is exact for: |acc| <= 128·128·K < 2^31.
constexpr int64_t kMaxIntK = 131071;

// Checks the description (shapes, group divides K, K limit); throws Error.
void check_int_desc(const IntLayerDesc& desc);
// Weight value [row, col] from `weight` or `weight_nibbles`.
inline int int_desc_weight(const IntLayerDesc& d, int64_t row, int64_t col) {
  if (d.weight) return d.weight[row * d.k + col];
  if (d.codes) {
    const IntCodes& c = *d.codes;
    const uint8_t byte = c.codes[(row * d.k + col) / 2];
    return c.decode(col % 2 == 0 ? byte & 0xF : byte >> 4, c.s_rel(row, col / c.group_size, d.k / c.group_size));
  }
  const uint8_t byte = d.weight_nibbles[(row * d.k + col) / 2];
  const int v = (col % 2 == 0) ? byte & 0xF : byte >> 4;
  return v >= 8 ? v - 16 : v;
}

std::unique_ptr<IntKernel> make_int_kernel_ref(const IntLayerDesc& desc);
// Fast kernels; null when this build or CPU cannot run them.
std::unique_ptr<IntKernel> make_int_kernel_amx(const IntLayerDesc& desc);  // Isa::amx: large M on AMX tiles
std::unique_ptr<IntKernel> make_int_kernel_avx512(const IntLayerDesc& desc);
std::unique_ptr<IntKernel> make_int_kernel_avx2(const IntLayerDesc& desc);  // AVX-VNNI when present
std::unique_ptr<IntKernel> make_int_kernel_avx2_novnni(const IntLayerDesc& desc);  // tests
std::unique_ptr<IntKernel> make_int_kernel_avx_vnni(const IntLayerDesc& desc);  // int_gemm.avxvnni.cpp
// Test hooks: the int8 weights [n, k] the fast kernel's micro-kernel
// multiplies (for IntCodes, its in-kernel decode). Call only where the CPU
// runs the path.
std::vector<int8_t> int_kernel_weights_avx512(const IntLayerDesc& desc);
std::vector<int8_t> int_kernel_weights_avx2(const IntLayerDesc& desc);
// The kernel for `isa` (falling back to the next lower path the layer's shape
// allows), or the reference for Isa::reference.
std::unique_ptr<IntKernel> make_int_kernel(const IntLayerDesc& desc, Isa isa);

}  // namespace mixq::kernels
