#include "support/svdquant_layer.hpp"

#include <random>
#include <string>

#include "formats/svdquant.hpp"
#include "mixq/format.hpp"
#include "mixq/numeric.hpp"

namespace mixq::bench {

std::unique_ptr<SvdLayer> make_svdquant(int64_t k, int64_t n, int64_t rank) {
  using mixq::DType;
  auto out = std::make_unique<SvdLayer>();
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> code(-7, 7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::byte> w(static_cast<size_t>(n * k / 2));
  for (std::byte& b : w) b = static_cast<std::byte>((code(rng) & 15) | ((code(rng) & 15) << 4));
  auto floats = [&](int64_t count, float mean, float sd) {
    std::vector<float> v(static_cast<size_t>(count));
    for (float& f : v) f = mean + sd * normal(rng);
    return v;
  };
  auto add = [&](const char* role, Shape shape, const std::vector<float>& v) {
    out->tensors.push_back(OwnedTensor{role, DType::BF16, std::move(shape), from_f32(DType::BF16, v)});
  };
  out->tensors.push_back(OwnedTensor{"weight", DType::I8, {n, k / 2}, std::move(w)});
  add("weight_scale", {k / 64, n}, floats((k / 64) * n, 0.002f, 0.0005f));
  add("weight_proj_down", {k, rank}, floats(k * rank, 0.0f, 0.05f));
  add("weight_proj_up", {n, rank}, floats(n * rank, 0.0f, 0.05f));
  add("weight_smooth_factor", {k}, floats(k, 1.0f, 0.1f));
  add("bias", {n}, floats(n, 0.0f, 0.1f));
  Layer& layer = out->layer;
  const FormatTraits& format = formats::svdquant_w4a4_format();
  layer.prefix = "bench";
  layer.format = &format;
  layer.declared_format = std::string(format.name);
  layer.params = apply_defaults(format, nlohmann::json::object());
  for (const OwnedTensor& t : out->tensors) {
    TensorView view = t.view();
    view.name = "bench." + t.name;
    layer.tensors[t.name] = view;
  }
  validate_layer(layer);
  return out;
}

}  // namespace mixq::bench
