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

void gemm_32x32(const int8_t* a, int64_t lda, const uint8_t* b0, const uint8_t* b1, int64_t chunks, int32_t* c,
                int64_t ldc) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const int8_t* a1 = a + 16 * lda;
  for (int64_t i = 0; i < chunks; ++i) {
    _tile_loadd(4, a + 64 * i, lda);
    _tile_loadd(5, a1 + 64 * i, lda);
    _tile_loadd(6, b0 + 1024 * i, 64);
    _tile_loadd(7, b1 + 1024 * i, 64);
    _tile_dpbsud(0, 4, 6);
    _tile_dpbsud(1, 4, 7);
    _tile_dpbsud(2, 5, 6);
    _tile_dpbsud(3, 5, 7);
  }
  const int64_t stride = ldc * static_cast<int64_t>(sizeof(int32_t));
  _tile_stored(0, c, stride);
  _tile_stored(1, c + 16, stride);
  _tile_stored(2, c + 16 * ldc, stride);
  _tile_stored(3, c + 16 * ldc + 16, stride);
}

void gemm_bf16_32x32(const void* a, int64_t lda, const void* b0, const void* b1, int64_t chunks, float* c,
                     int64_t ldc) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const auto* a0 = static_cast<const uint8_t*>(a);
  const uint8_t* a1 = a0 + 16 * lda;
  const auto* w0 = static_cast<const uint8_t*>(b0);
  const auto* w1 = static_cast<const uint8_t*>(b1);
  for (int64_t i = 0; i < chunks; ++i) {
    _tile_loadd(4, a0 + 64 * i, lda);
    _tile_loadd(5, a1 + 64 * i, lda);
    _tile_loadd(6, w0 + 1024 * i, 64);
    _tile_loadd(7, w1 + 1024 * i, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  const int64_t stride = ldc * static_cast<int64_t>(sizeof(float));
  _tile_stored(0, c, stride);
  _tile_stored(1, c + 16, stride);
  _tile_stored(2, c + 16 * ldc, stride);
  _tile_stored(3, c + 16 * ldc + 16, stride);
}

void peak_loop(long iters) {
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
  // as in gemm_32x32.
  for (long i = 0; i < iters / 64; ++i) {
    _tile_dpbsud(0, 4, 6);
    _tile_dpbsud(1, 4, 7);
    _tile_dpbsud(2, 5, 6);
    _tile_dpbsud(3, 5, 7);
    _tile_dpbsud(0, 4, 6);
    _tile_dpbsud(1, 4, 7);
    _tile_dpbsud(2, 5, 6);
    _tile_dpbsud(3, 5, 7);
    _tile_dpbsud(0, 4, 6);
    _tile_dpbsud(1, 4, 7);
    _tile_dpbsud(2, 5, 6);
    _tile_dpbsud(3, 5, 7);
  }
  release();
}

}  // namespace mixq::kernels::x86::amx
