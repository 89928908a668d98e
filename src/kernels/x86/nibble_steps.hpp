#pragma once
// The octet rows of 4-bit weights that the int4 integer panels (int_pack.hpp)
// and SVDQuant's packed weight (svdquant_w4a4.hpp) share: per 64-byte row o
// (8 k's of 16 columns), byte 4c + t holds column c's code of k = 8o + t in
// its low nibble and of k = 8o + 4 + t in its high nibble, unsigned (w + 8).
// AMX B tiles want bytes instead (the int8 panel layout): row o becomes step
// 2o (the low nibbles) and step 2o + 1 (the high ones). Include only from
// *_impl.hpp files (the per-target translation units' anonymous namespace,
// simd_traits.hpp).
#include <cstdint>

#include "kernels/x86/simd_traits.hpp"

namespace mixq::kernels::x86 {
namespace {

// `octets` rows at src (any alignment) into 2·octets 64-byte steps at out
// (64-byte aligned). out may be the upper half of the same buffer as src when
// src sits at out + 64·octets or later: row o is read before steps 2o, 2o + 1
// (bytes 128·o ..) are written, and those end below row o + 1.
template <class V>
void unpack_nibble_rows(const uint8_t* src, int64_t octets, uint8_t* out) {
  using I = typename V::I;
  constexpr int L = V::kLanes, H = 16 / L;
  const I mask = V::set1b(0x0F);
  for (int64_t o = 0; o < octets; ++o) {
    I v[H];
    MIXQ_UNROLL
    for (int h = 0; h < H; ++h) v[h] = V::loadi(src + o * 64 + 4 * L * h);
    MIXQ_UNROLL
    for (int h = 0; h < H; ++h) {
      V::storei_a(out + 2 * o * 64 + 4 * L * h, V::andi(v[h], mask));
      V::storei_a(out + (2 * o + 1) * 64 + 4 * L * h, V::andi(V::template srli16<4>(v[h]), mask));
    }
  }
}

}  // namespace
}  // namespace mixq::kernels::x86
