#pragma once
// The f32-FMA AWQ kernel (src/kernels/x86/awq_w4a16_impl.hpp) compiled with
// its target's tuning and with variations of it (bench/isa/awq_tunings.*.cpp,
// each compiled for its instruction set), for bench_awq_tunings; on AVX-512
// also the vdpbf16ps kernel (awq_bf16_impl.hpp) and variations of its tuning,
// on the same packed weights.
#include <cstdint>
#include <vector>

#include "kernels/x86/awq_w4a16.hpp"

namespace mixq::bench {

struct AwqTuning {
  const char* name;  // "default" first, then what differs from it; the library's build last
  void (*run)(const kernels::x86::AwqPacked& w, const float* x, int64_t m, float* y);
  bool bf16 = false;  // the vdpbf16ps core: x rounded to bf16, its own bits (its rows share them)
};

std::vector<AwqTuning> awq_tunings_avx2();
std::vector<AwqTuning> awq_tunings_avx512();

}  // namespace mixq::bench
