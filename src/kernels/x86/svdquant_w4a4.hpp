#pragma once
// AVX-512 VNNI and AVX2 kernels of the SVDQuant W4A4 linear (main int4 branch +
// low-rank branch), bit-identical to kernels::svdquant_ref (same fp32
// operations in the same order; the integer group dots are exact).
//
// Packed weights: panels of 16 output columns. Per panel and per k-octet one
// 64-byte row: dword lane i holds column 16p+i, byte j = off(k=8o+j) |
// off(8o+j+4) << 4 with off = qw + 8 (offset binary, 0..15). Why: one load,
// one AND and one shift+AND give two vectors of 0..15 bytes ([k0..k3] and
// [k4..k7] per lane), the unsigned operand of `vpdpbusd` / `vpmaddubsw`,
// against 4 broadcast signed activation codes qa. The weight offset comes
// out exactly per group with the activation code sums:
//   Σ (qw + 8)·qa = Σ qw·qa + 8·Σ qa,
// so no per-column term is stored: each group dot starts at the row's
// offset term −8·Σ qa (SvdquantActs::offset_terms).
//
// The layer holds only this struct: the group scales, both low-rank factors
// and the smoothing divisor stay at their stored width (F16, BF16 or F32;
// kernels/stored_floats.hpp) and are widened, exactly, as the kernels load
// them, so the results are those of the f32 reference over the widened
// values.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/ref/svdquant_ref.hpp"
#include "kernels/stored_floats.hpp"

namespace mixq::kernels::x86 {

// proj_down rows are padded to a multiple of this many ranks (two AVX-512
// vectors, the step of the low-rank loop) with zeros: whole-vector loads.
inline constexpr int64_t kSvdquantRankPad = 32;

struct SvdquantPacked {
  int64_t n = 0, k = 0, rank = 0, rank_pad = 0, panels = 0;  // panels = ceil(N / 16)
  bool act_unsigned = false;
  std::vector<uint32_t> weight;    // [panels][K/8][16]
  StoredFloats wscale;             // [K/64][panels·16], 0 in padding columns
  StoredFloats proj_up_t;          // [R][panels·16] (proj_upᵀ), 0 in padding columns
  StoredFloats proj_down;          // [K][rank_pad], 0 in padding ranks
  StoredFloats smooth;             // [K]
  std::vector<float> bias;         // [N] or empty
  int64_t bytes() const {
    return static_cast<int64_t>(weight.size() * 4 + wscale.bytes() + proj_up_t.bytes() + proj_down.bytes() +
                                smooth.bytes() + bias.size() * 4);
  }
};

// One layer's tensors in the natural layout, at their stored widths.
struct SvdquantSource {
  int64_t n = 0, k = 0, rank = 0;
  bool act_unsigned = false;
  // Output row `col`'s K/2 packed signed nibbles (low nibble = even k), asked
  // for col = 0, 1, .., N − 1 in order; the pointer is used before the next call.
  std::function<const uint8_t*(int64_t col)> weight_row;
  FloatSource wscale;               // [K/64, N]
  FloatSource proj_down;            // [K, R]
  FloatSource proj_up;              // [N, R], or [R, N] when proj_up_transposed
  bool proj_up_transposed = false;
  FloatSource smooth;               // [K]
  std::vector<float> bias;          // [N] or empty
};

// Baseline code (no ISA flags).
SvdquantPacked svdquant_pack(SvdquantSource src);
// From the reference's f32 weights (the widths are then f32).
SvdquantPacked svdquant_pack(const SvdquantWeights& w);

// Per-call quantized activations of m rows (sized by the constructor).
struct SvdquantActs {
  SvdquantActs() = default;
  SvdquantActs(const SvdquantPacked& w, int64_t m) { size_for(w, m); }
  // Sizes every buffer for m rows of w (capacity is kept: a thread reuses one
  // across calls; the kernels write every element before reading it).
  void size_for(const SvdquantPacked& w, int64_t m);
  int64_t m = 0, k = 0, groups = 0, rank = 0;
  // [M][K] signed codes qa (-7..7, or 0..15 when act_unsigned) from q(), 64-byte
  // aligned (an AMX A tile row is one cache line).
  std::vector<int8_t> codes;
  size_t at = 0;
  int8_t* q() { return codes.data() + at; }
  const int8_t* q() const { return codes.data() + at; }
  std::vector<float> scales;   // [M][groups]
  std::vector<int32_t> offset_terms;  // [M][groups] −8·Σ qa (the weight offset's share of a group dot)
  std::vector<float> lora;     // [M][R] x·proj_down
};
// Requires AVX-512 VNNI. amx (only where best_isa() is Isa::amx): more than
// 16 rows run their group dots on AMX-INT8 tiles (the same bits).
void svdquant_avx512(const SvdquantPacked& packed, const float* x, int64_t m, float* y, bool amx = false);
// Requires AVX2 (+ AVX-VNNI when `avx_vnni`; vpmaddubsw otherwise). Same packing.
void svdquant_avx2(const SvdquantPacked& packed, const float* x, int64_t m, float* y, bool avx_vnni);
// Rows [m_begin, m_end) of the AVX-512 kernel on AMX tiles
// (svdquant_amx.avx512amx.cpp); svdquant_avx512 calls it when `amx`.
void svdquant_amx_rows(const SvdquantPacked& packed, const SvdquantActs& acts, int64_t m_begin, int64_t m_end,
                       float* y);
// The AVX-VNNI variant (svdquant_w4a4.avxvnni.cpp); svdquant_avx2 calls it.
void svdquant_avx_vnni(const SvdquantPacked& packed, const float* x, int64_t m, float* y);

}  // namespace mixq::kernels::x86
