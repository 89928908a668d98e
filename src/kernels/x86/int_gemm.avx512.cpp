// The integer linear (int_gemm_impl.hpp) compiled for AVX-512 VNNI.
#include "kernels/x86/int_gemm_impl.hpp"

namespace mixq::kernels {

std::unique_ptr<IntKernel> make_int_kernel_avx512(const IntLayerDesc& desc) {
  return std::make_unique<x86::SimdIntKernel<x86::Avx512>>(desc, "avx512_vnni");
}

}  // namespace mixq::kernels
