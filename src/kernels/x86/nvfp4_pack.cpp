// Repacks checkpoint NVFP4 weights into the VNNI panel layout (nvfp4_w4a4.hpp).
#include <algorithm>
#include <atomic>
#include <cmath>

#include "util/parallel.hpp"
#include "kernels/cpu.hpp"
#include "kernels/x86/fp8_nonfinite.hpp"
#include "kernels/x86/nibble_quads.hpp"
#include "kernels/x86/nvfp4_w4a4.hpp"
#include "mixq/error.hpp"
#include "numeric/swizzle.hpp"

namespace mixq::kernels::x86 {

bool nvfp4_avx512_supported() { return cpu_has_avx512_vbmi(); }

Nvfp4Weights nvfp4_pack(const uint8_t* codes, int64_t rows, int64_t row_bytes, const uint8_t* scales,
                       int64_t n, float global) {
  Nvfp4Weights p;
  p.n = n;
  p.blocks = row_bytes * 2 / 16;
  p.panels = (n + 15) / 16;
  p.global = global;
  p.data.assign(static_cast<size_t>(p.panels * p.blocks * kNvfp4PanelBlockBytes), 0);
  const int64_t blocks = p.blocks;
  // The swizzled scale offset (docs/FORMATS.md §3.2, numeric/swizzle.hpp) of
  // (r, b) is that of (r, 0) + (b / 4) · 512 + b % 4.
  std::vector<char> nan_found(static_cast<size_t>(p.panels), 0);
  util::parallel_for(p.panels, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t panel = begin; panel < end; ++panel) {
      uint8_t* panel_data = p.data.data() + panel * blocks * kNvfp4PanelBlockBytes;
      for (int64_t j = 0; j < 16; ++j) {
        const int64_t r = panel * 16 + j;
        if (r >= n || r >= rows) break;  // padding rows stay code 0 / scale 0
        const uint8_t* src = codes + r * row_bytes;
        const uint8_t* row_scales = scales + swizzled_offset(r, 0, blocks);
        bool nan = false;
        for (int64_t b = 0; b < blocks; ++b) {
          uint8_t* dst = panel_data + b * kNvfp4PanelBlockBytes;
          store_u32(dst + j * 4, regroup_nibble_quad<true>(load_u32(src + b * 8)));
          store_u32(dst + 64 + j * 4, regroup_nibble_quad<true>(load_u32(src + b * 8 + 4)));
          const uint8_t s = row_scales[(b / 4) * 512 + b % 4];
          nan |= e4m3_nan(s);
          dst[128 + j] = s;
        }
        if (nan) nan_found[static_cast<size_t>(panel)] = 1;
      }
    }
  });
  p.fast_ok = std::none_of(nan_found.begin(), nan_found.end(), [](char c) { return c != 0; });
  return p;
}

Nvfp4Weights nvfp4_in_place(const uint8_t* codes, int64_t rows, int64_t row_bytes, const uint8_t* scales,
                            int64_t n, float global) {
  if (n > rows || row_bytes % 8 != 0) fail("nvfp4: [{}, {}] code bytes cannot hold {} rows of 16-blocks", rows, row_bytes, n);
  Nvfp4Weights w;
  w.n = n;
  w.blocks = row_bytes * 2 / 16;
  w.panels = (n + 15) / 16;
  w.global = global;
  w.codes = codes;
  w.scales = scales;
  w.row_bytes = row_bytes;
  const int64_t blocks = w.blocks;
  // First the whole swizzled buffer, 16 bytes at a time; only a NaN found
  // there (in a used scale or in the tiles' padding) needs the scan of the
  // used scales alone.
  const int64_t bytes = swizzled_rows(rows) * swizzled_cols(blocks);
  std::atomic<bool> nan_found{false};
  util::parallel_for(bytes / 512, 256, [&](int64_t begin, int64_t end, int) {
    if (has_e4m3_nan(scales + begin * 512, (end - begin) * 512)) nan_found = true;
  });
  if (!nan_found) return w;
  nan_found = false;
  util::parallel_for(n, 64, [&](int64_t begin, int64_t end, int) {
    bool nan = false;
    for (int64_t r = begin; r < end; ++r) {
      const uint8_t* row_scales = scales + swizzled_offset(r, 0, blocks);
      for (int64_t b = 0; b < blocks; ++b) nan |= e4m3_nan(row_scales[(b / 4) * 512 + b % 4]);
    }
    if (nan) nan_found = true;
  });
  w.fast_ok = !nan_found;
  return w;
}

bool nvfp4_start_activation(int64_t m, int64_t k, int64_t blocks, std::optional<float> input_scale,
                            const std::function<float()>& amax, Nvfp4Activation& out) {
  if (k > blocks * 16) fail("nvfp4: activation has {} columns, the weight only {}", k, blocks * 16);
  out.m = m;
  out.blocks = blocks;
  out.q.resize(static_cast<size_t>(m * blocks * 16));
  out.scale.resize(static_cast<size_t>(m * blocks));
  out.comp.resize(static_cast<size_t>(m * blocks));
  float g;
  if (input_scale) {
    g = *input_scale;
    if (!std::isfinite(g) || g <= 0.0f) fail("NVFP4 global scale must be finite and > 0, got {}", g);
  } else {
    const float a = amax();
    if (!std::isfinite(a)) fail("NVFP4: the tensor holds an infinite value");
    g = a / 2688.0f;
  }
  out.global = g;
  if (g != 0.0f) return true;
  std::fill(out.q.begin(), out.q.end(), int8_t{0});
  std::fill(out.scale.begin(), out.scale.end(), 0.0f);
  std::fill(out.comp.begin(), out.comp.end(), 0);
  return false;
}

}  // namespace mixq::kernels::x86
