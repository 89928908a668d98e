// The SVDQuant W4A4 linear (svdquant_w4a4_impl.hpp) compiled for AVX2, with
// AVX-VNNI group dots (`vpdpbusd ymm`) or without (vpmaddubsw products
// summed in i16 over the 64-group, one vpmaddwd at its end: an i16 lane
// sums 32 products of weight offsets 0..15 and activation codes -8..15, so
// |.| <= 32·15·15 = 7200 is exact and the int32 result is the same). The
// AVX-VNNI variant is compiled in svdquant_w4a4.avxvnni.cpp, so no AVX-VNNI
// code is in this file.
#include "kernels/x86/no_fp_contract.hpp"
#include "kernels/x86/svdquant_w4a4_impl.hpp"

namespace mixq::kernels::x86 {

void svdquant_avx2(const SvdquantPacked& pk, const float* x, int64_t m, float* y, bool avx_vnni) {
  if (avx_vnni) svdquant_avx_vnni(pk, x, m, y);
  else svdquant_forward<Avx2>(pk, x, m, y);
}

}  // namespace mixq::kernels::x86
