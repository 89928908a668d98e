#include "linear/int_linear_common.hpp"

#include <cmath>

#include "io/mapped_file.hpp"
#include "linear/kernel_path.hpp"
#include "util/parallel.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/numeric.hpp"

namespace mixq::linear {

std::vector<float> read_weight_scale(const Layer& layer, int64_t n) {
  const TensorView& t = layer.tensor("weight_scale");
  std::vector<float> s = to_f32(t);
  if (static_cast<int64_t>(s.size()) == 1 && n != 1) s.assign(static_cast<size_t>(n), s[0]);
  if (static_cast<int64_t>(s.size()) != n)
    fail("layer '{}': tensor '{}' has {} values, expected 1 or {} (out_features)", layer.prefix,
         t.name, s.size(), n);
  return s;
}

std::vector<float> read_bias(const Layer& layer, int64_t n) {
  const TensorView* t = layer.find("bias");
  if (!t) return {};
  std::vector<float> b = to_f32(*t);
  if (static_cast<int64_t>(b.size()) != n)
    fail("layer '{}': bias '{}' has {} values, expected {} (out_features)", layer.prefix, t->name,
         b.size(), n);
  return b;
}

bool wants_full_precision(const Layer& layer) {
  auto it = layer.params.find("full_precision_matrix_mult");
  return it != layer.params.end() && it->is_boolean() && it->get<bool>();
}

namespace {

class DequantizedLinear final : public Linear {
 public:
  DequantizedLinear(int64_t k, int64_t n, std::vector<float> w, std::vector<float> b)
      : Linear(k, n), w_(std::move(w)), b_(std::move(b)) {}
  void forward(const float* x, int64_t m, float* y) const override {
    const int64_t k = in_features(), n = out_features();
    util::parallel_for(m, 1, [&](int64_t r0, int64_t r1, int) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = 0; c < n; ++c) {
          float acc = 0.0f;
          for (int64_t i = 0; i < k; ++i) acc += x[r * k + i] * w_[static_cast<size_t>(c * k + i)];
          y[r * n + c] = b_.empty() ? acc : acc + b_[static_cast<size_t>(c)];
        }
    });
  }
  std::string_view kernel_name() const override { return "ref_f32"; }

 private:
  std::vector<float> w_, b_;
};

}  // namespace

std::unique_ptr<Linear> make_dequantized_linear(const Layer& layer) {
  const int64_t n = layer.out_features, k = layer.in_features;
  if (!layer.format || !layer.format->dequantize)
    fail("layer '{}': format cannot dequantize for full_precision_matrix_mult", layer.prefix);
  std::vector<float> w(static_cast<size_t>(n * k));
  layer.format->dequantize(layer, Basis::original, w.data());
  return std::make_unique<DequantizedLinear>(k, n, std::move(w), read_bias(layer, n));
}

int64_t convrot_group(const Layer& layer, bool always_rotated) {
  if (!always_rotated) {
    auto it = layer.params.find("convrot");
    if (it == layer.params.end() || !it->is_boolean() || !it->get<bool>()) return 0;
  }
  if (!layer.params.contains("convrot_groupsize")) return 256;  // docs/FORMATS.md §3.5 default
  return layer.param_int("convrot_groupsize");
}

IntLinear::IntLinear(int64_t k, int64_t n, std::unique_ptr<kernels::IntKernel> kernel,
                     std::shared_ptr<const MappedFile> storage)
    : Linear(k, n), kernel_(std::move(kernel)), storage_(std::move(storage)) {}

void IntLinear::forward(const float* x, int64_t m, float* y) const {
  kernel_->forward(x, m, y);
  if (storage_) storage_->check_intact();
}

std::unique_ptr<Linear> make_int_linear(const Layer& layer, const kernels::IntLayerDesc& desc,
                                        const LinearOptions& options) {
  try {
    std::unique_ptr<kernels::IntKernel> kernel = kernels::make_int_kernel(desc, kernel_isa(options));
    std::shared_ptr<const MappedFile> storage;
    if (kernel->reads_weight_in_place()) {
      storage = layer.tensor("weight").storage;
      if (!storage) fail("the kernel reads the weight in place, but it lies in no mapped file");
    }
    return std::make_unique<IntLinear>(desc.k, desc.n, std::move(kernel), std::move(storage));
  } catch (const Error& e) {
    fail("layer '{}': {}", layer.prefix, e.what());
  }
}

}  // namespace mixq::linear
