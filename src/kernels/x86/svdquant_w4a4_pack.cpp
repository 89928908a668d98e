// Weight packing for the AVX-512 SVDQuant kernel (layout in svdquant_w4a4.hpp).
#include "kernels/x86/svdquant_w4a4.hpp"

namespace mixq::kernels::x86 {

SvdquantActs::SvdquantActs(const SvdquantWeights& w, int64_t rows)
    : m(rows), k(w.k), groups(w.k / 64), rank(w.rank) {
  codes.resize(static_cast<size_t>(m * k));
  scales.resize(static_cast<size_t>(m * groups));
  sums.resize(scales.size());
  lora.resize(static_cast<size_t>(m * rank));
}

SvdquantPacked svdquant_pack(const SvdquantWeights& w) {
  SvdquantPacked p;
  const int64_t n = w.n, k = w.k, half = k / 2, octets = k / 8, groups = k / 64;
  p.panels = (n + 15) / 16;
  const int64_t np = p.panels * 16;
  p.weight.assign(static_cast<size_t>(p.panels * octets * 16), 0x88888888u);  // off 8 = weight 0
  p.wscale.assign(static_cast<size_t>(groups * np), 0.0f);
  p.colterm.assign(static_cast<size_t>(groups * np), 0);
  p.proj_up_t.assign(static_cast<size_t>(w.rank * np), 0.0f);
  const int32_t ao = w.act_unsigned ? 0 : 8;
  auto off = [&](int64_t col, int64_t i) {
    const uint8_t byte = w.weight[col * half + (i >> 1)];
    const int nib = (i & 1) ? byte >> 4 : byte & 0x0F;
    return static_cast<uint32_t>((nib >= 8 ? nib - 16 : nib) + 8);
  };
  for (int64_t col = 0; col < np; ++col) {
    const int64_t panel = col / 16, lane = col % 16;
    for (int64_t g = 0; g < groups; ++g) {
      int32_t sum = 0;
      for (int64_t i = g * 64; i < (g + 1) * 64; ++i) sum += col < n ? static_cast<int32_t>(off(col, i)) : 8;
      p.colterm[g * np + col] = ao * sum - 64 * ao * 8;
      if (col < n) p.wscale[g * np + col] = w.wscale[g * n + col];
    }
    if (col >= n) continue;
    for (int64_t o = 0; o < octets; ++o) {
      uint32_t word = 0;
      for (int j = 0; j < 4; ++j) word |= (off(col, 8 * o + j) | (off(col, 8 * o + j + 4) << 4)) << (8 * j);
      p.weight[(panel * octets + o) * 16 + lane] = word;
    }
    for (int64_t r = 0; r < w.rank; ++r) p.proj_up_t[r * np + col] = w.proj_up_t[r * n + col];
  }
  return p;
}

}  // namespace mixq::kernels::x86
