#pragma once
// The SVDQuant W4A4 kernel (src/kernels/x86/svdquant_w4a4_impl.hpp) compiled
// with its target's register blocks (SvdquantTile) and with variations of
// them (bench/isa/svdquant_tunings.*.cpp, each compiled for its instruction
// set), for bench_svdquant_tunings. Every variant computes the same bits.
#include <cstdint>
#include <vector>

#include "kernels/x86/svdquant_w4a4.hpp"

namespace mixq::bench {

struct SvdquantTuning {
  const char* name;  // "default" first, then what differs from it; the library's build last
  void (*run)(const kernels::x86::SvdquantPacked& w, const float* x, int64_t m, float* y);
};

std::vector<SvdquantTuning> svdquant_tunings_avx2();  // vpmaddubsw group dots (no AVX-VNNI)
std::vector<SvdquantTuning> svdquant_tunings_avx512();

}  // namespace mixq::bench
