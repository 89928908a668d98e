// The float GEMM cores (float_gemm_impl.hpp) and activation preparation
// (float_prepare_impl.hpp)
// compiled for AVX-512 (BF16 for the `vdpbf16ps` core).
#include "kernels/x86/float_gemm_impl.hpp"
#include "kernels/x86/float_prepare_impl.hpp"

namespace mixq::kernels::x86 {

void float_gemm_avx512(const float* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha,
                       const float* bias, float* y) {
  gemm<Avx512, Core::fma>(a, lda, m, w, alpha, bias, y);
}

void float_gemm_avx512_bf16(const uint32_t* a, int64_t m, const FloatPanels& w, float alpha,
                            const float* bias, float* y) {
  gemm<Avx512, Core::dot>(a, w.pair_steps(), m, w, alpha, bias, y);
}

uint32_t pack_panel_steps_avx512(const FloatPanels& w, int64_t panel, int64_t s0, int64_t s1, uint8_t* dst) {
  return pack_panel_steps_zmm(w, panel, s0, s1, dst);
}

void prepare_f32_avx512(const float* x, int64_t m, int64_t k, int64_t cols, ActPrep prep, float inv_scale,
                        float* out) {
  prepare_f32<Avx512>(x, m, k, cols, prep, inv_scale, out);
}

void prepare_bf16_avx512(const float* x, int64_t m, int64_t k, int64_t steps, ActPrep prep, float inv_scale,
                         uint32_t* out, bool amx_tiles) {
  prepare_bf16(x, m, k, steps, prep, inv_scale, out, amx_tiles);
}

}  // namespace mixq::kernels::x86
