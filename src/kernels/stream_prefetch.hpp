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

// How far ahead the activation preparations at many tokens prefetch the f32
// rows they read from memory (48 MiB at M = 4096, K = 3072: past the caches).
// In the layer, both threads streaming x while the GEMM between calls evicts
// it, the ConvRot layers' rotate + quantize phase took ~20 % less with it and
// INT8's quantize ~6 % less, the NVFP4 quantizer ~8 % and the FP8 / MXFP8
// preparation 4-5 % (bench_phases; a one-thread loop over the same rows had
// measured no gain for the rotation). BENCHMARKS.md, "Issue 14 on Zen 5,
// seventh session".
inline constexpr size_t kActivationPrefetchBytes = 2048;
// Asks for the line kActivationPrefetchBytes past the activations at p.
inline void prefetch_activations_ahead(const void* p) {
  _mm_prefetch(static_cast<const char*>(p) + kActivationPrefetchBytes, _MM_HINT_T0);
}

// The type of _mm_prefetch's hint (g++: enum _mm_hint; clang: int, its
// _MM_HINT_* being macros), for the tunings' kStreamPrefetchHint.
using PrefetchHint = decltype(_MM_HINT_T0);

}  // namespace mixq::kernels
