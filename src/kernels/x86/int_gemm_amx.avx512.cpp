// The integer linear (int_gemm_impl.hpp) with its large-M GEMM on AMX-INT8
// tiles (amx_tiles.hpp, Isa::amx); small M runs the AVX-512 VNNI loops, as
// the weights' memory traffic bounds it whatever the instruction.
#include "kernels/x86/int_gemm_impl.hpp"

namespace mixq::kernels {
namespace {

struct AmxTile : x86::IntTile<16> {
  static constexpr bool kAmx = true;
  static constexpr int64_t kSmallRows = x86::kGemvRows;  // tiles from 25 rows, as measured (not re-measured at 48)
};

}  // namespace

std::unique_ptr<IntKernel> make_int_kernel_amx(const IntLayerDesc& desc) {
  return std::make_unique<x86::SimdIntKernel<x86::Avx512, AmxTile>>(desc, "avx512_amx");
}

}  // namespace mixq::kernels
