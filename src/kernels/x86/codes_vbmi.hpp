#pragma once
// asym_w4a8_int8 codes at few tokens with AVX-512 VBMI lookups
// (codes_vbmi.avx512vbmi.cpp; the loop is codes_micro_impl.hpp's), where
// kernels::cpu_has_avx512_vbmi().
#include <cstdint>

#include "kernels/x86/int_pack.hpp"

namespace mixq::kernels::x86 {

// codes_micro over 4 code panels `panel` and 1 .. kMr tokens `rows` of one
// activation panel `a`, each panel's codes fetched `ahead` bytes ahead (0:
// none); int32 sums to out[r][64], as the micro-kernel writes them.
void codes_micro_avx512vbmi(const PackedIntWeights& w, const int8_t* a, const int64_t* panel, int rows,
                            int64_t ahead, int32_t* out);

}  // namespace mixq::kernels::x86
