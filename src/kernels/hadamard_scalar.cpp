// The scalar radix-4 transform, written exactly as src/numeric/hadamard.cpp
// does it: for a quadruple (a0..a3) at stride s, half = 0.5·((a0+a1)+(a2+a3))
// and out[d] = half - a[3-d] (row d of 0.5·H4).
#include "kernels/hadamard_fast.hpp"

namespace mixq::kernels {

void hadamard_row_scalar(float* row, int64_t k, int64_t g) {
  for (int64_t off = 0; off < k; off += g) {
    float* v = row + off;
    for (int64_t s = 1; s < g; s *= 4) {
      for (int64_t block = 0; block < g; block += 4 * s) {
        for (int64_t i = block; i < block + s; ++i) {
          const float a0 = v[i], a1 = v[i + s], a2 = v[i + 2 * s], a3 = v[i + 3 * s];
          const float half = 0.5f * ((a0 + a1) + (a2 + a3));
          v[i] = half - a3;
          v[i + s] = half - a2;
          v[i + 2 * s] = half - a1;
          v[i + 3 * s] = half - a0;
        }
      }
    }
  }
}

}  // namespace mixq::kernels
