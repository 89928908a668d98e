#pragma once
// NVFP4 W4A4 on x86: weights repacked once for `vpdpbusd`, activations
// quantized per call, exact int32 block dot products, fp32 epilogue.
//
// Why repack: the checkpoint stores each weight row's codes contiguously
// (hi-first nibbles) and the block scales in cuBLAS's swizzled tiles. The VNNI
// kernel wants 16 output columns in the 16 int32 lanes of a zmm and 4
// consecutive k per lane, so the packed layout is, per panel of 16 rows and per
// 16-element block b (144 bytes, streamed linearly by one thread):
//   bytes [0, 64):   k-octet 0: byte 4·j+i (row j of the panel) holds
//                    code(k = 16b+i) in the low nibble, code(16b+4+i) high;
//   bytes [64, 128): k-octet 1, the same for k = 16b+8+i and 16b+12+i;
//   bytes [128,144): the 16 rows' E4M3 block scales.
// A `vpermb` LUT (AVX-512 VBMI) turns a nibble into the unsigned byte 12 + 2·e2m1 (0..24),
// so the weight is vpdpbusd's unsigned operand and the doubled activation code
// (-12..12) its signed operand; the +12 offset is removed with a per-(row,
// block) compensation −12·Σ x2 computed while quantizing the activation.
// Block dot = Σ (2·e2m1(x))·(2·e2m1(w)) = 4·Σ e2m1·e2m1, exact in int32.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace mixq::kernels::x86 {

constexpr int64_t kNvfp4PanelBlockBytes = 144;

// The weight a kernel runs on, in one of two forms:
// - packed (nvfp4_pack): the panel layout above in `data`;
// - in place (nvfp4_in_place): the checkpoint's own bytes, read for every
//   forward (a mapped file's pages are then the only copy). `codes` holds
//   [rows, row_bytes] hi-first nibbles, `scales` the swizzled E4M3 tiles.
//   M <= kNvfp4InPlaceGemvM rows run a GEMV with lanes along k (8 weight
//   rows per step; with AVX-512 VBMI 2 .. kNvfp4InPlaceGemv16M rows run one
//   with 16 in zmm, nvfp4_gemv16_impl.hpp; block sums moved into row lanes
//   before the f32 epilogue);
//   larger M decode each group of panels from the rows into the same
//   per-thread buffer the packed large-M path uses. Both give the packed
//   kernels' bits.
struct Nvfp4Weights {
  int64_t n = 0;        // logical output features (rows used)
  int64_t blocks = 0;   // 16-element blocks along K (stored K / 16)
  int64_t panels = 0;   // ceil(n / 16)
  float global = 0.0f;  // g_w
  std::vector<uint8_t> data;  // packed: panels · blocks · 144 bytes
  const uint8_t* codes = nullptr;   // in place: row r at codes + r · row_bytes
  const uint8_t* scales = nullptr;  // in place: swizzled block scales
  int64_t row_bytes = 0;            // in place
  // False when a block scale is an E4M3 NaN (0x7F/0xFF): the fast decode
  // cannot represent it, so the layer must run the reference kernel.
  bool fast_ok = true;
  bool in_place() const { return codes != nullptr; }
};

// M up to which an in-place weight runs the k-lane GEMV (nvfp4_in_place_impl.hpp,
// up to 4 activation rows per pass over a group of weight rows). On Zen 4 it
// took 0.3-0.9x the time of the panel decode at 2 to 8 rows (2.3x faster at
// 3, 1.1-1.2x at 8; bench_in_place --format nvfp4, BENCHMARKS.md "Zen 4,
// third session"); it was 2 when each row decoded the group again.
constexpr int64_t kNvfp4InPlaceGemvM = 8;
// The same bound for the 16-row zmm GEMV (AVX-512 VBMI, from 2 rows;
// nvfp4_gemv16_impl.hpp): on Zen 5 1.5x the panel decode at 9 rows, 1.25-1.3x
// at 12, 1.1-1.15x at 16, from DRAM (bench_in_place --format nvfp4,
// BENCHMARKS.md "Issue 14 on Zen 5, tenth session").
constexpr int64_t kNvfp4InPlaceGemv16M = 16;

// codes [rows, row_bytes] hi-first; scales swizzled for [rows, row_bytes*2/16].
Nvfp4Weights nvfp4_pack(const uint8_t* codes, int64_t rows, int64_t row_bytes, const uint8_t* scales,
                        int64_t n, float global);
// The same weight read in place: nothing is copied; the bytes must outlive
// the result. Reads every used block scale once (the NaN check).
Nvfp4Weights nvfp4_in_place(const uint8_t* codes, int64_t rows, int64_t row_bytes, const uint8_t* scales,
                            int64_t n, float global);

// The per-call quantized activation.
struct Nvfp4Activation {
  int64_t m = 0, blocks = 0;
  std::vector<int8_t> q;       // [m, blocks*16] doubled E2M1 codes, -12..12
  std::vector<float> scale;    // [m, blocks] S_x as f32
  std::vector<int32_t> comp;   // [m, blocks] -12·Σ q over the block
  float global = 0.0f;         // g_x
};

// Shared start of nvfp4_quantize_*: checks k, sizes `out`, sets its global
// scale g_x = input_scale, or amax() / 2688 (docs/FORMATS.md §3.2; amax is only asked for
// without input_scale). Returns false for an all-zero activation (g_x = 0):
// then every code, scale and compensation is 0, as in the reference, and the
// caller has nothing left to do.
bool nvfp4_start_activation(int64_t m, int64_t k, int64_t blocks, std::optional<float> input_scale,
                            const std::function<float()>& amax, Nvfp4Activation& out);

// True when this CPU also has AVX-512 VBMI (vpermb), which the kernels below need
// on top of the avx512 ISA level (AVX-512 VNNI + BF16 CPUs without VBMI exist).
bool nvfp4_avx512_supported();

// AVX-512 kernels (nvfp4_w4a4.avx512vbmi.cpp). x [m, k] f32; k <= 16·blocks.
void nvfp4_quantize_avx512(const float* x, int64_t m, int64_t k, int64_t blocks,
                           const float* pre_quant_scale, std::optional<float> input_scale,
                           Nvfp4Activation& out);
// y [m, n] = the NVFP4 linear of `act` and `w`, plus bias (may be null).
void nvfp4_gemm_avx512(const Nvfp4Activation& act, const Nvfp4Weights& w, const float* bias,
                       float* y);

// AVX2 kernels (nvfp4_w4a4.avx2.cpp) on the same packed weights (a panel is
// two ymm halves of 8 rows; vpshufb replaces vpermb) and the same activation
// struct; bit-identical results to the AVX-512 pair and the reference.
void nvfp4_quantize_avx2(const float* x, int64_t m, int64_t k, int64_t blocks,
                         const float* pre_quant_scale, std::optional<float> input_scale,
                         Nvfp4Activation& out);
// vnni: block dots with AVX-VNNI `vpdpbusd ymm` (pass cpu_has_avx_vnni()), or
// with vpmaddubsw + vpmaddwd when false (tests force it to cover CPUs without).
void nvfp4_gemm_avx2(const Nvfp4Activation& act, const Nvfp4Weights& w, const float* bias, float* y,
                     bool vnni);
// For tests: panel `panel` of an in-place weight decoded into the large-M
// kernels' buffer layout for `lanes` 8 (AVX2) or 16 (AVX-512), per 16-element
// block 320 bytes: per vector h of `lanes` rows, 4 parts of 4·lanes bytes
// (lane j: bytes 12 + 2·e2m1 of k = 16b + 4q .. + 3 of row lanes·h + j), then
// the rows' block scales as f32. AVX2 instructions only (nvfp4_w4a4.avx2.cpp).
void nvfp4_decode_panel_in_place(const Nvfp4Weights& w, int64_t panel, int lanes, uint8_t* out);
// The AVX-VNNI variant (nvfp4_w4a4.avxvnni.cpp); nvfp4_gemm_avx2 calls it.
void nvfp4_gemm_avx_vnni(const Nvfp4Activation& act, const Nvfp4Weights& w, const float* bias, float* y);

}  // namespace mixq::kernels::x86
