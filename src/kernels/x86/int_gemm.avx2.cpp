// AVX2 integer linear: not written yet; the dispatcher falls back to the
// reference kernel on CPUs without AVX-512 VNNI.
#include "kernels/int_kernel.hpp"

namespace mixq::kernels {

std::unique_ptr<IntKernel> make_int_kernel_avx2(const IntLayerDesc&) { return nullptr; }

}  // namespace mixq::kernels
