// The public face of the in-run calibration (kernels/calibrate.hpp).
#include "mixq/machine.hpp"

#include "kernels/calibrate.hpp"

namespace mixq {

MachineLimits measure_machine(int threads, int reps, size_t read_bytes) {
  MachineLimits limits;
  limits.int8_gops = kernels::int8_vnni_peak_gops(threads, reps).median;
  limits.bf16_gflops = kernels::bf16_dot_peak_gflops(threads, reps).median;
  limits.f32_gflops = kernels::fma_f32_peak_gflops(threads, reps).median;
  limits.read_gbs = kernels::read_bandwidth_gbs(threads, read_bytes, reps).median;
  return limits;
}

}  // namespace mixq
