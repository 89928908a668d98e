// NVFP4 layers (spec/formats.md §3.2). W4A4 by default: the activation is
// quantized to NVFP4 and the fast path runs exact int32 block dots with VNNI
// (kernels/x86/nvfp4_w4a4.hpp). With full_precision_matrix_mult the weight is
// dequantized: the reference runs x·Wᵀ in f32 over W = e2m1·(S·g); the fast
// path keeps e2m1·S (exact in bf16) in bf16 panels, rounds x to bf16 and
// applies g in the epilogue (so it differs from the reference by the bf16
// rounding of x only).
#include <optional>

#include "kernels/ref/float_ref.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "kernels/x86/nvfp4_w4a4.hpp"
#include "linear/factories.hpp"
#include "linear/float_common.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/swizzle.hpp"

namespace mixq::linear {
namespace {

class Nvfp4Linear final : public FloatLinear {
 public:
  Nvfp4Linear(const Layer& layer, const LinearOptions& options) : FloatLinear(layer, "ref") {
    const TensorView& weight = layer.tensor("weight");
    if (weight.rank() != 2 || weight.dtype != DType::U8)
      fail("layer '{}': nvfp4 weight must be 2-D U8, found {} {}", layer.prefix,
           dtype_name(weight.dtype), shape_str(weight.shape));
    rows_ = weight.shape[0];
    row_bytes_ = weight.shape[1];
    const int64_t n = out_features(), k = in_features();
    if (n > rows_ || k > 2 * row_bytes_ || row_bytes_ % 8 != 0)
      fail("layer '{}': nvfp4 weight {} cannot hold [{}, {}] in 16-blocks", layer.prefix,
           shape_str(weight.shape), n, k);
    const int64_t blocks = row_bytes_ * 2 / 16;
    const uint8_t* codes = bytes_at_least(layer, "weight", rows_ * row_bytes_);
    const uint8_t* scales =
        bytes_at_least(layer, "weight_scale", swizzled_rows(rows_) * swizzled_cols(blocks));
    global_ = scalar_f32(layer, "weight_scale_2");
    bool has_input = false;
    const float input = optional_scalar_f32(layer, "input_scale", has_input);
    if (has_input) input_scale_ = input;
    if (const TensorView* pqs = layer.find("pre_quant_scale")) {
      std::vector<float> v = to_f32(*pqs);
      if (static_cast<int64_t>(v.size()) > k)
        fail("layer '{}': pre_quant_scale has {} values, in_features is {}", layer.prefix, v.size(), k);
      v.resize(static_cast<size_t>(k), 1.0f);  // padded input columns are zero anyway
      pre_quant_scale_ = std::move(v);
    }
    bias_ = bias_f32(layer, n);
    full_precision_ = full_precision(layer);
    const bool fast = use_avx512(options);
    if (full_precision_) {
      build_full_precision(codes, scales, blocks, fast);
    } else if (fast && kernels::x86::nvfp4_avx512_supported()) {
      packed_ = kernels::x86::nvfp4_pack(codes, rows_, row_bytes_, scales, n, global_);
      if (packed_.fast_ok) kernel_ = "avx512";
      else packed_ = {};
    }
    if (kernel_ == "ref" && !full_precision_) {
      codes_.assign(codes, codes + rows_ * row_bytes_);
      scales_.assign(scales, scales + swizzled_rows(rows_) * swizzled_cols(blocks));
    }
  }

  void forward(const float* x, int64_t m, float* y) const override {
    check(x, m, y);
    if (m == 0) return;
    const int64_t n = out_features(), k = in_features();
    const float* bias = bias_.empty() ? nullptr : bias_.data();
    const float* pqs = pre_quant_scale_.empty() ? nullptr : pre_quant_scale_.data();
    if (full_precision_) {
      std::vector<float> scaled;
      if (pqs) {
        scaled.assign(x, x + m * k);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t i = 0; i < k; ++i) scaled[r * k + i] *= pqs[i];
        x = scaled.data();
      }
      if (kernel_ == "ref") {
        kernels::ref::linear_f32(x, m, k, dequantized_.data(), n, bias, y);
      } else {
        std::vector<uint32_t> a(static_cast<size_t>(m * panels_.steps));
        kernels::x86::prepare_bf16_avx512(x, m, k, panels_.steps, kernels::x86::ActPrep::round, 1.0f,
                                          a.data());
        kernels::x86::float_gemm_avx512(a.data(), m, panels_, global_, bias, y);
      }
      return;
    }
    if (kernel_ == "ref") {
      const kernels::ref::Nvfp4Weight w{codes_.data(), rows_, row_bytes_, scales_.data(), global_};
      kernels::ref::nvfp4_w4a4(x, m, k, w, n, input_scale_, pqs, bias, y);
      return;
    }
    kernels::x86::Nvfp4Activation act;
    kernels::x86::nvfp4_quantize_avx512(x, m, k, packed_.blocks, pqs, input_scale_, act);
    kernels::x86::nvfp4_gemm_avx512(act, packed_, bias, y);
  }

 private:
  // W = e2m1·(S·g) for the reference (§3.2 decode with T = f32); e2m1·S
  // (exact in bf16) packed for the fast path.
  void build_full_precision(const uint8_t* codes, const uint8_t* scales, int64_t blocks, bool fast) {
    const int64_t n = out_features(), k = in_features();
    std::vector<float> w(static_cast<size_t>(n * k));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const uint8_t byte = codes[r * row_bytes_ + c / 2];
        const float v = e2m1_to_f32(c % 2 == 0 ? byte >> 4 : byte & 0x0F);
        const float s = e4m3_to_f32(scales[swizzled_offset(r, c / 16, blocks)]);
        w[static_cast<size_t>(r * k + c)] = fast ? v * s : v * (global_ * s);
      }
    if (fast) {
      panels_ = kernels::x86::pack_panels(w.data(), n, k, kernels::x86::GemmType::bf16);
      kernel_ = "avx512";
    } else {
      dequantized_ = std::move(w);
    }
  }

  int64_t rows_ = 0, row_bytes_ = 0;
  float global_ = 0.0f;
  std::optional<float> input_scale_;
  std::vector<float> pre_quant_scale_, bias_;
  bool full_precision_ = false;
  std::vector<uint8_t> codes_, scales_;  // reference copies
  std::vector<float> dequantized_;       // reference full precision
  kernels::x86::Nvfp4Packed packed_;
  kernels::x86::FloatPanels panels_;
};

}  // namespace

std::unique_ptr<Linear> make_nvfp4(const Layer& layer, const LinearOptions& options) {
  return std::make_unique<Nvfp4Linear>(layer, options);
}

}  // namespace mixq::linear
