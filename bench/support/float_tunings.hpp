#pragma once
// The float GEMM's cores (src/kernels/x86/float_gemm_impl.hpp: FMA, and on
// AVX-512 the vdpbf16ps core) compiled with their target's tuning (FloatTile)
// and with variations of it (bench/isa/float_tunings.*.cpp, each compiled for
// its instruction set), for bench_float_tunings.
#include <cstdint>
#include <vector>

#include "kernels/x86/float_gemm.hpp"

namespace mixq::bench {

struct FloatTuning {
  const char* name;  // the packed default first, then what differs from it; the library's build last
  bool in_place;     // runs on the stored rows (float_panels_in_place), not on packed panels
  // a: f32 values (FMA core) or bf16 pairs (dot core), rows lda apart.
  void (*run)(const void* a, int64_t lda, int64_t m, const kernels::x86::FloatPanels& w, float alpha,
              const float* bias, float* y);
  bool dot = false;  // the vdpbf16ps core: bf16-pair activations (lda = pair steps), FP8 panels
};

std::vector<FloatTuning> float_tunings_avx2();
std::vector<FloatTuning> float_tunings_avx512();

}  // namespace mixq::bench
