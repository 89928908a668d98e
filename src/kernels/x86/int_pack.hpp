#pragma once
// Packed operand layouts shared by the x86 integer kernels.
//
// Roles: vpdpbusd multiplies an UNSIGNED byte operand by a SIGNED byte operand.
// We make the weights the unsigned side (w + 128 for int8, w + 8 for int4) and
// the quantized activations the signed side: then (a) activations need no shift
// and can be broadcast straight from memory, (b) int4 weights need only a mask
// and a shift to unpack (no sign extension), and (c) one compensation per token,
// bias_w · Σ_k q_x[m,k], removes the offset: Σ (w+bias_w)·x = Σ w·x + bias_w·Σ x.
// The row sum comes free with the activation quantization. (Equivalent to the
// usual u8 activation + per-column 128·Σw correction, with the roles swapped.)
//
// Weights ("panels" of 16 output columns, each contiguous over K so a GEMV can
// stream several panels as independent memory streams):
//   int8: panel p, step kk (4 k's): 64 bytes; byte 4c + t = w[16p + c][4kk + t] + 128
//   int4: panel p, step k8 (8 k's): 64 bytes; byte 4c + t has
//         low nibble w[16p + c][8k8 + t] + 8, high nibble w[16p + c][8k8 + 4 + t] + 8
//   codes (IntCodes, asym_w4a8_int8): the int4 layout holding the raw codes
//         0..15, plus s_rel per (panel, group): 16 values (E4M3 bytes or f32,
//         the stored width) at [(panel · groups + group) · 16 + c]. The
//         kernel decodes a panel into the int8 layout above just before use.
//   codes in k blocks (PackedIntWeights::codes_k_blocks; AVX2 kernels, group
//         size a multiple of 16, K a multiple of 32): the same codes and
//         s_rel, each panel as two streams of 8 columns (vector v = columns
//         8v .. 8v+7 at byte v · kp · 4), each a run of 128-byte blocks of
//         32 k; in block b, 32 bytes per column pair j = 0..3: bytes 0..15
//         column 8v + j, bytes 16..31 column 8v + j + 4, byte i holding
//         code(32b + i) in its low nibble and code(32b + 16 + i) in its high
//         nibble. So each 16 k of one column (one group, as 16 divides the
//         group size) share a 128-bit lane and one `vpshufb` table
//         (codes_blocks_impl.hpp).
//   rows in place (IntLayerDesc::weight_in_place): no packed copy; `rows`
//         points at the checkpoint's rows, [n, k] int8 or [n, k/2] signed
//         nibbles (low nibble = even k; K a multiple of 8). Small M reads
//         them as they are (a row-major GEMV); large M transposes a tile of
//         panels into the int8 / int4 layout above just before use, as codes
//         are decoded.
// Padding (columns past N, k past K) holds weight 0 (byte 128 / nibble 8; for
// codes, s_rel 0, which decodes every code to 0).
// Activations (a panel of kMr tokens, contiguous over K):
//   step kk: kMr·4 bytes; bytes 4r .. 4r+3 = q_x[row r][4kk .. 4kk+3]; padding 0.
#include <cstdint>
#include <vector>

#include "kernels/int_kernel.hpp"

namespace mixq::kernels::x86 {

constexpr int kMr = 6;          // tokens per activation panel (register rows)
constexpr int kPanelCols = 16;  // output columns per weight panel

struct PackedIntWeights {
  int64_t n = 0, k = 0;
  int64_t kp = 0;       // K padded to 8
  int64_t panels = 0;   // ceil(N/16) rounded up to a multiple of 4
  int64_t panel_bytes = 0;
  bool int4 = false;
  int32_t weight_bias = 128;  // 128 (int8) or 8 (int4)
  std::vector<uint8_t> data;  // panels * panel_bytes, 64-byte aligned start; empty for `rows`
  const uint8_t* rows = nullptr;  // in place: n rows of row_bytes, read during forward
  int64_t row_bytes = 0;          // k (int8) or k / 2 (int4)
  std::vector<float> scale;   // [panels * 16], padding 0
  std::vector<float> bias;    // [panels * 16] or empty
  // Codes (int4 is false: the decoded panels are int8, weight_bias 128).
  bool codes = false;
  bool codes_k_blocks = false;         // the "codes in k blocks" layout above
  int64_t group_size = 0, groups = 0;  // K / group_size groups per row
  std::vector<uint8_t> s_rel_e4m3;     // [panels][groups][16] or empty
  bool s_rel_doubled = false;          // k blocks only: every byte < 0x80, stored times 2
  std::vector<float> s_rel_f32;        // [panels][groups][16] or empty
  // E4M3 s_rel: the decoded table of every E4M3 byte, [256][16] as the u8
  // operand: code_lut[16·b + code] = w8 + 128 (i.e. w8 ^ 0x80), w8 the §3.7
  // decode of `code` at s_rel = e4m3(b).
  std::vector<int8_t> code_lut;
  float levels[16] = {};
  int64_t bytes() const {
    return static_cast<int64_t>(data.size() + 4 * (scale.size() + bias.size() + s_rel_f32.size()) +
                                s_rel_e4m3.size() + code_lut.size());
  }
  const uint8_t* panel(int64_t p) const { return aligned + p * panel_bytes; }
  const uint8_t* aligned = nullptr;
};

// k_blocks: lay 4-bit codes out in k blocks where the group size and K allow
// (the AVX2 kernels' choice; int_gemm_impl.hpp).
PackedIntWeights pack_int_weights(const IntLayerDesc& desc, bool k_blocks = false);

}  // namespace mixq::kernels::x86
