// Regular Hadamard matrices and the fast radix-4 transform (docs/FORMATS.md §2.4).
//
// H4 = J - 2R (all ones minus twice the anti-diagonal), so H4[a][b] = -1 iff
// a + b == 3, and H_G[r][c] = G^(-1/2) · Π_d H4[r_d][c_d] over the base-4
// digits of r and c. The fast transform applies 0.5·H4 along one base-4 digit
// per stage (strides 1, 4, 16, ...); log4(G) stages of 0.5 give 1/sqrt(G).
#include <algorithm>
#include <cmath>

#include "util/parallel.hpp"
#include "mixq/error.hpp"
#include "numeric/hadamard.hpp"

namespace mixq {
namespace {

// The explicit matrix is only for tests and small reference paths: cap it so a
// hostile group size cannot ask for gigabytes (4096² floats = 64 MiB).
constexpr int64_t kMaxMatrixSize = 4096;

void check_group(int64_t g) {
  if (!is_power_of_4(g)) fail("Regular Hadamard size must be a power of 4 (4, 16, 64, 256, ...), got {}", g);
}

// One group of G values: log4(G) radix-4 butterfly stages. For a quadruple
// (a0, a1, a2, a3) at stride s, row d of 0.5·H4 gives 0.5·sum - a[3-d].
void rotate_group(float* v, int64_t g) {
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

}  // namespace

bool is_power_of_4(int64_t g) {
  if (g < 4) return false;
  if ((g & (g - 1)) != 0) return false;               // power of two
  return (g & 0x5555555555555555LL) != 0;             // the one bit sits at an even position
}

std::vector<float> hadamard_matrix(int64_t g) {
  check_group(g);
  if (g > kMaxMatrixSize) fail("Hadamard matrix of size {} is too large to build (limit {})", g, kMaxMatrixSize);
  const float norm = 1.0f / std::sqrt(static_cast<float>(g));  // exact: g is a power of 4
  std::vector<float> h(static_cast<size_t>(g * g));
  for (int64_t r = 0; r < g; ++r) {
    for (int64_t c = 0; c < g; ++c) {
      bool negative = false;
      for (int64_t rr = r, cc = c, span = 1; span < g; span *= 4, rr /= 4, cc /= 4)
        negative ^= ((rr % 4) + (cc % 4) == 3);
      h[static_cast<size_t>(r * g + c)] = negative ? -norm : norm;
    }
  }
  return h;
}

void hadamard_rotate_row(float* row, int64_t k, int64_t g) {
  for (int64_t off = 0; off < k; off += g) rotate_group(row + off, g);
}

void hadamard_rotate(float* x, int64_t rows, int64_t k, int64_t g) {
  check_group(g);
  if (rows < 0 || k < 0) fail("hadamard_rotate: negative shape [{}, {}]", rows, k);
  if (k % g != 0) fail("K = {} is not divisible by convrot_groupsize {}", k, g);
  if (rows == 0 || k == 0) return;
  // Parallel over rows; a row's groups are independent too but rows suffice.
  const int64_t grain = std::max<int64_t>(1, 16384 / k);
  util::parallel_for(rows, grain, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r)
      hadamard_rotate_row(x + r * k, k, g);
  });
}

}  // namespace mixq
