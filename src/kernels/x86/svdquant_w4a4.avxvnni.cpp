// The SVDQuant W4A4 linear (svdquant_w4a4_impl.hpp) with AVX-VNNI group dots
// (`vpdpbusd ymm`), apart from svdquant_w4a4.avx2.cpp so that its -mavxvnni
// reaches no code that runs on AVX2 CPUs without it (CMakeLists.txt).
#include "kernels/x86/no_fp_contract.hpp"
#include "kernels/x86/svdquant_w4a4_impl.hpp"

namespace mixq::kernels::x86 {

void svdquant_avx_vnni(const SvdquantPacked& pk, const float* x, int64_t m, float* y) {
  svdquant_forward<Avx2Vnni>(pk, x, m, y);
}

}  // namespace mixq::kernels::x86
