#pragma once
// The NVFP4 W4A4 GEMM (src/kernels/x86/nvfp4_w4a4_impl.hpp) compiled with its
// target's register tiles (Nvfp4Tile) and with variations of them
// (bench/isa/nvfp4_tunings.*.cpp, each compiled for its instruction set),
// for bench_nvfp4_tunings. Every variant computes the same bits.
#include <cstdint>
#include <vector>

#include "kernels/x86/nvfp4_w4a4.hpp"

namespace mixq::bench {

struct Nvfp4Tuning {
  const char* name;  // "default" first, then what differs from it; the library's build last
  void (*run)(const kernels::x86::Nvfp4Activation& act, const kernels::x86::Nvfp4Weights& w, const float* bias,
              float* y);
};

std::vector<Nvfp4Tuning> nvfp4_tunings_avx2();        // vpmaddubsw block dots (no AVX-VNNI)
std::vector<Nvfp4Tuning> nvfp4_tunings_avx512vbmi();  // where nvfp4_avx512_supported()

}  // namespace mixq::bench
