// Panel packing for the float GEMM cores (float_gemm.hpp). Baseline ISA: the
// elements are moved as stored, never converted.
#include <cstring>

#include "kernels/x86/float_gemm.hpp"
#include "mixq/error.hpp"
#include "util/parallel.hpp"

namespace mixq::kernels::x86 {
namespace {

// Bytes per stored element (nvfp4: 0, half a byte).
int elem_bytes(PanelType type) {
  switch (type) {
    case PanelType::f32: return 4;
    case PanelType::bf16:
    case PanelType::f16: return 2;
    case PanelType::nvfp4: return 0;
    default: return 1;
  }
}

bool is_fp8(PanelType type) {
  return type == PanelType::e4m3 || type == PanelType::e5m2 || type == PanelType::mxfp8;
}

int64_t block_of(PanelType type) {
  return type == PanelType::mxfp8 ? 32 : type == PanelType::nvfp4 ? 16 : 0;
}

// E4M3 NaN: all exponent and mantissa bits set (either sign).
bool e4m3_nan(uint8_t code) { return (code & 0x7F) == 0x7F; }

}  // namespace

int64_t FloatPanels::row_bytes() const {
  return type == PanelType::nvfp4 ? 8 : 16 * (pairs ? 2 : 1) * elem_bytes(type);
}

FloatPanels pack_panels(PanelType type, const void* w, int64_t row_bytes, int64_t n, int64_t k, bool pairs,
                        const uint8_t* block_scales) {
  if (pairs && !is_fp8(type)) fail("float gemm: k-pair panels hold FP8 codes only");
  const int64_t block = block_of(type);
  if (block && (k % block != 0 || block_scales == nullptr))
    fail("float gemm: block-scaled panels need K % {} == 0 and the block scales (K = {})", block, k);
  const int eb = elem_bytes(type);
  const int64_t need = type == PanelType::nvfp4 ? k / 2 : k * eb;
  if (n < 0 || k < 0 || row_bytes < need)
    fail("float gemm: a weight row of {} bytes cannot hold {} elements", row_bytes, k);
  FloatPanels p;
  p.type = type;
  p.pairs = pairs;
  p.n = n;
  p.k = k;
  p.steps = pairs ? (k + 1) / 2 : k;
  p.panels = (n + 15) / 16;
  p.blocks = block ? k / block : 0;
  const int64_t row = p.row_bytes();
  p.data.assign(static_cast<size_t>(p.panels * p.steps * row), 0u);
  const auto* src = static_cast<const uint8_t*>(w);
  util::parallel_for(p.panels, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t panel = begin; panel < end; ++panel) {
      uint8_t* dst = p.data.data() + panel * p.steps * row;
      for (int64_t j = 0; j < 16; ++j) {
        const int64_t r = panel * 16 + j;
        if (r >= n) break;
        const uint8_t* in = src + r * row_bytes;
        if (type == PanelType::nvfp4) {  // in: high nibble = even k; out: column 2i low, 2i+1 high
          for (int64_t c = 0; c < k; ++c) {
            const uint8_t code = (c % 2 == 0 ? in[c / 2] >> 4 : in[c / 2]) & 0x0F;
            dst[c * row + j / 2] |= static_cast<uint8_t>(code << (4 * (j % 2)));
          }
        } else if (pairs) {  // step s holds [k = 2s, 2s + 1] of column j at bytes 2j, 2j + 1
          for (int64_t c = 0; c < k; ++c) dst[(c / 2) * row + 2 * j + (c % 2)] = in[c];
        } else if (eb == 1) {
          for (int64_t c = 0; c < k; ++c) dst[c * row + j] = in[c];
        } else {
          for (int64_t c = 0; c < k; ++c) std::memcpy(dst + c * row + j * eb, in + c * eb, static_cast<size_t>(eb));
        }
      }
    }
  });
  if (block) {
    p.scales.assign(static_cast<size_t>(p.panels * p.blocks * 16), 0u);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t b = 0; b < p.blocks; ++b)
        p.scales[static_cast<size_t>(((r / 16) * p.blocks + b) * 16 + r % 16)] = block_scales[r * p.blocks + b];
  }
  // Columns with an E4M3 NaN code in a weight (e4m3, mxfp8) or block scale (nvfp4).
  if (type == PanelType::e4m3 || type == PanelType::mxfp8 || type == PanelType::nvfp4) {
    const bool in_scales = type == PanelType::nvfp4;
    for (int64_t r = 0; r < n; ++r) {
      const uint8_t* in = in_scales ? block_scales + r * p.blocks : src + r * row_bytes;
      const int64_t count = in_scales ? p.blocks : k;
      for (int64_t c = 0; c < count; ++c)
        if (e4m3_nan(in[c])) {
          p.nan_columns.push_back(r);
          break;
        }
    }
  }
  return p;
}

}  // namespace mixq::kernels::x86
