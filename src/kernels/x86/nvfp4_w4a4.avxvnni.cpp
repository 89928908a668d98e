// NVFP4 W4A4 (nvfp4_w4a4_impl.hpp) block dots with AVX-VNNI `vpdpbusd ymm`,
// apart from nvfp4_w4a4.avx2.cpp so that its -mavxvnni reaches no code that
// runs on AVX2 CPUs without it (CMakeLists.txt).
#include "kernels/x86/nvfp4_w4a4_impl.hpp"

namespace mixq::kernels::x86 {

void nvfp4_gemm_avx_vnni(const Nvfp4Activation& act, const Nvfp4Weights& w, const float* bias, float* y) {
  nvfp4_gemm<Avx2Vnni>(act, w, bias, y);
}

}  // namespace mixq::kernels::x86
