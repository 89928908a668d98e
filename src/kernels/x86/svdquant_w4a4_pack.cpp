// Weight packing for the SVDQuant kernels (layout in svdquant_w4a4.hpp).
#include "kernels/x86/svdquant_w4a4.hpp"

#include <cstdint>

#include <utility>

namespace mixq::kernels::x86 {

void SvdquantActs::size_for(const SvdquantPacked& w, int64_t rows) {
  m = rows;
  k = w.k;
  groups = w.k / 64;
  rank = w.rank;
  codes.resize(static_cast<size_t>(m * k) + 64);
  at = (64 - reinterpret_cast<uintptr_t>(codes.data()) % 64) % 64;
  scales.resize(static_cast<size_t>(m * groups));
  offset_terms.resize(scales.size());
  lora.resize(static_cast<size_t>(m * rank));
}

SvdquantPacked svdquant_pack(SvdquantSource src) {
  SvdquantPacked p;
  const int64_t n = src.n, k = src.k, rank = src.rank, octets = k / 8, groups = k / 64;
  p.n = n;
  p.k = k;
  p.rank = rank;
  p.rank_pad = (rank + kSvdquantRankPad - 1) / kSvdquantRankPad * kSvdquantRankPad;
  p.act_unsigned = src.act_unsigned;
  p.panels = (n + 15) / 16;
  p.bias = std::move(src.bias);
  const int64_t np = p.panels * 16;
  const auto at = [](int64_t i) { return static_cast<size_t>(i); };
  p.weight.assign(at(p.panels * octets * 16), 0x88888888u);  // off 8 = weight 0
  p.wscale.assign(src.wscale.width, at(groups * np));
  p.proj_up_t.assign(src.proj_up.width, at(rank * np));
  p.proj_down.assign(src.proj_down.width, at(k * p.rank_pad));
  p.smooth.assign(src.smooth.width, at(k));
  for (int64_t col = 0; col < n; ++col) {
    const int64_t panel = col / 16, lane = col % 16;
    const uint8_t* row = src.weight_row(col);
    auto off = [&](int64_t i) {
      const uint8_t byte = row[i >> 1];
      const int nib = (i & 1) ? byte >> 4 : byte & 0x0F;
      return static_cast<uint32_t>((nib >= 8 ? nib - 16 : nib) + 8);
    };
    for (int64_t g = 0; g < groups; ++g) p.wscale.set(at(g * np + col), src.wscale, at(g * n + col));
    for (int64_t o = 0; o < octets; ++o) {
      uint32_t word = 0;
      for (int j = 0; j < 4; ++j) word |= (off(8 * o + j) | (off(8 * o + j + 4) << 4)) << (8 * j);
      p.weight[at((panel * octets + o) * 16 + lane)] = word;
    }
    for (int64_t r = 0; r < rank; ++r)
      p.proj_up_t.set(at(r * np + col), src.proj_up, at(src.proj_up_transposed ? r * n + col : col * rank + r));
  }
  for (int64_t i = 0; i < k; ++i) {
    p.smooth.set(at(i), src.smooth, at(i));
    for (int64_t r = 0; r < rank; ++r) p.proj_down.set(at(i * p.rank_pad + r), src.proj_down, at(i * rank + r));
  }
  return p;
}

SvdquantPacked svdquant_pack(const SvdquantWeights& w) {
  SvdquantSource src;
  src.n = w.n;
  src.k = w.k;
  src.rank = w.rank;
  src.act_unsigned = w.act_unsigned;
  src.weight_row = [&w](int64_t col) { return w.weight.data() + col * (w.k / 2); };
  src.wscale = FloatSource::of(w.wscale.data());
  src.proj_down = FloatSource::of(w.proj_down.data());
  src.proj_up = FloatSource::of(w.proj_up_t.data());
  src.proj_up_transposed = true;
  src.smooth = FloatSource::of(w.smooth.data());
  src.bias = w.bias;
  return svdquant_pack(std::move(src));
}

}  // namespace mixq::kernels::x86
