#pragma once
// This machine's limits, measured now (the host may be shared: compare only
// numbers taken in the same run). Used by `mixq bench` and the benchmarks to
// report speed as a fraction of what the machine delivered.
#include <cstddef>

namespace mixq {

struct MachineLimits {
  double int8_gops = 0;    // `vpdpbusd zmm` throughput (u8 x s8), GOPS
  double bf16_gflops = 0;  // `vdpbf16ps zmm` throughput, GFLOPS
  double f32_gflops = 0;   // `vfmadd231ps zmm` throughput, GFLOPS
  double read_gbs = 0;     // streaming read of read_bytes, GB/s
};

// Medians of `reps` short repetitions on `threads` pool threads (sets the
// pool's thread count). Zeros where the CPU lacks AVX-512 VNNI/BF16.
MachineLimits measure_machine(int threads, int reps = 3, size_t read_bytes = size_t(256) << 20);

}  // namespace mixq
