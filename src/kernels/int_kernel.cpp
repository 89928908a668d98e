// Builds the integer kernel for the instruction set the caller chose
// (linear/kernel_path.hpp), falling back to the next lower one.
#include "kernels/cpu.hpp"
#include "kernels/int_kernel.hpp"

namespace mixq::kernels {

std::unique_ptr<IntKernel> make_int_kernel(const IntLayerDesc& desc, Isa isa) {
  check_int_desc(desc);
  {
    std::unique_ptr<IntKernel> k;
    if (isa >= Isa::amx) k = make_int_kernel_amx(desc);
    if (!k && isa >= Isa::avx512) k = make_int_kernel_avx512(desc);
    if (!k && isa >= Isa::avx2) k = make_int_kernel_avx2(desc);
    if (k) return k;
  }
  return make_int_kernel_ref(desc);
}

}  // namespace mixq::kernels
