// awq_w4a16 linear (spec/formats.md §3.9). Reference: the CUDA naive
// kernel's semantics the spec recommends — W = (q − 8)·scale + zero in fp32,
// fp32 accumulation, bias added last — as a dense f32 linear over the
// dequantized weight. Fast (AVX-512 BF16): the nibble kernel of
// kernels/x86/awq_w4a16.hpp, which rounds the activations to bf16.
#include "formats/awq.hpp"
#include "kernels/x86/awq_w4a16.hpp"
#include "linear/factories.hpp"
#include "linear/float_common.hpp"
#include "linear/w4a8_linear.hpp"
#include "mixq/error.hpp"

namespace mixq::linear {
namespace {

class AwqLinear final : public Linear {
 public:
  AwqLinear(const Layer& layer, kernels::x86::AwqPacked packed)
      : Linear(layer.in_features, layer.out_features), prefix_(layer.prefix), packed_(std::move(packed)) {}
  void forward(const float* x, int64_t m, float* y) const override {
    if (m < 0) fail("layer '{}': negative row count {}", prefix_, m);
    if (m > 0) kernels::x86::awq_avx512(packed_, x, m, y);
  }
  std::string_view kernel_name() const override { return "awq:avx512_bf16"; }

 private:
  std::string prefix_;
  kernels::x86::AwqPacked packed_;
};

}  // namespace

std::unique_ptr<Linear> make_awq_w4a16(const Layer& layer, const LinearOptions& options) {
  const int64_t n = layer.out_features, k = layer.in_features;
  const FormatTraits& record = formats::awq_w4a16_format();
  if (full_precision(layer) || !use_avx512(options)) {
    std::vector<float> w(static_cast<size_t>(n * k));
    record.dequantize(layer, Basis::original, w.data());
    return make_dense_f32(layer, std::move(w), options, full_precision(layer) ? "dequant" : "awq_dequant");
  }
  const formats::AwqTensors t = formats::awq_tensors(layer);
  return std::make_unique<AwqLinear>(
      layer, kernels::x86::awq_pack(reinterpret_cast<const uint8_t*>(t.codes), t.scale.data(), t.zeros.data(), n, k,
                                    t.group_size, bias_f32(layer, n)));
}

}  // namespace mixq::linear
