#pragma once
// In-run calibration of the machine's limits, so that benchmarks (bench/ and
// `mixq bench`) report fractions of what this machine delivered in the same
// run (the host is shared; memory-bound numbers drift by up to 1.6x between
// windows, spec/machine.md §0). Each call sets the pool's thread count.
#include <cstddef>

namespace mixq::kernels {

struct Rate {
  double best = 0;    // highest repetition
  double median = 0;  // median repetition
};

// `vpdpbusd zmm` throughput (u8 x s8 -> s32; 128 ops per instruction) with 12
// independent accumulators in inline asm, one loop per pool thread. GOPS.
// `reps` repetitions of ~0.1 s (7) or ~25 ms (fewer than 7).
Rate int8_vnni_peak_gops(int threads, int reps = 7);
// `vdpbf16ps zmm` throughput (64 FLOP per instruction), same shape. GFLOPS.
Rate bf16_dot_peak_gflops(int threads, int reps = 7);
// Streaming read of a `bytes` buffer (>= 1 GiB for DRAM), split over the pool
// threads; each thread first-touches its own part and reads it as 4
// interleaved streams with AVX-512 loads. GB/s (1e9 bytes per second).
Rate read_bandwidth_gbs(int threads, size_t bytes = size_t(1) << 30, int reps = 7);

// True when the CPU can run the AVX-512 VNNI/BF16 loops above (all three
// return zeros otherwise).
bool has_avx512_vnni_bf16();

}  // namespace mixq::kernels
