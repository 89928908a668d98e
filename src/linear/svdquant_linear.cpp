// svdquant_w4a4 linear (docs/FORMATS.md §3.8): the fp32 formula recommended there
// (kernels/ref/svdquant_ref.hpp) as the reference, the AVX-512 VNNI int4
// and AVX2 kernels (bit-identical to it) as the fast paths. The weights are converted
// once to the natural layout (tile-packed files are unpacked at creation).
// full_precision_matrix_mult runs a dense f32 linear over the effective weight.
#include "formats/svdquant.hpp"
#include "kernels/ref/svdquant_ref.hpp"
#include "kernels/x86/svdquant_w4a4.hpp"
#include "linear/runtime_table.hpp"
#include "linear/float_common.hpp"
#include "linear/w4a8_linear.hpp"
#include "kernels/cpu.hpp"
#include "mixq/error.hpp"

namespace mixq::linear {
namespace {

class SvdquantLinear final : public Linear {
 public:
  SvdquantLinear(const Layer& layer, kernels::SvdquantWeights w, FastPath path)
      : Linear(layer.in_features, layer.out_features),
        prefix_(layer.prefix),
        w_(std::move(w)),
        path_(path),
        vnni_(path == FastPath::avx2 && kernels::cpu_has_avx_vnni()) {
    if (path_ != FastPath::none) {
      packed_ = kernels::x86::svdquant_pack(w_);
      // The fast kernels read these from packed_ only: no second copy.
      for (auto* v : {&w_.wscale, &w_.proj_up_t}) std::vector<float>().swap(*v);
      std::vector<uint8_t>().swap(w_.weight);
    }
  }
  void forward(const float* x, int64_t m, float* y) const override {
    if (m < 0) fail("layer '{}': negative row count {}", prefix_, m);
    if (m == 0) return;
    switch (path_) {
      case FastPath::avx512: kernels::x86::svdquant_avx512(w_, packed_, x, m, y); break;
      case FastPath::avx2: kernels::x86::svdquant_avx2(w_, packed_, x, m, y, vnni_); break;
      case FastPath::none: kernels::svdquant_ref(w_, x, m, y); break;
    }
  }
  std::string_view kernel_name() const override {
    switch (path_) {
      case FastPath::avx512: return "svdquant:avx512_vnni";
      case FastPath::avx2: return vnni_ ? "svdquant:avx2_vnni" : "svdquant:avx2";
      default: return "svdquant:ref";
    }
  }

 private:
  std::string prefix_;
  kernels::SvdquantWeights w_;
  kernels::x86::SvdquantPacked packed_;
  FastPath path_;
  bool vnni_;  // AVX2 path: vpdpbusd ymm (AVX-VNNI) rather than vpmaddubsw
};

}  // namespace

std::unique_ptr<Linear> make_svdquant_w4a4(const Layer& layer, const LinearOptions& options) {
  const int64_t n = layer.out_features, k = layer.in_features;
  if (full_precision(layer)) {
    std::vector<float> w(static_cast<size_t>(n * k));
    formats::svdquant_w4a4_format().dequantize(layer, Basis::original, w.data());
    return make_dense_f32(layer, std::move(w), options, "dequant");
  }
  formats::SvdquantTensors t = formats::svdquant_tensors(layer);
  kernels::SvdquantWeights w;
  w.n = t.n;
  w.k = t.k;
  w.rank = t.rank;
  w.act_unsigned = t.act_unsigned;
  w.weight = std::move(t.weight);
  w.wscale = std::move(t.wscale);
  w.smooth = std::move(t.smooth);
  w.proj_down = std::move(t.proj_down);
  w.proj_up_t.resize(static_cast<size_t>(t.rank * t.n));
  for (int64_t r = 0; r < t.rank; ++r)
    for (int64_t c = 0; c < t.n; ++c) w.proj_up_t[r * t.n + c] = t.proj_up[c * t.rank + r];
  w.bias = bias_f32(layer, n);
  return std::make_unique<SvdquantLinear>(layer, std::move(w), fast_path(options));
}

}  // namespace mixq::linear
