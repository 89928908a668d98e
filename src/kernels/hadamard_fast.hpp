#pragma once
// Vectorised ConvRot rotation: the same radix-4 stages, in the same order and
// with the same fp32 operations as mixq::hadamard_rotate (src/numeric), so the
// results are bit-identical (tests check with zero tolerance).
#include <cstdint>

namespace mixq::kernels {

// One row of k values (k % g == 0, g a power of 4) from src to dst (which
// may be src), serially.
void hadamard_row_avx512(const float* src, float* dst, int64_t k, int64_t g);
void hadamard_row_avx2(const float* src, float* dst, int64_t k, int64_t g);

}  // namespace mixq::kernels
