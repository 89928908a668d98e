#pragma once
// The regular Hadamard matrix H_G used by ConvRot (docs/FORMATS.md §2.4):
// H_G = (H4 ⊗ ... ⊗ H4) / sqrt(G), symmetric and orthogonal, G a power of 4.
#include <cstdint>
#include <vector>

namespace mixq {

bool is_power_of_4(int64_t g);
// Row-major G×G matrix. Throws Error unless G is a power of 4 with G >= 4.
std::vector<float> hadamard_matrix(int64_t g);
// In place: every row of x [rows, k] is split into k/g groups and each group is
// multiplied by H_G (fast radix-4 transform). Throws Error when k % g != 0.
void hadamard_rotate(float* x, int64_t rows, int64_t k, int64_t g);
// One row of k values (k % g == 0, g a power of 4; not checked), serially: the
// reference stage order that the vectorised kernels reproduce bit for bit.
void hadamard_rotate_row(float* row, int64_t k, int64_t g);

}  // namespace mixq
