// The integer linear (int_gemm_impl.hpp) compiled for AVX-512 VNNI.
#include "kernels/x86/int_gemm_impl.hpp"

namespace mixq::kernels {

std::unique_ptr<IntKernel> make_int_kernel_avx512(const IntLayerDesc& desc) {
  return std::make_unique<x86::SimdIntKernel<x86::Avx512>>(desc, "avx512_vnni");
}

std::vector<int8_t> int_kernel_weights_avx512(const IntLayerDesc& desc) {
  check_int_desc(desc);
  const x86::SimdIntKernel<x86::Avx512> kernel(desc, "avx512");
  std::vector<int8_t> w(static_cast<size_t>(desc.n * desc.k));
  for (int64_t col = 0; col < desc.n; ++col) kernel.decoded_column(col, w.data() + col * desc.k);
  return w;
}

}  // namespace mixq::kernels
