#pragma once
// Word-at-a-time regrouping of packed 4-bit codes for the VNNI panel layouts
// (int_pack.hpp, nvfp4_w4a4.hpp). Both layouts hold, per panel row, 8
// consecutive k in 4 bytes: byte t = code(k0 + t) in the low nibble and
// code(k0 + 4 + t) in the high nibble. Checkpoints store the same 8 codes as
// 4 bytes in k order, two per byte; which nibble comes first depends on the
// format (NVFP4: high first; ConvRot int4 / asym_w4a8 codes: low first).
#include <cstdint>
#include <cstring>

namespace mixq::kernels::x86 {

// `stored` = 4 checkpoint bytes (k0 .. k0+7, little-endian word); returns the
// 4 panel bytes as a little-endian word. With F the first and S the second
// nibble of each stored byte, codes are k0+0..7 = F0 S0 F1 S1 F2 S2 F3 S3, so
// panel byte 0 = F0 | F2<<4, 1 = S0 | S2<<4, 2 = F1 | F3<<4, 3 = S1 | S3<<4.
template <bool kHighFirst>
inline uint32_t regroup_nibble_quad(uint32_t stored) {
  const uint32_t lo = stored & 0x0F0F0F0Fu, hi = (stored >> 4) & 0x0F0F0F0Fu;
  const uint32_t f = kHighFirst ? hi : lo, s = kHighFirst ? lo : hi;
  // Byte 0 of a = F0 | F2<<4, byte 1 = F1 | F3<<4 (values < 16: no carry).
  const uint32_t a = f | ((f >> 16) << 4), b = s | ((s >> 16) << 4);
  return (a & 0xFFu) | ((b & 0xFFu) << 8) | ((a & 0xFF00u) << 8) | ((b & 0xFF00u) << 16);
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

}  // namespace mixq::kernels::x86
