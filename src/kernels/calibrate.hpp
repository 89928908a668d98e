#pragma once
// In-run calibration of the machine's limits, so that benchmarks (bench/ and
// `mixq bench`) report fractions of what this machine delivered in the same
// run (the host may be shared, and memory-bound numbers drift between windows:
// BENCHMARKS.md). Each call sets the pool's thread count.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels/stream_prefetch.hpp"

namespace mixq::kernels {

struct Rate {
  double best = 0;    // highest repetition
  double median = 0;  // median repetition
};

// Throughput of the int8 dot the integer kernels run on (u8 x s8 -> s32,
// independent accumulators in inline asm, one loop per pool thread), GOPS:
// `vpdpbusd zmm` on AVX-512 (128 ops per instruction, 12 accumulators);
// `vpdpbusd ymm` on AVX-VNNI; elsewhere on AVX2 `vpmaddubsw` + `vpmaddwd` +
// `vpaddd` (64 ops per three instructions, oneDNN's AVX2 sequence); zeros
// below AVX2. `reps` repetitions of ~0.1 s (7) or ~25 ms (fewer than 7).
Rate int8_dot_peak_gops(int threads, int reps = 7);
// AMX `tdpbsud` throughput (16·16·64 MACs per instruction, 4 accumulator
// tiles) on CPUs with Isa::amx; zeros elsewhere. GOPS.
Rate int8_amx_peak_gops(int threads, int reps = 7);
// AMX `tdpbf16ps` throughput (2·16·16·32 FLOP per instruction), same shape; zeros without Isa::amx. GFLOPS.
Rate bf16_amx_peak_gflops(int threads, int reps = 7);
// `vdpbf16ps zmm` throughput (64 FLOP per instruction), same shape. GFLOPS.
Rate bf16_dot_peak_gflops(int threads, int reps = 7);
// `vfmadd231ps zmm` throughput (32 FLOP per instruction), same shape; on
// AVX2 machines `vfmadd231ps ymm` (16 FLOP). GFLOPS.
Rate fma_f32_peak_gflops(int threads, int reps = 7);
// Streaming read of a `bytes` buffer (>= 1 GiB for DRAM), split over the pool
// threads; each thread first-touches its own part and reads it as 4
// interleaved streams with AVX-512 (or, without it, AVX2) loads, each stream
// software-prefetched `prefetch_bytes` ahead: by default the distance the
// streaming (M = 1) kernels prefetch their weight panels (stream_prefetch.hpp),
// so the kernels are compared with a read done their way. GB/s (1e9 bytes per
// second); zeros without AVX2.
Rate read_bandwidth_gbs(int threads, size_t bytes = size_t(1) << 30, int reps = 7,
                        size_t prefetch_bytes = kStreamPrefetchBytes);

// A buffer read as read_bandwidth_gbs reads (it is built on this), a window
// at a time: for a read timed beside a kernel, in alternation with its calls,
// so that both see the same phase of a shared host's memory (bench/: the
// "of read beside" columns). Windows follow each other through the buffer,
// wrapping, so a buffer far larger than the last-level cache is read from
// DRAM. The pool's threads (their count when created) first-touch it.
class StreamingRead {
 public:
  explicit StreamingRead(size_t bytes = size_t(1) << 30);
  ~StreamingRead();
  StreamingRead(const StreamingRead&) = delete;
  StreamingRead& operator=(const StreamingRead&) = delete;
  // Reads the next `bytes` (at most the buffer; whole 4 KiB pages per
  // thread, at least one) split over the pool's threads, each its part as 4
  // interleaved streams prefetched `prefetch_bytes` ahead. Returns the bytes
  // read; zero without AVX2, or where the pool now has more threads than
  // the buffer has pages.
  size_t read_next(size_t bytes, size_t prefetch_bytes = kStreamPrefetchBytes);
  size_t size() const { return size_; }

 private:
  std::byte* base_ = nullptr;
  size_t size_ = 0;
  size_t cursor_ = 0;
  uint64_t sink_ = 0;
};
// read_bandwidth_gbs over an existing buffer: one untimed pass, then `reps`
// timed passes over the whole of it.
Rate read_bandwidth_gbs(StreamingRead& buffer, int reps = 7, size_t prefetch_bytes = kStreamPrefetchBytes);

// True when the CPU can run the AVX-512 VNNI/BF16 loops above (the int8 and
// bf16 peaks return zeros otherwise; the f32 FMA peak and the read fall back
// to AVX2).
bool has_avx512_vnni_bf16();

// ---- The float family's dot instruction on the avx512 path ----------------
// FP8 / MXFP8 / NVFP4 full-precision / AWQ W4A16 weights sit in bf16 (AWQ: 4-bit
// codes decoded to bf16), and their AVX-512 GEMM computes either with
// `vdpbf16ps` (2 k per lane per instruction) or with `vfmadd231ps` over the
// same operands widened to f32 in registers (1 k per instruction, exact
// products). Which is faster depends on the core, not the ISA (the two
// machines measured so far differ in opposite directions, see BENCHMARKS.md),
// so the choice is measured, never taken from the CPU model.
enum class FloatDot { bf16, fma };
std::string_view float_dot_name(FloatDot dot);  // "bf16" / "fma"
// "bf16" / "fma" -> the choice; anything else nullopt (automatic).
std::optional<FloatDot> parse_float_dot(std::string_view name);

struct FloatDotProbe {
  double bf16_gflops = 0;  // single thread, best of the probe's rounds
  double fma_gflops = 0;
};
// A short single-thread probe on the calling thread (~3 ms): interleaved
// rounds of the vdpbf16ps and vfmadd231ps zmm loops above, best round each.
// Zeros without AVX-512 BF16.
FloatDotProbe probe_float_dot();
// The automatic choice, probed once per process and cached: fma when its
// FLOP rate is higher than vdpbf16ps's (always fma without AVX-512 BF16).
FloatDot measured_float_dot();
// The choice in force: MIXQ_FLOAT_DOT=bf16|fma (read once) or set_float_dot()
// force it, otherwise measured_float_dot(). Layers read it when they are
// created (their kernel_name() says which one they run).
FloatDot float_dot();
// Forces a choice (nullopt: back to the environment / measured one). Meant
// for tests and benchmarks; not synchronized with layer creation elsewhere.
void set_float_dot(std::optional<FloatDot> dot);

}  // namespace mixq::kernels
