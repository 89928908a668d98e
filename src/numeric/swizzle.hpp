#pragma once
// cuBLAS's 128x4-tiled block-scale layout used by NVFP4 and MXFP8 scales
// (docs/FORMATS.md §2.3), and the NVFP4 nibble swap (§2.2a).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mixq {

// Padded sizes: rows to a multiple of 128, columns to a multiple of 4.
int64_t swizzled_rows(int64_t rows);
int64_t swizzled_cols(int64_t cols);
// Byte offset of logical entry (r, c) in a swizzled buffer whose logical
// column count is `cols` (padded internally to a multiple of 4).
int64_t swizzled_offset(int64_t r, int64_t c, int64_t cols);
// The inverse: the logical (row, col) stored at byte `offset` (§2.3 "Inverse");
// positions in the padding come back with row >= rows or col >= cols.
struct ScalePosition {
  int64_t row = 0;
  int64_t col = 0;
};
ScalePosition swizzled_position(int64_t offset, int64_t cols);
// Linear [rows, cols] -> swizzled [swizzled_rows, swizzled_cols] bytes (pad = 0).
std::vector<uint8_t> swizzle_scales(const uint8_t* linear, int64_t rows, int64_t cols);
// Swizzled bytes -> linear [rows, cols] (into `out`, rows · cols bytes).
std::vector<uint8_t> unswizzle_scales(const uint8_t* swizzled, int64_t rows, int64_t cols);
void unswizzle_scales(const uint8_t* swizzled, int64_t rows, int64_t cols, uint8_t* out);
// Swaps the two nibbles of every byte (NVFP4 hi-first <-> lo-first packing).
void swap_nibbles(uint8_t* bytes, size_t count);

}  // namespace mixq
