// The integer linear (int_gemm_impl.hpp) with AVX-VNNI `vpdpbusd ymm`, apart
// from int_gemm.avx2.cpp so that its -mavxvnni reaches no code that runs on
// AVX2 CPUs without it (CMakeLists.txt).
#include "kernels/x86/int_gemm_impl.hpp"

namespace mixq::kernels {

std::unique_ptr<IntKernel> make_int_kernel_avx_vnni(const IntLayerDesc& desc) {
  return std::make_unique<x86::SimdIntKernel<x86::Avx2Vnni>>(desc, "avx2_vnni");
}

}  // namespace mixq::kernels
