#pragma once
// Random svdquant_w4a4 layers for tests (the format has no quantizer): signed
// int4 codes in [-7, 7], positive group scales, a low-rank pair and a smooth
// factor, all BF16-exact so every stored dtype holds the same values.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "formats/svdquant.hpp"
#include "mixq/numeric.hpp"
#include "mixq/tensor.hpp"

namespace mixq::testing {

struct SvdParts {
  int64_t n = 0, k = 0, rank = 0;
  std::vector<uint8_t> weight;  // natural [N, K/2]
  std::vector<float> wscale, proj_down, proj_up, smooth, bias;
};

inline SvdParts random_svd(int64_t n, int64_t k, int64_t rank, uint64_t seed, bool bias = true) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> code(-7, 7);
  std::uniform_real_distribution<float> uni(0.5f, 2.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto bf = [](float v) { return round_to(DType::BF16, v); };
  SvdParts p;
  p.n = n, p.k = k, p.rank = rank;
  p.weight.resize(n * k / 2);
  for (auto& b : p.weight) b = static_cast<uint8_t>((code(rng) & 15) | ((code(rng) & 15) << 4));
  for (int64_t i = 0; i < (k / 64) * n; ++i) p.wscale.push_back(bf(0.002f * uni(rng)));
  for (int64_t i = 0; i < k * rank; ++i) p.proj_down.push_back(bf(0.05f * normal(rng)));
  for (int64_t i = 0; i < n * rank; ++i) p.proj_up.push_back(bf(0.05f * normal(rng)));
  for (int64_t i = 0; i < k; ++i) p.smooth.push_back(bf(uni(rng)));
  if (bias)
    for (int64_t i = 0; i < n; ++i) p.bias.push_back(bf(0.1f * normal(rng)));
  return p;
}

// Tensors named by role (or by the third-party spelling when `short_names`),
// natural or tile-packed (N % 128 == 0 required), float tensors in `dt`.
inline std::vector<OwnedTensor> svd_tensors(const SvdParts& p, bool tile, bool short_names = false,
                                            DType dt = DType::BF16) {
  std::vector<OwnedTensor> t;
  auto bytes = [](const std::vector<uint8_t>& v) {
    std::vector<std::byte> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<std::byte>(v[i]);
    return out;
  };
  auto fl = [&](std::string role, Shape shape, const std::vector<float>& v) {
    t.push_back(OwnedTensor{std::move(role), dt, std::move(shape), from_f32(dt, v)});
  };
  const std::string pre = short_names ? "" : "weight_";
  if (tile) {
    std::vector<uint8_t> packed(p.weight.size());
    formats::svdquant_tile_weight(p.weight.data(), packed.data(), p.n, p.k, false);
    t.push_back(OwnedTensor{"weight", DType::I8, {p.n / 128, p.k / 64, 32, 128}, bytes(packed)});
    std::vector<float> s(p.wscale.size()), u(p.proj_up.size());
    formats::svdquant_tile_scales(p.wscale.data(), s.data(), p.n, p.k, false);
    formats::svdquant_tile_proj_up(p.proj_up.data(), u.data(), p.n, p.rank, false);
    fl("weight_scale", {p.n / 128, p.k / 64, 128}, s);
    fl(pre + "proj_up", {p.n / 128, p.rank, 128}, u);
  } else {
    t.push_back(OwnedTensor{"weight", DType::I8, {p.n, p.k / 2}, bytes(p.weight)});
    fl("weight_scale", {p.k / 64, p.n}, p.wscale);
    fl(pre + "proj_up", {p.n, p.rank}, p.proj_up);
  }
  fl(pre + "proj_down", {p.k, p.rank}, p.proj_down);
  fl(pre + "smooth_factor", {p.k}, p.smooth);
  if (!p.bias.empty()) fl("bias", {p.n}, p.bias);
  return t;
}

}  // namespace mixq::testing
