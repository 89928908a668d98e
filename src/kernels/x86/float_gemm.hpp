#pragma once
// Dense GEMM cores for the float family on x86: y = alpha·(A·Wᵀ) + bias with
// fp32 accumulation. The weight stays in the element type it was stored in
// (PanelType), repacked once into panels of 16 output columns (or, read in
// place from a mapped file, each K chunk of panels packed per thread inside
// the GEMM: float_panels_in_place; FP8 under 5 rows on VBMI CPUs:
// transposed in registers, fp8_rows_in_place_avx512vbmi), and is decoded to
// f32 (or bf16) in registers inside the kernel:
//  - f32, bf16, f16: unquantized layers (4 or 2 bytes per weight, as stored);
//  - e4m3, e5m2: FP8 codes (1 byte per weight);
//  - mxfp8: E4M3 codes plus the E8M0 scale of each 32-block of k (16 bytes per
//    panel and block), multiplied into the decoded value (or, AVX2 with few
//    rows, the sums kept divided by it: float_scaled_x.hpp);
//  - nvfp4: E2M1 nibbles (half a byte per weight) plus the E4M3 scale of each
//    16-block of k, likewise (full-precision NVFP4 layers).
// The kernels are written once (float_gemm_impl.hpp) over simd_traits.hpp and
// compiled per target by float_gemm.avx2.cpp and float_gemm.avx512.cpp.
//
// Layout: per panel, one row per k of 16 elements (one per column), the
// rows of a panel contiguous. Why: the kernel keeps the 16 columns in the
// lanes of one zmm (two ymm) and broadcasts the activation, so a panel row is
// one 16-byte (FP8) load. FP8 panels hold an even number of rows (a zero row
// after an odd K): the AVX-512 `vdpbf16ps` core reads rows 2t and 2t + 1 as
// one 32-byte load and interleaves them in registers into the 16 columns'
// [k, k+1] pairs it multiplies. One layout serves every core, so a layer can
// pick its core per call (few rows on the FMA core, many on vdpbf16ps).
//
// Decoding is exact: an FP8 code becomes an f16 bit pattern (E5M2 is the top
// byte of an f16; E4M3 goes to sign | code << 7, which is the E4M3 value times
// 2^-8, subnormals included) and `vcvtph2ps` widens that exactly. The 2^-8 of
// E4M3 (and MXFP8) is given back in alpha: every product and partial sum is
// scaled by exactly 2^-8 (they stay far from the f32 subnormal range: products
// of FP8 values are multiples of 2^-26), so y is the same float bit for bit.
// E4M3 NaN codes (0x7F, 0xFF) have no f16 image this way: the packer lists the
// columns that hold one and the kernel sets those outputs to NaN, which is
// what any sum with a NaN term is.
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/stream_prefetch.hpp"
#include "kernels/x86/fp8_nonfinite.hpp"

namespace mixq::kernels::x86 {

enum class PanelType : uint8_t { f32, bf16, f16, e4m3, e5m2, mxfp8, nvfp4 };
// One byte an element, FP8 codes: what the vdpbf16ps / AMX cores and the
// in-place readers take.
constexpr bool is_fp8(PanelType type) {
  return type == PanelType::e4m3 || type == PanelType::e5m2 || type == PanelType::mxfp8;
}
// The bits that mark a code of an FP8 type without a finite value
// (fp8_nonfinite.hpp): E5M2's inf / NaN, E4M3's NaN.
constexpr uint8_t nonfinite_bits(PanelType type) {
  return type == PanelType::e5m2 ? kE5m2NonFinite : kE4m3NonFinite;
}

struct FloatPanels {
  PanelType type = PanelType::f32;
  int64_t n = 0;       // logical output columns
  int64_t k = 0;       // input features (mxfp8: a multiple of 32, nvfp4: of 16)
  int64_t steps = 0;   // rows per panel: k, rounded up to even for FP8 codes
  int64_t panels = 0;  // ceil(n / 16)
  int64_t blocks = 0;  // mxfp8: k / 32; nvfp4: k / 16
  std::vector<uint8_t> data;    // panels · steps · row_bytes()
  std::vector<uint8_t> scales;  // mxfp8 / nvfp4: panels · blocks · 16 scale bytes
  // mxfp8: the smallest and largest E8M0 byte of the stored scales (what
  // the few-row AVX2 kernel checks before it rescales its sums per block).
  uint8_t scale_min = 0, scale_max = 0;
  std::vector<int64_t> nan_columns;  // columns holding an E4M3 NaN code (weight or block scale)
  // e5m2: the panels holding an inf or NaN code, which the decode by
  // exponent (few rows on AVX2: float_scaled_x.hpp) makes finite; the GEMM
  // runs those panels again on the f16 widening.
  std::vector<int64_t> nonfinite_panels;
  // In place (float_panels_in_place): `data` stays empty and the kernels pack
  // each chunk of panel rows from the stored rows just before use.
  const uint8_t* rows = nullptr;  // row r at rows + r · rows_stride
  int64_t rows_stride = 0;
  bool in_place() const { return rows != nullptr; }

  // Bytes of one panel row: 16 elements.
  int64_t row_bytes() const;
  // k-pairs of K: what the bf16 cores (vdpbf16ps, AMX) walk.
  int64_t pair_steps() const { return (k + 1) / 2; }
  // What the panels hold in memory (data, scales, NaN list).
  int64_t bytes() const {
    return static_cast<int64_t>(data.size() + scales.size() +
                                (nan_columns.size() + nonfinite_panels.size()) * sizeof(int64_t));
  }
};

// Packs a weight of n rows × k elements of `type` as stored (row r starts at
// w + r·row_bytes; little-endian bf16 / f16 / f32; nvfp4: two E2M1 codes per
// byte, the high nibble the even element). mxfp8 / nvfp4: `block_scales` is
// the scale byte of (row, block) row-major [n, k/32] E8M0 / [n, k/16] E4M3
// (k a multiple of the block).
// rows_packed(r0, r1), when set, is called from pool threads, in any order,
// each time rows [r0, r1) of w are packed and will not be read again, so the
// caller can drop their file pages while the rest of the layer packs.
using RowsPacked = std::function<void(int64_t row_begin, int64_t row_end)>;
FloatPanels pack_panels(PanelType type, const void* w, int64_t row_bytes, int64_t n, int64_t k,
                        const uint8_t* block_scales = nullptr, const RowsPacked& rows_packed = {});

// The same weight read in place (FP8 and MXFP8 codes only): nothing is
// copied but the MXFP8 block scales (1/32 of the codes), and no code is read
// (nan_columns and nonfinite_panels stay empty: the GEMM finds such codes
// as it packs); the bytes
// must outlive the result.
FloatPanels float_panels_in_place(PanelType type, const void* w, int64_t row_bytes, int64_t n, int64_t k,
                                  const uint8_t* block_scales = nullptr);
// Rows [s0, min(s1, k)) of panel `panel` of an in-place weight, packed as
// pack_panels lays them out, into dst (16 bytes a row; the pad row of an odd
// K is not written). Returns the rows (bit j: row 16·panel + j) whose codes
// there hold one without a finite value: an E4M3 NaN (e4m3, mxfp8), an E5M2
// inf or NaN (e5m2; fp8_nonfinite.hpp).
uint32_t pack_panel_steps(const FloatPanels& w, int64_t panel, int64_t s0, int64_t s1, uint8_t* dst);
// The same bytes and rows, packed 64 k at a time in zmm registers
// (float_pack_simd.hpp; what the AVX-512 and AMX cores call), or 32 k in ymm
// registers (what the AVX2 core calls).
uint32_t pack_panel_steps_avx512(const FloatPanels& w, int64_t panel, int64_t s0, int64_t s1, uint8_t* dst);
uint32_t pack_panel_steps_avx2(const FloatPanels& w, int64_t panel, int64_t s0, int64_t s1, uint8_t* dst);

// Lists of columns or panels, one per chunk of a parallel_for (each filled
// by the thread that runs it), and their merge. The members that do more
// than index are defined in float_gemm_pack.cpp, a baseline translation
// unit: a std::vector member instantiated in a per-target file is a weak
// symbol, and the linker may keep the AVX-512 file's copy for every caller
// (an EVEX vpbroadcastq in vector<vector<int64_t>>::assign stopped the AVX2
// path with SIGILL).
struct ThreadLists {
  std::vector<std::vector<int64_t>> lists;
  ThreadLists();
  ~ThreadLists();
  void reset(int chunks);
  std::vector<int64_t>& of(int thread) { return lists[static_cast<size_t>(thread)]; }
  // Every entry of the lists and of `more`, once each, ascending.
  std::vector<int64_t> merged(const std::vector<int64_t>& more) const;
};

// FMA cores: a is f32 [m, lda] (lda >= w.k). Every output is
// the FMA chain in k order (a[k]·w[k] added one k at a time), so with products
// exact in f32 (FP8 activations against FP8 weights) it equals the
// reference's `acc += a·w` bit for bit. y [m, n] = alpha·(a·wᵀ) + bias (bias
// may be null; mul, then add).
void float_gemm_avx2(const float* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha,
                     const float* bias, float* y);
void float_gemm_avx512(const float* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha,
                       const float* bias, float* y);

// The FMA core's bits for FP8 weights (E4M3, E5M2, MXFP8) read in place
// against few rows, without the per-call pack buffer: rows of a (f32 [m,
// lda]) against panels [p0, p1) of w (each panel's 16 columns inside w.n;
// one-k, in place), all of K, transposed and decoded in registers
// (fp8_rows_in_place.avx512vbmi.cpp; AVX-512 VBMI) as `how` says. alpha is
// the FMA core's (times 2^8 for E4M3 and MXFP8 panels); y [m, w.n] as above;
// the columns holding an E4M3 NaN code are appended to nan_columns.
struct Fp8RowsInPlace {
  int side_by_side;            // 1 .. 3 panels at a time (FMA chains interleaved step by step)
  int64_t prefetch_bytes;      // each row's codes fetched this far ahead (0: none) ...
  PrefetchHint prefetch_hint;  // ... with this hint (_MM_HINT_T0: into L1, _MM_HINT_T1: into L2)
  bool stage_aliased_rows;     // rows that share few L1 sets copied to a small buffer first
};
// The same on AVX2 (fp8_rows_in_place.avx2.cpp) for activations scaled by
// 2^112 (scaled_x, float_scaled_x.hpp: codes decoded to value·2^-120 /
// value·2^-112 by integer operations), groups of 8 weight rows transposed in
// registers; side_by_side groups (1 .. 4) at a time, stage_aliased_rows
// unused (groups whose rows would share L1 sets run a line apart instead).
// The columns holding an E4M3 NaN code go to nan_columns, the panels holding
// an E5M2 inf or NaN to nonfinite_panels (whose outputs the caller computes
// again on the f16 widening).
void fp8_rows_in_place_avx2(const float* a_scaled, int64_t lda, int64_t m, const FloatPanels& w, int64_t p0,
                            int64_t p1, const Fp8RowsInPlace& how, float alpha, const float* bias, float* y,
                            std::vector<int64_t>& nan_columns, std::vector<int64_t>& nonfinite_panels);
// Whether the CPU runs the FP8 kernels that decode codes by table lookups
// (fp8_few_rows_vbmi.hpp; AVX-512 VBMI): the two below.
bool fp8_table_decode_supported();
void fp8_rows_in_place_avx512vbmi(const float* a, int64_t lda, int64_t m, const FloatPanels& w, int64_t p0,
                                  int64_t p1, const Fp8RowsInPlace& how, float alpha, const float* bias,
                                  float* y, std::vector<int64_t>& nan_columns);

// The FMA core's bits for packed FP8 panels (E4M3, E5M2, MXFP8) against few
// rows: rows of a (f32 [m, lda]) against panels [p0, p1) of w (each panel's
// 16 columns inside w.n), all of K, the codes decoded by table lookups
// (fp8_panels_vbmi.avx512vbmi.cpp; AVX-512 VBMI) instead of the f16
// widening, `side_by_side` (1 .. 4) panels at a time, each panel's codes
// fetched `prefetch_bytes` ahead (0: none). alpha as above (times 2^8 for
// E4M3 and MXFP8); y [m, w.n]; the NaN columns are w.nan_columns, which
// the caller applies.
void fp8_panels_avx512vbmi(const float* a, int64_t lda, int64_t m, const FloatPanels& w, int64_t p0, int64_t p1,
                           int side_by_side, int64_t prefetch_bytes, float alpha, const float* bias, float* y);

// AVX-512 `vdpbf16ps` core over FP8 panels (E4M3, E5M2, MXFP8; the codes
// widened to bf16 in registers, exact): a is bf16 pairs [m, w.pair_steps()]
// (pairs [k, k+1], zero padding). y as above.
void float_gemm_avx512_bf16(const uint32_t* a, int64_t m, const FloatPanels& w, float alpha,
                            const float* bias, float* y);

// AMX-BF16 core over the same FP8 panels (Isa::amx; float_gemm_amx.avx512.cpp),
// for many rows: a is bf16 pairs of m rows of lda pairs, lda a multiple of
// 16 (>= w.pair_steps(), zero past them), in the AMX A tile layout: chunk i (16
// pairs, 64 bytes) of row r at a + (r / 16)·16·lda + 256·i + 16·(r % 16)
// (uint32 units), so that a tile load reads 1 KiB in one piece
// (prepare_bf16_avx512 with amx_tiles); 64-byte aligned and readable up to
// m rounded up to 32 rows (the rows past m are never stored). y as above.
// Threads take blocks of about `block_bytes` of activation rows (1 MiB
// measured best on 2 threads at K = 3072: `bench_amx`, its FP8 block sweep).
constexpr int64_t kAmxBf16BlockBytes = 1 << 20;
void float_gemm_amx_bf16(const uint32_t* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha,
                         const float* bias, float* y, int64_t block_bytes = kAmxBf16BlockBytes);

// Activation preparation:
//  - round: RNE of x to bf16 (AVX-512 only);
//  - e4m3 / e5m2: the FP8 value of clamp(x·inv_scale, ±max), RNE (docs/FORMATS.md §3.1);
//  - mxfp8: per 32-block dynamic MXFP8 (§3.3), value·2^(e-127);
//  - none: x unchanged.
enum class ActPrep { round, e4m3, e5m2, mxfp8, none };

// Into f32 [m, cols] (cols >= k, zeros past k; mxfp8 needs cols % 32 == 0).
// AVX2 refuses `round`.
void prepare_f32_avx2(const float* x, int64_t m, int64_t k, int64_t cols, ActPrep prep, float inv_scale,
                      float* out);
void prepare_f32_avx512(const float* x, int64_t m, int64_t k, int64_t cols, ActPrep prep, float inv_scale,
                        float* out);
// Into bf16 pairs [m, steps] (steps = ceil(cols/2), columns past k zero),
// as rows, or with amx_tiles (steps a multiple of 16) in the AMX A tile
// layout of float_gemm_amx_bf16.
void prepare_bf16_avx512(const float* x, int64_t m, int64_t k, int64_t steps, ActPrep prep, float inv_scale,
                         uint32_t* out, bool amx_tiles = false);

}  // namespace mixq::kernels::x86
