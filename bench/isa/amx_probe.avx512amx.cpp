// AMX tile probes (support/amx_probe.hpp).
#include "support/amx_probe.hpp"

#include <immintrin.h>

#include <chrono>
#include <cstring>

namespace mixq::bench {

double amx_tdpbsud_ns(int k_bytes, int64_t rounds) {
  struct alignas(64) {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t bytes_per_row[16] = {};
    uint8_t rows[16] = {};
  } cfg;
  for (int t = 0; t < 8; ++t) {
    const bool a = t == 4 || t == 5, b = t == 6 || t == 7;
    cfg.bytes_per_row[t] = static_cast<uint16_t>(a ? k_bytes : 64);
    cfg.rows[t] = static_cast<uint8_t>(b ? k_bytes / 4 : 16);
  }
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  _tile_zero(7);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < rounds; ++i) {
    _tile_dpbsud(0, 4, 6);
    _tile_dpbsud(1, 4, 7);
    _tile_dpbsud(2, 5, 6);
    _tile_dpbsud(3, 5, 7);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  _tile_release();
  return s / (4.0 * static_cast<double>(rounds)) * 1e9;
}

}  // namespace mixq::bench
