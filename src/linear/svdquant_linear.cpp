// svdquant_w4a4 linear (docs/FORMATS.md §3.8): the fp32 formula recommended there
// (kernels/ref/svdquant_ref.hpp) as the reference, the AVX-512 VNNI int4
// and AVX2 kernels (bit-identical to it) as the fast paths. The weights are converted
// once to the natural layout (tile-packed files are unpacked at creation); the
// fast paths keep the float tensors at their stored width (svdquant_w4a4.hpp).
// full_precision_matrix_mult runs a dense f32 linear over the effective weight.
#include <cstring>
#include <functional>

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

// The reference (no fast path) over f32 weights in the natural layout.
class SvdquantRefLinear final : public Linear {
 public:
  SvdquantRefLinear(const Layer& layer, kernels::SvdquantWeights w)
      : Linear(layer.in_features, layer.out_features), prefix_(layer.prefix), w_(std::move(w)) {}
  void forward(const float* x, int64_t m, float* y) const override {
    if (m < 0) fail("layer '{}': negative row count {}", prefix_, m);
    if (m == 0) return;
    kernels::svdquant_ref(w_, x, m, y);
  }
  std::string_view kernel_name() const override { return "svdquant:ref"; }
  std::optional<int64_t> packed_bytes() const override {
    return static_cast<int64_t>(w_.weight.size() +
                                4 * (w_.wscale.size() + w_.smooth.size() + w_.proj_down.size() +
                                     w_.proj_up_t.size() + w_.bias.size()));
  }

 private:
  std::string prefix_;
  kernels::SvdquantWeights w_;
};

// The fast kernels: the layer holds only the packed struct (weights, and the
// float tensors at their stored width).
class SvdquantLinear final : public Linear {
 public:
  SvdquantLinear(const Layer& layer, kernels::x86::SvdquantPacked packed, FastPath path)
      : Linear(layer.in_features, layer.out_features),
        prefix_(layer.prefix),
        packed_(std::move(packed)),
        path_(path),
        vnni_(path == FastPath::avx2 && kernels::cpu_has_avx_vnni()),
        amx_(path == FastPath::avx512 && kernels::active_isa() >= kernels::Isa::amx) {}
  void forward(const float* x, int64_t m, float* y) const override {
    if (m < 0) fail("layer '{}': negative row count {}", prefix_, m);
    if (m == 0) return;
    if (path_ == FastPath::avx512) kernels::x86::svdquant_avx512(packed_, x, m, y, amx_);
    else kernels::x86::svdquant_avx2(packed_, x, m, y, vnni_);
  }
  std::string_view kernel_name() const override {
    if (path_ == FastPath::avx512) return amx_ ? "svdquant:avx512_amx" : "svdquant:avx512_vnni";
    return vnni_ ? "svdquant:avx2_vnni" : "svdquant:avx2";
  }
  std::optional<int64_t> packed_bytes() const override { return packed_.bytes(); }

 private:
  std::string prefix_;
  kernels::x86::SvdquantPacked packed_;
  FastPath path_;
  bool vnni_;  // AVX2 path: vpdpbusd ymm (AVX-VNNI) rather than vpmaddubsw
  bool amx_;   // AVX-512 path with its many-row group dots on AMX tiles (Isa::amx)
};

// A float tensor's bytes at its stored width, in the natural layout: a
// tile-packed tensor goes through the format's own mapping (`to_natural`,
// over floats) applied to the element bit patterns, which f32 holds exactly
// for 16-bit elements and copies unchanged for f32 ones.
std::vector<std::byte> natural_bytes(const TensorView& t, const std::function<void(const float*, float*)>& to_natural) {
  const size_t count = static_cast<size_t>(t.numel()), width = dtype_size(t.dtype);
  std::vector<float> from(count), to(count);
  for (size_t i = 0; i < count; ++i) {
    if (width == 4) {
      std::memcpy(&from[i], t.data.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.data.data() + 2 * i, 2);
      from[i] = static_cast<float>(h);
    }
  }
  to_natural(from.data(), to.data());
  std::vector<std::byte> out(count * width);
  for (size_t i = 0; i < count; ++i) {
    if (width == 4) {
      std::memcpy(out.data() + 4 * i, &to[i], 4);
    } else {
      const auto h = static_cast<uint16_t>(to[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

kernels::FloatSource source(const TensorView& t, const std::vector<std::byte>& natural) {
  return kernels::FloatSource::of(t.dtype, natural.empty() ? static_cast<const void*>(t.data.data()) : natural.data());
}

// The fast path's packed struct straight from the checkpoint's tensors: the
// float tensors at their stored width, natural weights read in place (a
// tile-packed weight is put in natural order one 128-row tile at a time), no
// f32 or whole-weight temporaries (freed temporaries of a few MiB stay
// resident in the heap).
kernels::x86::SvdquantPacked pack_stored(const Layer& layer) {
  const int64_t n = layer.out_features, k = layer.in_features, half = k / 2;
  const TensorView& weight = layer.tensor("weight");
  const TensorView &scale = layer.tensor("weight_scale"), &up = layer.tensor("weight_proj_up");
  const TensorView &down = layer.tensor("weight_proj_down"), &smooth = layer.tensor("weight_smooth_factor");
  const int64_t rank = down.rank() == 2 ? down.shape[1] : -1;
  const bool tile = weight.rank() == 4;
  // The format's validate checked the shapes; the sizes again, as the reads below rely on them.
  if (rank < 0 || static_cast<int64_t>(weight.data.size()) != n * half || scale.numel() != k / 64 * n ||
      up.numel() != n * rank || down.numel() != k * rank || smooth.numel() != k)
    fail("layer '{}': svdquant tensor sizes do not match N = {}, K = {}, R = {}", layer.prefix, n, k, rank);
  std::vector<std::byte> scale_natural, up_natural;  // empty: the natural layout is the stored one
  std::vector<uint8_t> tile_rows;                      // one 128-row tile in natural order
  const auto* bytes = reinterpret_cast<const uint8_t*>(weight.data.data());
  if (tile) {
    scale_natural = natural_bytes(scale, [&](const float* from, float* to) {
      formats::svdquant_tile_scales(from, to, n, k, true);
    });
    up_natural = natural_bytes(up, [&](const float* from, float* to) {
      formats::svdquant_tile_proj_up(from, to, n, rank, true);
    });
    tile_rows.resize(static_cast<size_t>(128 * half));
  }
  kernels::x86::SvdquantSource src;
  src.n = n;
  src.k = k;
  src.rank = rank;
  src.act_unsigned = layer.param_bool("act_unsigned");
  src.weight_row = [&](int64_t col) -> const uint8_t* {
    if (!tile) return bytes + col * half;
    // Tile t holds rows 128t.. contiguously (128·K/2 bytes): un-tile it when its first row is asked for.
    if (col % 128 == 0) formats::svdquant_tile_weight(bytes + col * half, tile_rows.data(), 128, k, true);
    return tile_rows.data() + (col % 128) * half;
  };
  src.wscale = source(scale, scale_natural);
  src.proj_up = source(up, up_natural);
  src.proj_down = source(down, {});
  src.smooth = source(smooth, {});
  src.bias = bias_f32(layer, n);
  return kernels::x86::svdquant_pack(std::move(src));
}

}  // namespace

std::unique_ptr<Linear> make_svdquant_w4a4(const Layer& layer, const LinearOptions& options) {
  const int64_t n = layer.out_features, k = layer.in_features;
  if (full_precision(layer)) {
    std::vector<float> w(static_cast<size_t>(n * k));
    formats::svdquant_w4a4_format().dequantize(layer, Basis::original, w.data());
    return make_dense_f32(layer, std::move(w), options, "dequant");
  }
  const FastPath path = fast_path(options);
  if (path != FastPath::none) return std::make_unique<SvdquantLinear>(layer, pack_stored(layer), path);
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
  return std::make_unique<SvdquantRefLinear>(layer, std::move(w));
}

}  // namespace mixq::linear
