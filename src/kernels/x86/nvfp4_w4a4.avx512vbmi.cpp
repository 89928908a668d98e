// NVFP4 W4A4 (nvfp4_w4a4_impl.hpp) compiled for AVX-512 VNNI + VBMI: called only
// where nvfp4_avx512_supported() (the avx512vbmi flags, CMakeLists.txt).
#include "kernels/x86/nvfp4_w4a4_impl.hpp"

namespace mixq::kernels::x86 {

void nvfp4_quantize_avx512(const float* x, int64_t m, int64_t k, int64_t blocks, const float* pqs,
                           std::optional<float> input_scale, Nvfp4Activation& out) {
  nvfp4_quantize<Avx512>(x, m, k, blocks, pqs, input_scale, out);
}

void nvfp4_gemm_avx512(const Nvfp4Activation& act, const Nvfp4Weights& w, const float* bias, float* y) {
  nvfp4_gemm<Avx512>(act, w, bias, y);
}

}  // namespace mixq::kernels::x86
