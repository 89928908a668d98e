#pragma once
// AVX-512 VNNI and AVX2 kernels of the SVDQuant W4A4 linear (main int4 branch +
// low-rank branch), bit-identical to kernels::svdquant_ref (same fp32
// operations in the same order; the integer group dots are exact).
//
// Packed weights: panels of 16 output columns. Per panel and per k-octet one
// 64-byte row: dword lane i holds column 16p+i, byte j = off(k=8o+j) |
// off(8o+j+4) << 4 with off = qw + 8 (offset binary, 0..15). Why: one load,
// one AND and one shift+AND give two zmm of 0..15 bytes ([k0..k3] and
// [k4..k7] per lane) that `vpdpbusd` multiplies against 4 broadcast
// activation codes; the offsets are removed exactly per group in the
// epilogue with precomputed code sums.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/ref/svdquant_ref.hpp"

namespace mixq::kernels::x86 {

struct SvdquantPacked {
  int64_t panels = 0;              // ceil(N / 16)
  std::vector<uint32_t> weight;    // [panels][K/8][16]
  std::vector<float> wscale;       // [K/64][panels·16], 0 in padding columns
  std::vector<int32_t> colterm;    // [K/64][panels·16]: ao·Σ_{k∈g} off(k) − 64·ao·8 (ao = 8 signed, 0 unsigned)
  std::vector<float> proj_up_t;    // [R][panels·16], 0 in padding columns
};

// Baseline code (no ISA flags).
SvdquantPacked svdquant_pack(const SvdquantWeights& w);

// Per-call quantized activations of m rows (sized by the constructor).
struct SvdquantActs {
  SvdquantActs(const SvdquantWeights& w, int64_t m);
  int64_t m = 0, k = 0, groups = 0, rank = 0;
  std::vector<uint8_t> codes;  // [M][K] offset codes
  std::vector<float> scales;   // [M][groups]
  std::vector<int32_t> sums;   // [M][groups] code sums
  std::vector<float> lora;     // [M][R] x·proj_down
};
// Requires AVX-512 VNNI.
void svdquant_avx512(const SvdquantWeights& w, const SvdquantPacked& packed, const float* x, int64_t m,
                     float* y);
// Requires AVX2 (+ AVX-VNNI when `avx_vnni`; vpmaddubsw otherwise). Same packing.
void svdquant_avx2(const SvdquantWeights& w, const SvdquantPacked& packed, const float* x, int64_t m, float* y,
                   bool avx_vnni);

}  // namespace mixq::kernels::x86
