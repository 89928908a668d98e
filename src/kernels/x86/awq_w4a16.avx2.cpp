// The f32-FMA AWQ W4A16 core (awq_w4a16_impl.hpp) compiled for AVX2 + FMA.
#include "kernels/x86/awq_w4a16_impl.hpp"

namespace mixq::kernels::x86 {

void awq_avx2(const AwqPacked& w, const float* x, int64_t m, float* y) { awq_fma<Avx2>(w, x, m, y); }

}  // namespace mixq::kernels::x86
