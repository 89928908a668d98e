// asym_w4a8_int8 linear (docs/FORMATS.md §3.7): the layer IS an INT8 +
// ConvRot layer whose int8 weight is the §3.7 decode of the 4-bit codes, with
// the per-row scale weight_s_channel: it runs on the integer family's kernels
// (reference and fast) with Q8row activations and the (s_x·s_w) epilogue. The
// kernels get the codes and s_rel as stored (kernels::IntCodes): the fast
// ones keep them at 4 bits and decode inside the GEMM, bit-identical to the
// decoded int8 weight. With weight_correction (or full_precision_matrix_mult)
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
                                          out_features(), in_features());
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
  const formats::W4a8Codes c = formats::w4a8_codes(layer);
  if (c.n != n || c.k != k)
    fail("layer '{}': W4A8 weight is [{}, {}], layer says [{}, {}]", layer.prefix, c.n, c.k, n, k);
  const std::vector<float> bias = read_bias(layer, n);
  kernels::IntCodes codes;
  codes.codes = c.codes;
  codes.s_rel_e4m3 = c.s_rel_e4m3;
  codes.s_rel_f32 = c.s_rel_f32;
  for (int i = 0; i < 16; ++i) codes.levels[i] = c.codebook.empty() ? static_cast<float>(i - 8) : c.codebook[i];
  codes.group_size = c.group_size;
  kernels::IntLayerDesc desc;
  desc.n = n;
  desc.k = k;
  desc.group = c.convrot_groupsize;
  desc.act = kernels::ActQuant::q8row;
  desc.epilogue = kernels::Epilogue::scale_product;
  desc.int4_weights = false;  // decoded values span [-127, 127]
  desc.codes = &codes;
  desc.weight_scale = c.s_channel.data();
  desc.bias = bias.empty() ? nullptr : bias.data();
  return make_int_linear(layer, desc, options);
}

}  // namespace mixq::linear
