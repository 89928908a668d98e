#pragma once
// How far ahead (bytes) the kernels that stream their weights from DRAM
// (small M: each weight is used by one or a few rows) software-prefetch each
// weight stream, and how far ahead the read-bandwidth calibration
// (calibrate.hpp) prefetches its streams, so that "fraction of the read
// bandwidth" compares the kernel with a read done the same way. The calibration
// read at other distances: bench_decode --prefetch-sweep; the AWQ kernel's:
// bench_awq_tunings (BENCHMARKS.md).
#include <immintrin.h>

#include <cstddef>

namespace mixq::kernels {

inline constexpr size_t kStreamPrefetchBytes = 2048;

// The type of _mm_prefetch's hint (g++: enum _mm_hint; clang: int, its
// _MM_HINT_* being macros), for the tunings' kStreamPrefetchHint.
using PrefetchHint = decltype(_MM_HINT_T0);

}  // namespace mixq::kernels
