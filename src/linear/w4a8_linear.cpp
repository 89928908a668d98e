// asym_w4a8_int8 linear (docs/FORMATS.md §3.7): the 4-bit codes are decoded
// once to int8 with the §3.7 formula, then the layer IS an INT8 + ConvRot
// layer with the per-row scale weight_s_channel: it runs on the integer
// family's kernels (reference and fast) with Q8row activations and the
// (s_x·s_w) epilogue. With weight_correction (or full_precision_matrix_mult)
// it runs the eager float path: dequantize to the original basis, f32 linear.
// Also home of make_dense_f32 (w4a8_linear.hpp).
#include "linear/w4a8_linear.hpp"

#include "formats/w4a8.hpp"
#include "kernels/ref/float_ref.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "linear/runtime_table.hpp"
#include "linear/float_common.hpp"
#include "linear/int_linear_common.hpp"
#include "mixq/error.hpp"

namespace mixq::linear {
namespace {

class DenseF32Linear final : public Linear {
 public:
  DenseF32Linear(const Layer& layer, std::vector<float> weight, std::vector<float> bias, bool fast, std::string tag)
      : Linear(layer.in_features, layer.out_features),
        prefix_(layer.prefix),
        weight_(std::move(weight)),
        bias_(std::move(bias)),
        fast_(fast),
        name_(tag + (fast ? ":avx512" : ":ref")) {
    if (fast_) {
      panels_ = kernels::x86::pack_panels(kernels::x86::PanelType::f32, weight_.data(), in_features() * 4,
                                          out_features(), in_features(), false);
      weight_.clear();
      weight_.shrink_to_fit();
    }
  }
  void forward(const float* x, int64_t m, float* y) const override {
    if (m < 0) fail("layer '{}': negative row count {}", prefix_, m);
    if (m == 0) return;
    const float* b = bias_.empty() ? nullptr : bias_.data();
    if (fast_)
      kernels::x86::float_gemm_avx512(x, in_features(), m, panels_, 1.0f, b, y);
    else
      kernels::ref::linear_f32(x, m, in_features(), weight_.data(), out_features(), b, y);
  }
  std::string_view kernel_name() const override { return name_; }

 private:
  std::string prefix_;
  std::vector<float> weight_;
  kernels::x86::FloatPanels panels_;
  std::vector<float> bias_;
  bool fast_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Linear> make_dense_f32(const Layer& layer, std::vector<float> weight, const LinearOptions& options,
                                       std::string tag) {
  if (static_cast<int64_t>(weight.size()) != layer.out_features * layer.in_features)
    fail("layer '{}': dense weight has {} values, expected {} x {}", layer.prefix, weight.size(),
         layer.out_features, layer.in_features);
  return std::make_unique<DenseF32Linear>(layer, std::move(weight), bias_f32(layer, layer.out_features),
                                          use_avx512(options), std::move(tag));
}

std::unique_ptr<Linear> make_asym_w4a8_int8(const Layer& layer, const LinearOptions& options) {
  const int64_t n = layer.out_features, k = layer.in_features;
  const FormatTraits& record = formats::asym_w4a8_int8_format();
  if (full_precision(layer) || layer.find("weight_correction")) {
    std::vector<float> w(static_cast<size_t>(n * k));
    record.dequantize(layer, Basis::original, w.data());
    return make_dense_f32(layer, std::move(w), options, full_precision(layer) ? "dequant" : "w4a8_correction");
  }
  const formats::W4a8Decoded d = formats::w4a8_decode(layer);
  if (d.n != n || d.k != k)
    fail("layer '{}': decoded W4A8 weight is [{}, {}], layer says [{}, {}]", layer.prefix, d.n, d.k, n, k);
  const std::vector<float> bias = read_bias(layer, n);
  kernels::IntLayerDesc desc;
  desc.n = n;
  desc.k = k;
  desc.group = d.convrot_groupsize;
  desc.act = kernels::ActQuant::q8row;
  desc.epilogue = kernels::Epilogue::scale_product;
  desc.int4_weights = false;  // decoded values span [-127, 127]
  desc.weight = d.w8.data();
  desc.weight_scale = d.s_channel.data();
  desc.bias = bias.empty() ? nullptr : bias.data();
  return make_int_linear(layer, desc, options);
}

}  // namespace mixq::linear
