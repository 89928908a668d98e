// AMX-INT8 tile operations (amx_tiles.hpp).
#include "kernels/x86/amx_tiles.hpp"

#include <immintrin.h>

#include <cstring>

namespace mixq::kernels::x86::amx {
namespace {

// The 64-byte tile configuration (palette 1) of ldtilecfg.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

TileConfig make_config() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.bytes_per_row[t] = 64;
    cfg.rows[t] = 16;
  }
  return cfg;
}

}  // namespace

void configure() {
  static const TileConfig cfg = make_config();
  _tile_loadconfig(&cfg);
}

void release() { _tile_release(); }

namespace {

// C tiles 0-3 += A tiles 4-5 × B tiles 6-7 (C0 = A4·B6, C1 = A4·B7,
// C2 = A5·B6, C3 = A5·B7): int8 (tdpbsud) or bf16 pairs (tdpbf16ps). The
// calibration loops run these four back to back; block_32x32 runs the same
// four with its tile loads between them (the tile numbers must be literals,
// so it spells them out).
template <bool Bf16>
inline void products_2x2() {
  if constexpr (Bf16) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  } else {
    _tile_dpbsud(0, 4, 6);
    _tile_dpbsud(1, 4, 7);
    _tile_dpbsud(2, 5, 6);
    _tile_dpbsud(3, 5, 7);
  }
}

// The 2×2 tile block of gemm_32x32 / gemm_bf16_32x32: C tiles 0-3 over
// `chunks` chunks of A tiles 4-5 and B tiles 6-7 (1 KiB per chunk of b0,
// b1), stored at c with a row stride of ldc bytes. Loads and products
// alternate (A4 B6 C0, B7 C1, A5 C2 C3) so that each product waits only for
// its own operands; 1-6 % faster in L2 than four loads then four products
// (a scratch comparison, BENCHMARKS.md "Third AMX session").
template <bool Bf16>
void block_32x32(const ATiles& a, const uint8_t* b0, const uint8_t* b1, int64_t chunks, uint8_t* c, int64_t ldc,
                 L2Ahead ahead) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const auto* a0 = static_cast<const uint8_t*>(a.rows0);
  const auto* a1 = static_cast<const uint8_t*>(a.rows16);
  const auto* next = static_cast<const char*>(ahead.next);
  const int64_t lda = a.row_stride, step = a.chunk_stride, lines = ahead.lines_per_chunk;
  for (int64_t i = 0; i < chunks; ++i) {
    for (int64_t l = 0; l < lines; ++l) _mm_prefetch(next + 64 * (i * lines + l), _MM_HINT_T1);
    _tile_loadd(4, a0 + step * i, lda);
    _tile_loadd(6, b0 + 1024 * i, 64);
    if constexpr (Bf16) _tile_dpbf16ps(0, 4, 6);
    else _tile_dpbsud(0, 4, 6);
    _tile_loadd(7, b1 + 1024 * i, 64);
    if constexpr (Bf16) _tile_dpbf16ps(1, 4, 7);
    else _tile_dpbsud(1, 4, 7);
    _tile_loadd(5, a1 + step * i, lda);
    if constexpr (Bf16) {
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    } else {
      _tile_dpbsud(2, 5, 6);
      _tile_dpbsud(3, 5, 7);
    }
  }
  _tile_stored(0, c, ldc);
  _tile_stored(1, c + 64, ldc);
  _tile_stored(2, c + 16 * ldc, ldc);
  _tile_stored(3, c + 16 * ldc + 64, ldc);
}

}  // namespace

void gemm_32x32(const ATiles& a, const uint8_t* b0, const uint8_t* b1, int64_t chunks, int32_t* c, int64_t ldc,
                L2Ahead ahead) {
  block_32x32<false>(a, b0, b1, chunks, reinterpret_cast<uint8_t*>(c), ldc * static_cast<int64_t>(sizeof(int32_t)),
                     ahead);
}

void gemm_bf16_32x32(const ATiles& a, const void* b0, const void* b1, int64_t chunks, float* c, int64_t ldc,
                     L2Ahead ahead) {
  block_32x32<true>(a, static_cast<const uint8_t*>(b0), static_cast<const uint8_t*>(b1), chunks,
                    reinterpret_cast<uint8_t*>(c), ldc * static_cast<int64_t>(sizeof(float)), ahead);
}

namespace {

template <bool Bf16>
void peak(long iters) {
  configure();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  _tile_zero(7);
  // Four independent accumulators, each written every fourth instruction,
  // as in the 2×2 block; 12 products per iters / 64.
  for (long i = 0; i < 3 * (iters / 64); ++i) {
    products_2x2<Bf16>();  // zero tiles: no subnormal or NaN inputs
  }
  release();
}

}  // namespace

void peak_loop(long iters) { peak<false>(iters); }
void peak_loop_bf16(long iters) { peak<true>(iters); }

}  // namespace mixq::kernels::x86::amx
