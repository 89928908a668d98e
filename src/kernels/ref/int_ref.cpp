// Reference integer linear: the oracle for the fast kernels and `--kernel ref`.
// Plain loops in the order docs/FORMATS.md writes them (see int_kernel.hpp).
#include <cmath>
#include <cstring>
#include <vector>

#include "numeric/quantizers.hpp"
#include "kernels/int_kernel.hpp"
#include "util/parallel.hpp"
#include "mixq/error.hpp"
#include "numeric/hadamard.hpp"

namespace mixq::kernels {
namespace {

class RefIntKernel final : public IntKernel {
 public:
  explicit RefIntKernel(const IntLayerDesc& d)
      : d_(d),
        weight_(static_cast<size_t>(d.n * d.k)),
        scale_(d.weight_scale, d.weight_scale + d.n),
        bias_(d.bias ? std::vector<float>(d.bias, d.bias + d.n) : std::vector<float>{}) {
    for (int64_t r = 0; r < d.n; ++r)
      for (int64_t c = 0; c < d.k; ++c)
        weight_[static_cast<size_t>(r * d.k + c)] = static_cast<int8_t>(int_desc_weight(d, r, c));
    d_.weight = nullptr;
    d_.weight_nibbles = nullptr;
    d_.codes = nullptr;
    d_.weight_scale = nullptr;
    d_.bias = nullptr;
  }

  void forward(const float* x, int64_t m, float* y) const override {
    if (m <= 0) return;
    const int64_t k = d_.k, n = d_.n;
    std::vector<float> rotated(x, x + m * k);
    // The radix-4 transform (hadamard_rotate): what CUDA/HIP run and docs/FORMATS.md §2.4
    // recommends; it differs from a dense x·H matmul only in fp32 rounding.
    if (d_.group > 0) hadamard_rotate(rotated.data(), m, k, d_.group);
    std::vector<int8_t> q(static_cast<size_t>(m * k));
    std::vector<float> sx(static_cast<size_t>(m));
    if (d_.act == ActQuant::q8row)
      quant::q8row(rotated.data(), m, k, q.data(), sx.data());
    else
      quant::q4row(rotated.data(), m, k, q.data(), sx.data());
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        int32_t acc = 0;
        const int8_t* a = q.data() + r * k;
        const int8_t* w = weight_.data() + c * k;
        for (int64_t i = 0; i < k; ++i) acc += int32_t(a[i]) * int32_t(w[i]);
        const float facc = static_cast<float>(acc);
        float v;
        if (d_.epilogue == Epilogue::scale_product) {
          const float s = sx[r] * scale_[c];
          v = facc * s;
        } else {
          const float t = facc * sx[r];
          v = t * scale_[c];
        }
        if (!bias_.empty()) v = v + bias_[c];
        y[r * n + c] = v;
      }
    }
  }

  std::string_view name() const override { return "ref"; }
  int64_t held_bytes() const override {
    return static_cast<int64_t>(weight_.size() + 4 * (scale_.size() + bias_.size()));
  }

 private:
  IntLayerDesc d_;
  std::vector<int8_t> weight_;
  std::vector<float> scale_;
  std::vector<float> bias_;
};

}  // namespace

void check_int_desc(const IntLayerDesc& d) {
  if (d.n <= 0 || d.k <= 0) fail("integer linear: empty shape [{}, {}]", d.n, d.k);
  if (d.k > kMaxIntK)
    fail("integer linear: K = {} exceeds {} (the int32 accumulator would not be exact)", d.k,
         kMaxIntK);
  if (d.group != 0) {
    if (!is_power_of_4(d.group))
      fail("integer linear: convrot_groupsize must be a power of 4 >= 4, found {}", d.group);
    if (d.k % d.group != 0)
      fail("ConvRot group size {} does not divide input features K = {}", d.group, d.k);
  }
  if ((!d.weight && !d.weight_nibbles && !d.codes) || !d.weight_scale) fail("integer linear: weight or scale missing");
  if (d.weight_nibbles && (d.weight || d.codes || !d.int4_weights || d.k % 2 != 0))
    fail("integer linear: nibble weights need int4 weights, an even K and no int8 weight");
  if (d.codes) {
    const IntCodes& c = *d.codes;
    if (d.weight || d.int4_weights || !c.codes || (!c.s_rel_e4m3) == (!c.s_rel_f32))
      fail("integer linear: 4-bit codes need the codes, one s_rel and no other weight");
    if (d.k % 8 != 0 || c.group_size < 4 || c.group_size % 4 != 0 || d.k % c.group_size != 0)
      fail("integer linear: 4-bit codes need K % 8 == 0 and a group size that is a multiple of 4 dividing K "
           "(K = {}, group size {})",
           d.k, c.group_size);
  }
}

std::unique_ptr<IntKernel> make_int_kernel_ref(const IntLayerDesc& desc) {
  check_int_desc(desc);
  return std::make_unique<RefIntKernel>(desc);
}

}  // namespace mixq::kernels
