#pragma once
// Small helpers shared by the *.avx2.cpp kernels (include only from those:
// they need the AVX2 target flags).
#include <immintrin.h>

namespace mixq::kernels::x86 {

// g++ 12 at -O2 does not fully unroll the constant MR / J loops of the micro
// kernels, which leaves the accumulator arrays in memory (seen in objdump);
// complete unrolling lets them live in ymm registers.
#define MIXQ_UNROLL _Pragma("GCC unroll 16")

// g++ contracts a vmulps feeding a vaddps into one FMA in C++ (-ffp-contract=fast
// is its default there, and these files have -mfma); the reference rounds the
// product first, so such a product passes through this empty asm barrier.
inline __m256 rounded(__m256 v) {
  __asm__("" : "+x"(v));
  return v;
}

}  // namespace mixq::kernels::x86
