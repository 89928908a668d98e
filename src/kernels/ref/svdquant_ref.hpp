#pragma once
// SVDQuant W4A4 reference linear (docs/FORMATS.md §3.8, the fp32 formula the
// document recommends):
//   y[m,n] = (Σ_g f32(Σ_{k∈g} qa·qw)·(as[m,g]·ws[g,n]), g ascending)
//            + Σ_r lora[m,r]·proj_up[n,r] + b[n]
// with lora = x·proj_down on the raw x, each op one fp32 rounding, no FMA.
// The AVX-512 kernel performs the same operations in the same order.
#include <cstdint>
#include <vector>

namespace mixq::kernels {

// Weights of one layer in the natural layout, prepared once.
struct SvdquantWeights {
  int64_t n = 0, k = 0, rank = 0;
  bool act_unsigned = false;
  std::vector<uint8_t> weight;     // [N, K/2] packed signed nibbles, low nibble = even k
  std::vector<float> wscale;       // [K/64, N]
  std::vector<float> smooth;       // [K]
  std::vector<float> proj_down;    // [K, R]
  std::vector<float> proj_up_t;    // [R, N] (proj_upᵀ)
  std::vector<float> bias;         // [N] or empty
};

void svdquant_ref(const SvdquantWeights& w, const float* x, int64_t m, float* y);

}  // namespace mixq::kernels
