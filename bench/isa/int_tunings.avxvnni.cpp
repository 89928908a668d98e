// The AVX2 integer GEMM tunings (int_tunings_avx2.hpp) with AVX-VNNI dots.
#include "isa/int_tunings_avx2.hpp"

namespace mixq::bench {

std::vector<IntTuning> int_tunings_avx_vnni() { return kernels::x86::avx2_int_tunings<kernels::x86::Avx2Vnni>(); }

}  // namespace mixq::bench
