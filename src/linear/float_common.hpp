#pragma once
// Helpers shared by the float-family Linear classes (unquantized, FP8, NVFP4,
// MXFP8): reading a layer's small tensors safely (views may be unaligned) and
// the common forward checks.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/x86/float_gemm.hpp"
#include "linear/kernel_path.hpp"
#include "mixq/layer.hpp"
#include "mixq/linear.hpp"

namespace mixq::linear {

// The bias as f32 [n], or empty when the layer has none. Error when its
// length is not n.
std::vector<float> bias_f32(const Layer& layer, int64_t n);
// A one-element float tensor ([] or [1]) as f32; Error naming the layer otherwise.
float scalar_f32(const Layer& layer, std::string_view role);
// Optional scalar: nullopt-like flag through `present`.
float optional_scalar_f32(const Layer& layer, std::string_view role, bool& present);
// The raw bytes of a tensor, with an Error when fewer than `need` bytes.
const uint8_t* bytes_at_least(const Layer& layer, std::string_view role, int64_t need);
// full_precision_matrix_mult from the marker parameters (false when absent).
bool full_precision(const Layer& layer);

// A float layer's packed weight and its GEMM on the chosen fast path
// (kernels/x86/float_gemm.hpp): the weight stays in its stored element type
// (FP8 codes, E2M1 nibbles, bf16 / f16 / f32) and is decoded in the kernel.
// avx512 runs FP8 / MXFP8 with quantized activations on the `vdpbf16ps` core
// or on the f32-FMA core, as kernels::float_dot() says when the layer is
// created (measured per process: the faster instruction on this core), and
// on AMX machines (Isa::amx) on AMX-BF16 tiles for many rows;
// everything else (unquantized, full precision) runs the FMA core. avx2 runs
// its FMA core on f32 activations.
class FloatGemm {
 public:
  FloatGemm() = default;
  // w: n rows of k elements of `type` as stored, row r at w + r·row_bytes
  // (block_scales for mxfp8 / nvfp4: see kernels::x86::pack_panels); path
  // avx2 or avx512. `f32_activations` (full-precision and unquantized
  // layers): x stays f32, so avx512 takes its FMA core whatever
  // kernels::float_dot() prefers (vdpbf16ps would need x in bf16, a 2^-9
  // relative rounding the reference does not make).
  // `release_rows` (LinearOptions::release_file_pages): drops the file pages
  // of w's rows as they are packed, so that a large layer's packed copy and
  // its whole mapped weight are never resident together.
  // `in_place` (FP8 / MXFP8 codes lying in a mapped file): nothing is
  // packed at load; each K chunk of the rows is packed inside the GEMM
  // (kernels::x86::float_panels_in_place), and w must outlive this.
  FloatGemm(FastPath path, kernels::x86::PanelType type, const void* w, int64_t row_bytes, int64_t n, int64_t k,
            bool f32_activations, const uint8_t* block_scales = nullptr, bool release_rows = false,
            bool in_place = false);
  bool ready() const { return path_ != FastPath::none; }
  // The cores from the most rows down: "avx512_fma" or "avx2"; with
  // vdpbf16ps chosen "avx512_bf16+avx512_fma" (the FMA core for the few
  // rows fma_rows() names); on an AMX machine "amx_bf16+" before either
  // (tiles from kAmxRows rows).
  std::string_view name() const {
    if (path_ != FastPath::avx512) return "avx2";
    if (amx_) return fma_ ? "amx_bf16+avx512_fma" : "amx_bf16+avx512_bf16+avx512_fma";
    return fma_ ? "avx512_fma" : "avx512_bf16+avx512_fma";
  }
  // y [m, n] = alpha·(prep(x)·Wᵀ) + bias for x [m, k] (k <= the packed K;
  // missing columns are zeros). prep `round` marks full-precision layers: x
  // is used as is, in f32, on every path.
  void run(const float* x, int64_t m, int64_t k, kernels::x86::ActPrep prep, float inv_scale,
           float alpha, const float* bias, float* y) const;
  // Bytes the packed weight holds.
  int64_t bytes() const { return panels_.bytes(); }

 private:
  FastPath path_ = FastPath::none;
  bool fma_ = false;  // avx512: the FMA core instead of vdpbf16ps
  bool amx_ = false;  // FP8 / MXFP8 on an AMX machine: bf16 tiles from kAmxRows rows
  // Rows from which the AMX core runs (below: the core fma_ names, on the
  // same panels; the weights' read bounds those few rows anyway).
  static constexpr int64_t kAmxRows = 32;
  // Whether m rows run the FMA core (else vdpbf16ps or AMX tiles). Where
  // vdpbf16ps is chosen (Zen 5), FP8 still runs the FMA core up to kFmaRows
  // rows, packed or read in place alike (so both give the same bits): read
  // in place, 1-4 rows ran 1.3-1.4x faster on it than on vdpbf16ps (its rows
  // transposed in registers); packed, 1-2 rows 1.25x faster, 3-4 rows
  // 1.1-1.2x slower (bench_float_tunings; BENCHMARKS.md, "Issue 14 on Zen 5").
  // A checkpoint's FP8 layers are read in place.
  bool fma_rows(int64_t m) const;
  static constexpr int64_t kFmaRows = 4;
  kernels::x86::FloatPanels panels_;
};

// Base for the float-family layers: forward checks, kernel name.
class FloatLinear : public Linear {
 public:
  std::string_view kernel_name() const override { return kernel_; }
  std::optional<int64_t> packed_bytes() const override { return held_bytes(); }

 protected:
  FloatLinear(const Layer& layer, std::string kernel)
      : Linear(layer.in_features, layer.out_features), prefix_(layer.prefix), kernel_(std::move(kernel)) {}
  void check(const float* x, int64_t m, float* y) const;
  // The weight bytes this layer holds (packed panels or reference copies,
  // scales and bias included).
  virtual int64_t held_bytes() const = 0;
  // A layer whose kernel reads tensors in place keeps their mapped files
  // (Linear::reads_file_in_place) and, after each forward, reports a file
  // truncated under it (its pages would read as zeros).
  bool reads_file_in_place() const override { return !files_.empty(); }
  void hold_files(std::initializer_list<const TensorView*> tensors);
  void check_files() const;
  std::string prefix_;
  std::string kernel_;

 private:
  std::vector<std::shared_ptr<const MappedFile>> files_;
};

}  // namespace mixq::linear
