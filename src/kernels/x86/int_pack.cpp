#include "kernels/x86/int_pack.hpp"

#include <cstring>

namespace mixq::kernels::x86 {

PackedIntWeights pack_int_weights(const IntLayerDesc& d) {
  PackedIntWeights p;
  p.n = d.n;
  p.k = d.k;
  p.kp = (d.k + 7) / 8 * 8;
  p.panels = ((d.n + kPanelCols - 1) / kPanelCols + 3) / 4 * 4;
  p.int4 = d.int4_weights;
  p.weight_bias = p.int4 ? 8 : 128;
  p.panel_bytes = p.int4 ? p.kp * kPanelCols / 2 : p.kp * kPanelCols;
  p.data.assign(static_cast<size_t>(p.panels * p.panel_bytes + 64), 0);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p.data.data());
  p.aligned = p.data.data() + ((64 - addr % 64) % 64);
  uint8_t* out = const_cast<uint8_t*>(p.aligned);
  auto w = [&](int64_t n, int64_t k) -> int {
    return (n < d.n && k < d.k) ? int_desc_weight(d, n, k) : 0;
  };
  for (int64_t pn = 0; pn < p.panels; ++pn) {
    uint8_t* dst = out + pn * p.panel_bytes;
    if (!p.int4) {
      for (int64_t kk = 0; kk < p.kp / 4; ++kk)
        for (int c = 0; c < kPanelCols; ++c)
          for (int t = 0; t < 4; ++t)
            dst[kk * 64 + 4 * c + t] = static_cast<uint8_t>(w(16 * pn + c, 4 * kk + t) + 128);
    } else {
      for (int64_t k8 = 0; k8 < p.kp / 8; ++k8)
        for (int c = 0; c < kPanelCols; ++c)
          for (int t = 0; t < 4; ++t) {
            const int lo = w(16 * pn + c, 8 * k8 + t) + 8;
            const int hi = w(16 * pn + c, 8 * k8 + 4 + t) + 8;
            dst[k8 * 64 + 4 * c + t] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
          }
    }
  }
  p.scale.assign(static_cast<size_t>(p.panels * kPanelCols), 0.0f);
  std::memcpy(p.scale.data(), d.weight_scale, static_cast<size_t>(d.n) * sizeof(float));
  if (d.bias) {
    p.bias.assign(static_cast<size_t>(p.panels * kPanelCols), 0.0f);
    std::memcpy(p.bias.data(), d.bias, static_cast<size_t>(d.n) * sizeof(float));
  }
  return p;
}

}  // namespace mixq::kernels::x86
