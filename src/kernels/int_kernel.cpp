// Picks the integer kernel for the active instruction set, once per Linear.
#include "kernels/cpu.hpp"
#include "kernels/int_kernel.hpp"

namespace mixq::kernels {

std::unique_ptr<IntKernel> make_int_kernel(const IntLayerDesc& desc, bool reference) {
  check_int_desc(desc);
  if (!reference) {
    const Isa isa = active_isa();
    std::unique_ptr<IntKernel> k;
    if (isa >= Isa::avx512) k = make_int_kernel_avx512(desc);
    if (!k && isa >= Isa::avx2) k = make_int_kernel_avx2(desc);
    if (k) return k;
  }
  return make_int_kernel_ref(desc);
}

}  // namespace mixq::kernels
