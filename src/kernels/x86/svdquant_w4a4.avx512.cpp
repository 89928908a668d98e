// The SVDQuant W4A4 linear (svdquant_w4a4_impl.hpp) compiled for AVX-512 VNNI.
#include "kernels/x86/no_fp_contract.hpp"
#include "kernels/x86/svdquant_w4a4_impl.hpp"

namespace mixq::kernels::x86 {

void svdquant_avx512(const SvdquantPacked& pk, const float* x, int64_t m, float* y, bool amx) {
  svdquant_forward<Avx512>(pk, x, m, y, amx);
}

}  // namespace mixq::kernels::x86
