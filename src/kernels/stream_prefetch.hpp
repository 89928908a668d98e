#pragma once
// How far ahead (bytes) the kernels that stream their weights from DRAM
// (small M: each weight is used by one or a few rows) software-prefetch each
// weight stream, and how far ahead the read-bandwidth calibration
// (calibrate.hpp) prefetches its streams, so that "fraction of the read
// bandwidth" compares the kernel with a read done the same way. The calibration
// read at other distances: bench_decode --prefetch-sweep; the AWQ kernel's:
// bench_awq_tunings (BENCHMARKS.md).
#include <cstddef>

namespace mixq::kernels {

inline constexpr size_t kStreamPrefetchBytes = 2048;

}  // namespace mixq::kernels
