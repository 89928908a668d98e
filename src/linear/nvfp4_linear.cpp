// NVFP4 layers (docs/FORMATS.md §3.2). W4A4 by default: the activation is
// quantized to NVFP4 and the fast paths run exact int32 block dots (AVX-512
// VNNI, or AVX2 with AVX-VNNI / vpmaddubsw; kernels/x86/nvfp4_w4a4.hpp), bit
// identical to the reference, on the mapped file's codes and scales in place
// (a layer built from a caller's buffers packs them). With full_precision_matrix_mult the weight is
// dequantized: the reference runs x·Wᵀ in f32 over W = e2m1·(S·g), decoding
// one row at a time; the fast paths keep the E2M1 nibbles and E4M3 block
// scales in float-GEMM panels (kernels/x86/float_gemm.hpp: the stored bytes,
// 0.5625 per weight), decode e2m1·S in registers and apply g in the
// epilogue; x stays f32 (avx512 runs its f32-FMA core for these layers, avx2
// its only core), so they differ from the reference by summation order only.
#include <cstring>
#include <optional>

#include "kernels/cpu.hpp"
#include "kernels/ref/float_ref.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "kernels/x86/nvfp4_w4a4.hpp"
#include "linear/runtime_table.hpp"
#include "linear/float_common.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "numeric/swizzle.hpp"
#include "util/phase_timer.hpp"

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
    if (full_precision_) {
      build_full_precision(codes, scales, blocks, fast_path(options));
    } else if (const FastPath path = nvfp4_w4a4_path(options); path != FastPath::none) {
      // In a mapped checkpoint file the kernels read the codes and scales in
      // place for every forward (no copy); a caller's buffer is packed.
      const TensorView& scale_view = layer.tensor("weight_scale");
      if (weight.storage && scale_view.storage) {
        packed_ = kernels::x86::nvfp4_in_place(codes, rows_, row_bytes_, scales, n, global_);
        if (packed_.fast_ok) hold_files({&weight, &scale_view});
      } else {
        packed_ = kernels::x86::nvfp4_pack(codes, rows_, row_bytes_, scales, n, global_);
      }
      w4a4_ = packed_.fast_ok ? path : FastPath::none;
      vnni_ = kernels::cpu_has_avx_vnni();
      if (w4a4_ == FastPath::avx512) kernel_ = "avx512";
      else if (w4a4_ == FastPath::avx2) kernel_ = vnni_ ? "avx2_vnni" : "avx2";
      else packed_ = {};
    }
    if (kernel_ == "ref") {
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
        const kernels::ref::Nvfp4Weight w{codes_.data(), rows_, row_bytes_, scales_.data(), global_};
        kernels::ref::nvfp4_linear_full_precision(x, m, k, w, n, bias, y);
      } else {
        gemm_.run(x, m, k, kernels::x86::ActPrep::round, 1.0f, global_, bias, y);
      }
      return;
    }
    if (kernel_ == "ref") {
      const kernels::ref::Nvfp4Weight w{codes_.data(), rows_, row_bytes_, scales_.data(), global_};
      kernels::ref::nvfp4_w4a4(x, m, k, w, n, input_scale_, pqs, bias, y);
      return;
    }
    // Kept by the calling thread between calls (grow-only), as FloatGemm keeps
    // its activations: a fresh one per call (12 MB of codes at M = 4096,
    // K = 3072) paid its page faults and zero fill every time. The
    // quantizer writes every code, scale and compensation.
    thread_local kernels::x86::Nvfp4Activation act;
    {
      util::PhaseScope phase("quantize activations (NVFP4 blocks)");
      if (w4a4_ == FastPath::avx512)
        kernels::x86::nvfp4_quantize_avx512(x, m, k, packed_.blocks, pqs, input_scale_, act);
      else
        kernels::x86::nvfp4_quantize_avx2(x, m, k, packed_.blocks, pqs, input_scale_, act);
    }
    util::PhaseScope phase("W4A4 GEMM + epilogue");
    if (w4a4_ == FastPath::avx512)
      kernels::x86::nvfp4_gemm_avx512(act, packed_, bias, y);
    else
      kernels::x86::nvfp4_gemm_avx2(act, packed_, bias, y, vnni_);
    check_files();
  }

 private:
  // The fast full-precision path: E2M1 nibbles and row-major block scales in
  // panels of K padded to the 16-blocks (x gets zero columns there).
  void build_full_precision(const uint8_t* codes, const uint8_t* scales, int64_t blocks, FastPath path) {
    if (path == FastPath::none) return;
    const int64_t n = out_features(), kp = (in_features() + 15) / 16 * 16;
    // Unswizzled in runs (numeric/swizzle.hpp), then each row cut to the kp / 16 blocks used.
    std::vector<uint8_t> linear = unswizzle_scales(scales, n, blocks);
    if (kp / 16 < blocks)
      for (int64_t r = 1; r < n; ++r)
        std::memmove(linear.data() + r * (kp / 16), linear.data() + r * blocks, static_cast<size_t>(kp / 16));
    gemm_ = FloatGemm(path, kernels::x86::PanelType::nvfp4, codes, row_bytes_, n, kp, /*f32_activations=*/true,
                      linear.data());
    kernel_ = gemm_.name();
  }

  int64_t held_bytes() const override {
    return gemm_.bytes() + static_cast<int64_t>(packed_.data.size() + codes_.size() + scales_.size() +
                                                (bias_.size() + pre_quant_scale_.size()) * sizeof(float));
  }

  int64_t rows_ = 0, row_bytes_ = 0;
  float global_ = 0.0f;
  std::optional<float> input_scale_;
  std::vector<float> pre_quant_scale_, bias_;
  bool full_precision_ = false;
  std::vector<uint8_t> codes_, scales_;  // reference copies
  kernels::x86::Nvfp4Weights packed_;  // packed, or the file's bytes in place (hold_files)
  FastPath w4a4_ = FastPath::none;  // which W4A4 kernel runs packed_
  bool vnni_ = false;               // AVX2 kernel: AVX-VNNI block dots
  FloatGemm gemm_;                  // full-precision fast path
};

}  // namespace

std::unique_ptr<Linear> make_nvfp4(const Layer& layer, const LinearOptions& options) {
  return std::make_unique<Nvfp4Linear>(layer, options);
}

}  // namespace mixq::linear
