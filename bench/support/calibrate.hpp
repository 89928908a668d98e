#pragma once
// The benchmarks use the library's calibration (src/kernels/calibrate.hpp),
// the same that `mixq bench` runs.
#include "kernels/calibrate.hpp"

namespace mixq::bench {
using kernels::bf16_amx_peak_gflops;
using kernels::bf16_dot_peak_gflops;
using kernels::has_avx512_vnni_bf16;
using kernels::int8_amx_peak_gops;
using kernels::int8_dot_peak_gops;
using kernels::Rate;
using kernels::read_bandwidth_gbs;
}  // namespace mixq::bench
