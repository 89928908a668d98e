// awq_w4a16 linear (docs/FORMATS.md §3.9). Reference: the CUDA naive
// kernel's semantics that section recommends — W = (q − 8)·scale + zero in fp32,
// fp32 accumulation, bias added last — as a dense f32 linear over the
// dequantized weight. Fast: the nibble kernels of kernels/x86/awq_w4a16.hpp,
// AVX-512 BF16 (rounds the activations to bf16) or the f32-FMA decode (w =
// q·s + (z − 8s) in f32, fp32 activations) on AVX-512 or AVX2. On avx512
// kernels::float_dot() (measured: the faster of vdpbf16ps and vfmadd231ps on
// this core) picks between the two when the layer is created, for every row
// count: a row's result does not depend on how many rows the call has. (Up to
// 16 rows used to run the FMA kernel under vdpbf16ps too, measured faster on
// Zen 5 than the vdpbf16ps kernel's 2-panel tiles without prefetch; with 4
// panels a row and prefetch that kernel took 0.6-0.8x the FMA kernel's time at
// 1 to 16 rows on Zen 4, BENCHMARKS.md "Zen 4, third session".)
#include "formats/awq.hpp"
#include "kernels/calibrate.hpp"
#include "kernels/cpu.hpp"
#include "kernels/x86/awq_w4a16.hpp"
#include "linear/runtime_table.hpp"
#include "linear/float_common.hpp"
#include "linear/w4a8_linear.hpp"
#include "mixq/error.hpp"

namespace mixq::linear {
namespace {

enum class AwqKernel { avx512_bf16, avx512_fma, avx2_fma };

class AwqLinear final : public Linear {
 public:
  AwqLinear(const Layer& layer, kernels::x86::AwqPacked packed, AwqKernel kernel)
      : Linear(layer.in_features, layer.out_features),
        prefix_(layer.prefix),
        packed_(std::move(packed)),
        kernel_(kernel) {}
  void forward(const float* x, int64_t m, float* y) const override {
    if (m < 0) fail("layer '{}': negative row count {}", prefix_, m);
    if (m == 0) return;
    switch (kernel_) {
      case AwqKernel::avx512_bf16: kernels::x86::awq_avx512(packed_, x, m, y); break;
      case AwqKernel::avx512_fma: kernels::x86::awq_avx512_fma(packed_, x, m, y); break;
      case AwqKernel::avx2_fma: kernels::x86::awq_avx2(packed_, x, m, y); break;
    }
  }
  std::optional<int64_t> packed_bytes() const override { return packed_.bytes(); }
  std::string_view kernel_name() const override {
    switch (kernel_) {
      case AwqKernel::avx512_bf16: return "awq:avx512_bf16";
      case AwqKernel::avx512_fma: return "awq:avx512_fma";
      default: return "awq:avx2_fma";
    }
  }

 private:
  std::string prefix_;
  kernels::x86::AwqPacked packed_;
  AwqKernel kernel_;
};

}  // namespace

std::unique_ptr<Linear> make_awq_w4a16(const Layer& layer, const LinearOptions& options) {
  const int64_t n = layer.out_features, k = layer.in_features;
  const FormatTraits& record = formats::awq_w4a16_format();
  const FastPath path = fast_path(options);
  const bool avx512 = path == FastPath::avx512, avx2 = path == FastPath::avx2;
  if (full_precision(layer) || !(avx512 || avx2)) {
    std::vector<float> w(static_cast<size_t>(n * k));
    record.dequantize(layer, Basis::original, w.data());
    return make_dense_f32(layer, std::move(w), options, full_precision(layer) ? "dequant" : "awq_dequant");
  }
  // Packed straight from the checkpoint's tensors (no f32 temporaries): the
  // codes, and scale / zeros at their stored width. The format's validate
  // checked the shapes; the sizes again, as the reads rely on them.
  const TensorView& codes = layer.tensor("weight");
  const TensorView& scale = layer.tensor("weight_scale");
  const TensorView& zeros = layer.tensor("weight_zeros");
  const int64_t group = layer.param_int("group_size");
  if (group <= 0 || group % 2 != 0 || k % group != 0 ||
      static_cast<int64_t>(codes.data.size()) != n * k / 2 || scale.numel() != k / group * n ||
      zeros.numel() != scale.numel())
    fail("layer '{}': awq_w4a16 tensor sizes do not match N = {}, K = {}, group_size {}", layer.prefix, n, k, group);
  return std::make_unique<AwqLinear>(
      layer,
      kernels::x86::awq_pack(reinterpret_cast<const uint8_t*>(codes.data.data()),
                             kernels::FloatSource::of(scale.dtype, scale.data.data()),
                             kernels::FloatSource::of(zeros.dtype, zeros.data.data()), n, k, group,
                             bias_f32(layer, n)),
      !avx512 ? AwqKernel::avx2_fma
              : kernels::float_dot() == kernels::FloatDot::fma ? AwqKernel::avx512_fma : AwqKernel::avx512_bf16);
}

}  // namespace mixq::linear
