// The AVX2 integer GEMM tunings (int_tunings_avx2.hpp) without AVX-VNNI; on a
// CPU with it, those of int_tunings.avxvnni.cpp.
#include "isa/int_tunings_avx2.hpp"
#include "kernels/cpu.hpp"

namespace mixq::bench {

std::vector<IntTuning> int_tunings_avx2() {
  if (kernels::cpu_has_avx_vnni()) return int_tunings_avx_vnni();
  return kernels::x86::avx2_int_tunings<kernels::x86::Avx2>();
}

}  // namespace mixq::bench
