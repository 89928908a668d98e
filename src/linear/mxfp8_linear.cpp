// MXFP8 layers (docs/FORMATS.md §3.3): E4M3 codes with E8M0 per-32 block
// scales (swizzled; row-major [N, K/32] for layers of SGLang's global MXFP8
// rule, swizzled here once), activations quantized dynamically per 32-block.
// The weight stays 8-bit: the fast paths repack the codes and the block
// exponents into panels (kernels/x86/float_gemm.hpp) and the kernel
// multiplies each decoded code by its power-of-two block scale in registers,
// so the GEMM is a plain float GEMM with fp32 accumulation; the reference
// sums each block exactly first and then scales, so the two differ by fp32
// rounding order only. avx512 runs vdpbf16ps from 5 rows and f32 FMAs below
// ("avx512_bf16+avx512_fma") or f32 FMAs only ("avx512_fma") as
// kernels::float_dot measured, and on an AMX machine
// AMX-BF16 tiles from 32 rows ("amx_bf16+" the core below); avx2 runs f32
// FMAs.
// full_precision_matrix_mult: W = e4m3·2^(e-127) in f32 and x·Wᵀ with x in
// f32 (avx512 runs its FMA core for these layers; the reference decodes W one
// row at a time).
#include "kernels/ref/float_ref.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "linear/runtime_table.hpp"
#include "linear/float_common.hpp"
#include "mixq/error.hpp"
#include "mixq/marker.hpp"
#include "mixq/numeric.hpp"
#include "numeric/swizzle.hpp"

namespace mixq::linear {
namespace {

using kernels::x86::ActPrep;

class Mxfp8Linear final : public FloatLinear {
 public:
  Mxfp8Linear(const Layer& layer, const LinearOptions& options) : FloatLinear(layer, "ref") {
    const TensorView& weight = layer.tensor("weight");
    if (weight.dtype != DType::F8_E4M3 || weight.rank() != 2 || weight.shape[1] % 32 != 0)
      fail("layer '{}': mxfp8 weight must be F8_E4M3 [N, K] with K % 32 == 0, found {} {}",
           layer.prefix, dtype_name(weight.dtype), shape_str(weight.shape));
    rows_ = weight.shape[0];
    cols_ = weight.shape[1];
    const int64_t n = out_features(), k = in_features(), blocks = cols_ / 32;
    if (n > rows_ || k > cols_)
      fail("layer '{}': mxfp8 weight {} cannot hold [{}, {}]", layer.prefix, shape_str(weight.shape), n, k);
    const uint8_t* codes = bytes_at_least(layer, "weight", rows_ * cols_);
    // Row-major [N, K/32] exponents (SGLang's global MXFP8 rule) or swizzled.
    const bool row_major = row_major_scales(layer.params);
    const int64_t scale_bytes = row_major ? rows_ * blocks : swizzled_rows(rows_) * swizzled_cols(blocks);
    const uint8_t* scales = bytes_at_least(layer, "weight_scale", scale_bytes);
    bias_ = bias_f32(layer, n);
    full_precision_ = full_precision(layer);
    if (const FastPath path = fast_path(options); path != FastPath::none) {
      // The panels take the block exponents row-major (the first n rows);
      // all cols_ columns are packed (x is padded to the 32-blocks). One
      // unswizzle buffer per loading thread: a fresh one per layer faulted in
      // new pages every time (1/32 of the checkpoint, ~0.3 s of a FLUX-sized
      // load).
      thread_local std::vector<uint8_t> linear;
      if (!row_major) {
        linear.resize(static_cast<size_t>(n * blocks));
        unswizzle_scales(scales, n, blocks, linear.data());
      }
      // Codes in a mapped checkpoint file are read in place (the exponents,
      // 1/32 of them, are copied into the panels' order).
      const TensorView& weight = layer.tensor("weight");
      const bool in_place = weight.storage != nullptr;
      gemm_ = FloatGemm(path, kernels::x86::PanelType::mxfp8, codes, cols_, n, cols_, full_precision_,
                        row_major ? scales : linear.data(), options.release_file_pages, in_place);
      if (in_place) hold_files({&weight});
      kernel_ = gemm_.name();
      return;
    }
    codes_.assign(codes, codes + rows_ * cols_);
    if (row_major) scales_ = swizzle_scales(scales, rows_, blocks);  // the reference reads them swizzled
    else scales_.assign(scales, scales + scale_bytes);
  }

  void forward(const float* x, int64_t m, float* y) const override {
    check(x, m, y);
    if (m == 0) return;
    const int64_t n = out_features(), k = in_features();
    const float* bias = bias_.empty() ? nullptr : bias_.data();
    if (kernel_ == "ref") {
      const kernels::ref::Mxfp8Weight w{codes_.data(), rows_, cols_, scales_.data()};
      if (full_precision_)
        kernels::ref::mxfp8_linear_full_precision(x, m, k, w, n, bias, y);
      else
        kernels::ref::mxfp8_linear(x, m, k, w, n, bias, y);
      return;
    }
    gemm_.run(x, m, k, full_precision_ ? ActPrep::round : ActPrep::mxfp8, 1.0f, 1.0f, bias, y);
    check_files();
  }

 private:
  int64_t held_bytes() const override {
    return gemm_.bytes() + static_cast<int64_t>(codes_.size() + scales_.size() + bias_.size() * sizeof(float));
  }

  int64_t rows_ = 0, cols_ = 0;
  std::vector<float> bias_;
  std::vector<uint8_t> codes_, scales_;
  bool full_precision_ = false;
  FloatGemm gemm_;
};

}  // namespace

std::unique_ptr<Linear> make_mxfp8(const Layer& layer, const LinearOptions& options) {
  return std::make_unique<Mxfp8Linear>(layer, options);
}

}  // namespace mixq::linear
