// NVFP4 W4A4 (nvfp4_w4a4_impl.hpp) compiled for AVX2. Block dots: four
// `vpdpbusd ymm` with AVX-VNNI; without it four vpmaddubsw (each i16 lane = two
// products, |.| <= 2·24·12 = 576) summed in i16 (|.| <= 2304, no saturation),
// then one vpmaddwd by ones into int32. Exact either way. The AVX-VNNI variant
// is compiled in nvfp4_w4a4.avxvnni.cpp, so no AVX-VNNI code is in this file.
#include "kernels/x86/nvfp4_w4a4_impl.hpp"

namespace mixq::kernels::x86 {

void nvfp4_quantize_avx2(const float* x, int64_t m, int64_t k, int64_t blocks, const float* pqs,
                         std::optional<float> input_scale, Nvfp4Activation& out) {
  nvfp4_quantize<Avx2>(x, m, k, blocks, pqs, input_scale, out);
}

void nvfp4_gemm_avx2(const Nvfp4Activation& act, const Nvfp4Weights& w, const float* bias, float* y, bool vnni) {
  if (vnni) nvfp4_gemm_avx_vnni(act, w, bias, y);
  else nvfp4_gemm<Avx2>(act, w, bias, y);
}

void nvfp4_decode_panel_in_place(const Nvfp4Weights& w, int64_t panel, int lanes, uint8_t* out) {
  if (lanes == 8) decode_panel_in_place<8>(w, panel, out);
  else if (lanes == 16) decode_panel_in_place<16>(w, panel, out);
  else fail("nvfp4_decode_panel_in_place: lanes must be 8 or 16, got {}", lanes);
}

}  // namespace mixq::kernels::x86
