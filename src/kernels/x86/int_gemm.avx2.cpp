// The integer linear (int_gemm_impl.hpp) compiled for AVX2. With AVX-VNNI the
// inner product is `vpdpbusd ymm`. Without it, u8·s8 pairs are summed with
// vpmaddubsw, which saturates at 16 bits: int4 weights (<= 15) are safe
// (15·128·2 < 2^15; the products of 4 octets of k, or 64 against int4
// activations, are even summed in i16: kI16Octets in int_micro_impl.hpp);
// int8 weights run as |w| against x·sign(w) (BiasedInt8 there). The
// AVX-VNNI variant is compiled in int_gemm.avxvnni.cpp, so no AVX-VNNI code
// is in this file.
#include "kernels/cpu.hpp"
#include "kernels/x86/int_gemm_impl.hpp"

namespace mixq::kernels {

std::unique_ptr<IntKernel> make_int_kernel_avx2(const IntLayerDesc& desc) {
  if (cpu_has_avx_vnni()) return make_int_kernel_avx_vnni(desc);
  return std::make_unique<x86::SimdIntKernel<x86::Avx2>>(desc, "avx2");
}

// Test hook: the plain-AVX2 (no VNNI) variant, to cover it on VNNI machines.
std::unique_ptr<IntKernel> make_int_kernel_avx2_novnni(const IntLayerDesc& desc) {
  return std::make_unique<x86::SimdIntKernel<x86::Avx2>>(desc, "avx2");
}

std::vector<int8_t> int_kernel_weights_avx2(const IntLayerDesc& desc) {
  check_int_desc(desc);
  const x86::SimdIntKernel<x86::Avx2> kernel(desc, "avx2");
  std::vector<int8_t> w(static_cast<size_t>(desc.n * desc.k));
  for (int64_t col = 0; col < desc.n; ++col) kernel.decoded_column(col, w.data() + col * desc.k);
  return w;
}

}  // namespace mixq::kernels
