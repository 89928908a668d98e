#pragma once
// The integer GEMM (src/kernels/x86/int_gemm_impl.hpp) compiled with its
// target's tuning (IntTile) and with variations of it (bench/isa/
// int_tunings.*.cpp, each compiled for its instruction set), for
// bench_int_tunings.
#include <memory>
#include <vector>

#include "kernels/int_kernel.hpp"

namespace mixq::bench {

struct IntTuning {
  const char* name;  // "default" first, then what differs from it; the library's build last
  std::unique_ptr<kernels::IntKernel> (*make)(const kernels::IntLayerDesc& desc);
};

std::vector<IntTuning> int_tunings_avx2();      // AVX-VNNI ones where the CPU has it
std::vector<IntTuning> int_tunings_avx_vnni();
std::vector<IntTuning> int_tunings_avx512();
std::vector<IntTuning> int_tunings_amx();  // AMX machines: the AMX kernel's variants, VNNI's default

}  // namespace mixq::bench
