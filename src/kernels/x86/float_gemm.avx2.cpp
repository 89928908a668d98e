// The float GEMM cores (float_gemm_impl.hpp) and activation preparation
// (float_prepare_impl.hpp)
// compiled for AVX2 + FMA + F16C: the FMA core only (AVX2 has no bf16 dot).
#include "kernels/x86/float_gemm_impl.hpp"
#include "kernels/x86/float_prepare_impl.hpp"

namespace mixq::kernels::x86 {

void float_gemm_avx2(const float* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha,
                     const float* bias, float* y) {
  gemm<Avx2, Core::fma>(a, lda, m, w, alpha, bias, y);
}

uint32_t pack_panel_steps_avx2(const FloatPanels& w, int64_t panel, int64_t s0, int64_t s1, uint8_t* dst) {
  return pack_panel_steps_ymm(w, panel, s0, s1, dst);
}

void prepare_f32_avx2(const float* x, int64_t m, int64_t k, int64_t cols, ActPrep prep, float inv_scale,
                      float* out) {
  prepare_f32<Avx2>(x, m, k, cols, prep, inv_scale, out);
}

}  // namespace mixq::kernels::x86
