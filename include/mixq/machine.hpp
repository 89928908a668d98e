#pragma once
// This machine's limits, measured now (the host may be shared: compare only
// numbers taken in the same run). Used by `mixq bench` and the benchmarks to
// report speed as a fraction of what the machine delivered.
#include <cstddef>

namespace mixq {

struct MachineLimits {
  double int8_gops = 0;    // the int8 dot's throughput (u8 x s8; zmm, or ymm on AVX2: calibrate.hpp), GOPS
  double amx_int8_gops = 0;  // AMX `tdpbsud` throughput, GOPS (zero without AMX-INT8)
  double bf16_gflops = 0;  // `vdpbf16ps zmm` throughput, GFLOPS
  double f32_gflops = 0;   // `vfmadd231ps` throughput (zmm; ymm without AVX-512), GFLOPS
  double read_gbs = 0;     // streaming read of read_bytes, GB/s (median repetition)
  double read_best_gbs = 0;  // the same, fastest repetition
};

// Medians of `reps` short repetitions on `threads` pool threads (sets the
// pool's thread count), and the best read. The int8 and bf16 peaks are zero
// where the CPU lacks AVX-512 VNNI/BF16; the f32 peak and the read also run
// on AVX2 (the read prefetches as the streaming kernels do).
MachineLimits measure_machine(int threads, int reps = 3, size_t read_bytes = size_t(256) << 20);

}  // namespace mixq
