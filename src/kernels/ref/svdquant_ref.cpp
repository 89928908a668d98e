// SVDQuant W4A4 reference (svdquant_ref.hpp): plain loops, rows in parallel.
#include "kernels/ref/svdquant_ref.hpp"

#include "util/parallel.hpp"
#include "kernels/ref/svdquant_common.hpp"

namespace mixq::kernels {

void svdquant_ref(const SvdquantWeights& w, const float* x, int64_t m, float* y) {
  const int64_t n = w.n, k = w.k, groups = k / svdq::kGroup, half = k / 2;
  const int offset = w.act_unsigned ? 0 : 8;
  util::parallel_for(m, 1, [&](int64_t begin, int64_t end, int) {
    std::vector<float> tmp(k), scales(groups), lora(w.rank), low(n);
    std::vector<uint8_t> codes(k);
    std::vector<int32_t> sums(groups);
    for (int64_t row = begin; row < end; ++row) {
      const float* xr = x + row * k;
      svdq::quantize_act_row(xr, w.smooth.data(), k, w.act_unsigned, tmp.data(), codes.data(), scales.data(),
                             sums.data());
      svdq::lora_down_row(xr, w.proj_down.data(), k, w.rank, lora.data());
      svdq::lora_up_row(lora.data(), w.proj_up_t.data(), w.rank, n, low.data());
      for (int64_t col = 0; col < n; ++col) {
        const uint8_t* wr = w.weight.data() + col * half;
        float acc = 0.0f;
        for (int64_t g = 0; g < groups; ++g) {
          int32_t dot = 0;
          for (int64_t i = g * svdq::kGroup; i < (g + 1) * svdq::kGroup; ++i) {
            const int nib = (i & 1) ? wr[i >> 1] >> 4 : wr[i >> 1] & 0x0F;
            dot += (int(codes[i]) - offset) * (nib >= 8 ? nib - 16 : nib);
          }
          acc = acc + static_cast<float>(dot) * (scales[g] * w.wscale[g * n + col]);
        }
        float out = acc + low[col];
        if (!w.bias.empty()) out = out + w.bias[col];
        y[row * n + col] = out;
      }
    }
  });
}

}  // namespace mixq::kernels
