// Panel packing for the float GEMM cores (float_gemm.hpp). Baseline ISA.
#include <cstring>

#include "util/parallel.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "mixq/numeric.hpp"

namespace mixq::kernels::x86 {

FloatPanels pack_panels(const float* w, int64_t n, int64_t k, GemmType type) {
  FloatPanels p;
  p.type = type;
  p.n = n;
  p.k = k;
  p.steps = type == GemmType::bf16 ? (k + 1) / 2 : k;
  p.panels = (n + 15) / 16;
  p.data.assign(static_cast<size_t>(p.panels * p.steps * 16), 0u);
  util::parallel_for(p.panels, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t panel = begin; panel < end; ++panel) {
      uint32_t* dst = p.data.data() + panel * p.steps * 16;
      for (int64_t j = 0; j < 16; ++j) {
        const int64_t r = panel * 16 + j;
        if (r >= n) break;
        const float* row = w + r * k;
        for (int64_t s = 0; s < p.steps; ++s) {
          uint32_t word;
          if (type == GemmType::f32) {
            std::memcpy(&word, row + s, 4);
          } else {
            const uint32_t lo = f32_to_bf16(row[2 * s]);
            const uint32_t hi = 2 * s + 1 < k ? f32_to_bf16(row[2 * s + 1]) : 0u;
            word = lo | (hi << 16);
          }
          dst[s * 16 + j] = word;
        }
      }
    }
  });
  return p;
}

}  // namespace mixq::kernels::x86
