// cuBLAS "1-D block scaling factor" layout (docs/FORMATS.md §2.3).
//
// The logical scale matrix S[R][C] is padded to Rp = roundup(R, 128) rows and
// Cp = roundup(C, 4) columns and cut into 128×4 tiles of 512 bytes, ordered
// row-tile-major. Inside a tile, logical (row 32·d4 + d3, column d5) sits at
// byte 16·d3 + 4·d4 + d5: the 128 rows are read as 4 bands of 32, and the 4
// bands' values for one (d3, column) sit next to each other.
#include <algorithm>
#include <cstring>

#include "mixq/error.hpp"
#include "numeric/swizzle.hpp"

namespace mixq {
namespace {

int64_t roundup(int64_t a, int64_t m) { return (a + m - 1) / m * m; }

void check_dims(int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0) fail("block-scale matrix has a negative size [{}, {}]", rows, cols);
}

}  // namespace

int64_t swizzled_rows(int64_t rows) { return roundup(rows, 128); }
int64_t swizzled_cols(int64_t cols) { return roundup(cols, 4); }

int64_t swizzled_offset(int64_t r, int64_t c, int64_t cols) {
  const int64_t col_tiles = swizzled_cols(cols) / 4;
  const int64_t rb = r / 128, r128 = r % 128;
  const int64_t d4 = r128 / 32, d3 = r128 % 32;
  const int64_t cb = c / 4, d5 = c % 4;
  return ((rb * col_tiles + cb) * 32 + d3) * 16 + d4 * 4 + d5;
}

ScalePosition swizzled_position(int64_t offset, int64_t cols) {
  if (cols <= 0 || offset < 0) fail("swizzled_position: bad offset {} for {} columns", offset, cols);
  const int64_t col_tiles = swizzled_cols(cols) / 4;
  const int64_t t = offset / 512, w = offset % 512;
  const int64_t rb = t / col_tiles, cb = t % col_tiles;
  const int64_t d3 = w / 16, d4 = (w % 16) / 4, d5 = w % 4;
  return {128 * rb + 32 * d4 + d3, 4 * cb + d5};
}

namespace {

// Visits the swizzled buffer front to back, 4 bytes at a time: each is
// columns 4·cb .. 4·cb+3 (up to `cols`) of one row (up to `rows`), consecutive
// in both layouts. A scale per 32 weights is 1/32 of an MXFP8 checkpoint
// (0.4 GB for a FLUX-sized one): entry by entry through swizzled_offset it
// took seconds per load.
template <class Copy>
void for_each_run(int64_t rows, int64_t cols, Copy copy) {
  const int64_t col_tiles = swizzled_cols(cols) / 4;
  for (int64_t rb = 0; rb < swizzled_rows(rows) / 128; ++rb)
    for (int64_t cb = 0; cb < col_tiles; ++cb) {
      const int64_t tile = (rb * col_tiles + cb) * 512, c = 4 * cb, width = std::min<int64_t>(4, cols - c);
      for (int64_t d3 = 0; d3 < 32; ++d3)
        for (int64_t d4 = 0; d4 < 4; ++d4) {
          const int64_t r = 128 * rb + 32 * d4 + d3;
          if (r < rows) copy(tile + d3 * 16 + d4 * 4, r * cols + c, width);
        }
    }
}

// One run: a constant-size 4-byte move unless the last column tile is short.
inline void copy_run(uint8_t* to, const uint8_t* from, int64_t width) {
  if (width == 4) std::memcpy(to, from, 4);
  else std::memcpy(to, from, static_cast<size_t>(width));
}

}  // namespace

std::vector<uint8_t> swizzle_scales(const uint8_t* linear, int64_t rows, int64_t cols) {
  check_dims(rows, cols);
  std::vector<uint8_t> out(static_cast<size_t>(swizzled_rows(rows) * swizzled_cols(cols)), 0);
  for_each_run(rows, cols, [&](int64_t at, int64_t from, int64_t width) {
    copy_run(out.data() + at, linear + from, width);
  });
  return out;
}

void unswizzle_scales(const uint8_t* swizzled, int64_t rows, int64_t cols, uint8_t* out) {
  check_dims(rows, cols);
  for_each_run(rows, cols, [&](int64_t at, int64_t to, int64_t width) { copy_run(out + to, swizzled + at, width); });
}

std::vector<uint8_t> unswizzle_scales(const uint8_t* swizzled, int64_t rows, int64_t cols) {
  check_dims(rows, cols);
  std::vector<uint8_t> out(static_cast<size_t>(rows * cols));
  unswizzle_scales(swizzled, rows, cols, out.data());
  return out;
}

void swap_nibbles(uint8_t* bytes, size_t count) {
  for (size_t i = 0; i < count; ++i)
    bytes[i] = static_cast<uint8_t>((bytes[i] >> 4) | (bytes[i] << 4));
}

}  // namespace mixq
