// The public face of the in-run calibration (kernels/calibrate.hpp).
#include "mixq/machine.hpp"

#include "kernels/calibrate.hpp"

namespace mixq {

MachineLimits measure_machine(int threads, int reps, size_t read_bytes) {
  MachineLimits limits;
  limits.int8_gops = kernels::int8_dot_peak_gops(threads, reps).median;
  limits.amx_int8_gops = kernels::int8_amx_peak_gops(threads, reps).median;
  limits.bf16_gflops = kernels::bf16_dot_peak_gflops(threads, reps).median;
  limits.f32_gflops = kernels::fma_f32_peak_gflops(threads, reps).median;
  const kernels::Rate read = kernels::read_bandwidth_gbs(threads, read_bytes, reps);
  limits.read_gbs = read.median;
  limits.read_best_gbs = read.best;
  return limits;
}

}  // namespace mixq
