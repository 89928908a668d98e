// Weight packing for the AVX-512 AWQ kernel (layout in awq_w4a16.hpp).
#include "kernels/x86/awq_w4a16.hpp"

#include <utility>

namespace mixq::kernels::x86 {

AwqPacked awq_pack(const uint8_t* codes, FloatSource scale, FloatSource zeros, int64_t n, int64_t k,
                   int64_t group, std::vector<float> bias) {
  AwqPacked p;
  p.n = n;
  p.k = k;
  p.group = group;
  p.panels = (n + 15) / 16;
  p.bias = std::move(bias);
  const int64_t half = k / 2, groups = k / group, np = p.panels * 16;
  p.codes.assign(static_cast<size_t>(p.panels * half * 16), 0x88);  // q = 8 decodes to 0
  // One width for both (the f32-FMA kernels are compiled per width): a file
  // that stores them at different widths gets both widened to f32.
  const bool same = scale.width == zeros.width;
  p.scale.assign(same ? scale.width : FloatWidth::f32, static_cast<size_t>(groups * np));
  p.zeros.assign(same ? zeros.width : FloatWidth::f32, p.scale.size());
  for (int64_t col = 0; col < n; ++col) {
    const int64_t panel = col / 16, lane = col % 16;
    for (int64_t j = 0; j < half; ++j) p.codes[(panel * half + j) * 16 + lane] = codes[col * half + j];
    for (int64_t g = 0; g < groups; ++g) {
      const auto to = static_cast<size_t>(g * np + col), from = static_cast<size_t>(g * n + col);
      if (same) {
        p.scale.set(to, scale, from);
        p.zeros.set(to, zeros, from);
      } else {
        p.scale.set_f32(to, scale, from);
        p.zeros.set_f32(to, zeros, from);
      }
    }
  }
  return p;
}

}  // namespace mixq::kernels::x86
