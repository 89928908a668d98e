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

// How far ahead the activation quantizers prefetch the rows they read from
// memory (at many tokens the f32 activations outgrow the caches: 48 MiB at
// M = 4096, K = 3072). The hardware prefetchers alone left one such stream
// per thread at 10-16 GB/s on Zen 5; prefetched 1, 2 or 4 KiB ahead the
// NVFP4 quantizer ran 3x faster from DRAM, as fast as from cache
// (BENCHMARKS.md, "Issue 14 on Zen 5, seventh session").
inline constexpr size_t kActivationPrefetchBytes = 1024;

// The type of _mm_prefetch's hint (g++: enum _mm_hint; clang: int, its
// _MM_HINT_* being macros), for the tunings' kStreamPrefetchHint.
using PrefetchHint = decltype(_MM_HINT_T0);

}  // namespace mixq::kernels
