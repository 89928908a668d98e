// The Hadamard row transform (hadamard_fast_impl.hpp) compiled for AVX2.
#include "kernels/hadamard_fast_impl.hpp"

namespace mixq::kernels {

void hadamard_row_avx2(const float* src, float* dst, int64_t k, int64_t g) {
  x86::hadamard_row<x86::Avx2>(src, dst, k, g);
}

}  // namespace mixq::kernels
