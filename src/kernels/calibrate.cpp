#include "kernels/calibrate.hpp"

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu.hpp"
#include "kernels/x86/amx_tiles.hpp"
#include "util/parallel.hpp"
#include "mixq/error.hpp"
#include "mixq/threads.hpp"

namespace mixq::kernels {
namespace {

using clock_type = std::chrono::steady_clock;

// 12 accumulators: g++ 12 keeps them in registers (the GCC 12 pitfall of
// accumulators spilled to the stack is about intrinsics; this is asm, so the loop is exactly what is written).
#define MIXQ_12(op)                                                                          \
  op " %%zmm12, %%zmm13, %%zmm0\n\t" op " %%zmm12, %%zmm13, %%zmm1\n\t" op                    \
     " %%zmm12, %%zmm13, %%zmm2\n\t" op " %%zmm12, %%zmm13, %%zmm3\n\t" op                    \
     " %%zmm12, %%zmm13, %%zmm4\n\t" op " %%zmm12, %%zmm13, %%zmm5\n\t" op                    \
     " %%zmm12, %%zmm13, %%zmm6\n\t" op " %%zmm12, %%zmm13, %%zmm7\n\t" op                    \
     " %%zmm12, %%zmm13, %%zmm8\n\t" op " %%zmm12, %%zmm13, %%zmm9\n\t" op                    \
     " %%zmm12, %%zmm13, %%zmm10\n\t" op " %%zmm12, %%zmm13, %%zmm11\n\t"

// zmm1..zmm11 = zmm0 (which the loop has zeroed): the 12 accumulators.
#define MIXQ_ZERO_ACCUMULATORS                                                                 \
  "vmovdqa64 %%zmm0, %%zmm1\n\tvmovdqa64 %%zmm0, %%zmm2\n\tvmovdqa64 %%zmm0, %%zmm3\n\t"          \
  "vmovdqa64 %%zmm0, %%zmm4\n\tvmovdqa64 %%zmm0, %%zmm5\n\tvmovdqa64 %%zmm0, %%zmm6\n\t"          \
  "vmovdqa64 %%zmm0, %%zmm7\n\tvmovdqa64 %%zmm0, %%zmm8\n\tvmovdqa64 %%zmm0, %%zmm9\n\t"          \
  "vmovdqa64 %%zmm0, %%zmm10\n\tvmovdqa64 %%zmm0, %%zmm11\n\t"

#define MIXQ_CLOBBER_ZMM                                                                     \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", \
      "xmm11", "xmm12", "xmm13"

__attribute__((target("avx512f,avx512vnni"))) void vnni_loop(long iters) {
  asm volatile(
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vpternlogd $0xff, %%zmm12, %%zmm12, %%zmm12\n\t"
      "vpternlogd $0xff, %%zmm13, %%zmm13, %%zmm13\n\t"
      MIXQ_ZERO_ACCUMULATORS
      "1:\n\t" MIXQ_12("vpdpbusd") "dec %0\n\tjnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(iters)
      :
      : MIXQ_CLOBBER_ZMM, "cc");
}

__attribute__((target("avx512f,avx512bf16"))) void bf16_loop(long iters) {
  asm volatile(
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vpxord %%zmm12, %%zmm12, %%zmm12\n\t"
      "vpxord %%zmm13, %%zmm13, %%zmm13\n\t"
      MIXQ_ZERO_ACCUMULATORS
      "1:\n\t" MIXQ_12("vdpbf16ps") "dec %0\n\tjnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(iters)
      :
      : MIXQ_CLOBBER_ZMM, "cc");
}

__attribute__((target("avx512f"))) void fma_loop(long iters) {
  asm volatile(
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vpxord %%zmm12, %%zmm12, %%zmm12\n\t"
      "vpxord %%zmm13, %%zmm13, %%zmm13\n\t"
      MIXQ_ZERO_ACCUMULATORS
      "1:\n\t" MIXQ_12("vfmadd231ps") "dec %0\n\tjnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(iters)
      :
      : MIXQ_CLOBBER_ZMM, "cc");
}

// The same 12-accumulator loop in ymm registers, for CPUs without AVX-512.
#define MIXQ_12Y(op)                                                                         \
  op " %%ymm12, %%ymm13, %%ymm0\n\t" op " %%ymm12, %%ymm13, %%ymm1\n\t" op                    \
     " %%ymm12, %%ymm13, %%ymm2\n\t" op " %%ymm12, %%ymm13, %%ymm3\n\t" op                    \
     " %%ymm12, %%ymm13, %%ymm4\n\t" op " %%ymm12, %%ymm13, %%ymm5\n\t" op                    \
     " %%ymm12, %%ymm13, %%ymm6\n\t" op " %%ymm12, %%ymm13, %%ymm7\n\t" op                    \
     " %%ymm12, %%ymm13, %%ymm8\n\t" op " %%ymm12, %%ymm13, %%ymm9\n\t" op                    \
     " %%ymm12, %%ymm13, %%ymm10\n\t" op " %%ymm12, %%ymm13, %%ymm11\n\t"

// ymm1..ymm11 = ymm0 (which the loop has zeroed): the 12 accumulators.
#define MIXQ_ZERO_ACCUMULATORS_Y                                                               \
  "vmovdqa %%ymm0, %%ymm1\n\tvmovdqa %%ymm0, %%ymm2\n\tvmovdqa %%ymm0, %%ymm3\n\t"                \
  "vmovdqa %%ymm0, %%ymm4\n\tvmovdqa %%ymm0, %%ymm5\n\tvmovdqa %%ymm0, %%ymm6\n\t"                \
  "vmovdqa %%ymm0, %%ymm7\n\tvmovdqa %%ymm0, %%ymm8\n\tvmovdqa %%ymm0, %%ymm9\n\t"                \
  "vmovdqa %%ymm0, %%ymm10\n\tvmovdqa %%ymm0, %%ymm11\n\t"

// The 12-accumulator ymm loop of `op` (ymm12, ymm13 the zeroed operands).
#define MIXQ_LOOP_12Y(op)                                                                       \
  asm volatile("vpxor %%ymm0, %%ymm0, %%ymm0\n\tvpxor %%ymm12, %%ymm12, %%ymm12\n\t"                \
               "vpxor %%ymm13, %%ymm13, %%ymm13\n\t" MIXQ_ZERO_ACCUMULATORS_Y                       \
               "1:\n\t" MIXQ_12Y(op) "dec %0\n\tjnz 1b\n\tvzeroupper\n\t"                         \
               : "+r"(iters)                                                                    \
               :                                                                                \
               : MIXQ_CLOBBER_ZMM, "cc")

__attribute__((target("avx2,fma"))) void fma_loop_ymm(long iters) {
  MIXQ_LOOP_12Y("vfmadd231ps");
}

// The int8 dot without VNNI, as oneDNN's AVX2 kernels and ours run it: u8·s8
// pairs summed to i16 (`vpmaddubsw`), widened to i32 pairs (`vpmaddwd` by
// ones), added to the accumulator (`vpaddd`): 32 MACs per three
// instructions. 6 accumulators (ymm6..11), each with its own temporary
// (ymm0..5); ymm14 holds the ones.
#define MIXQ_DOT_AVX2(t, acc)                                                                \
  "vpmaddubsw %%ymm12, %%ymm13, %%ymm" #t "\n\tvpmaddwd %%ymm14, %%ymm" #t ", %%ymm" #t         \
  "\n\tvpaddd %%ymm" #t ", %%ymm" #acc ", %%ymm" #acc "\n\t"

__attribute__((target("avx2"))) void int8_dot_loop_ymm(long iters) {
  asm volatile(
      "vpxor %%ymm6, %%ymm6, %%ymm6\n\tvmovdqa %%ymm6, %%ymm7\n\tvmovdqa %%ymm6, %%ymm8\n\t"
      "vmovdqa %%ymm6, %%ymm9\n\tvmovdqa %%ymm6, %%ymm10\n\tvmovdqa %%ymm6, %%ymm11\n\t"
      "vpcmpeqw %%ymm14, %%ymm14, %%ymm14\n\tvpsrlw $15, %%ymm14, %%ymm14\n\t"
      "vpxor %%ymm12, %%ymm12, %%ymm12\n\tvpxor %%ymm13, %%ymm13, %%ymm13\n\t"
      "1:\n\t" MIXQ_DOT_AVX2(0, 6) MIXQ_DOT_AVX2(1, 7) MIXQ_DOT_AVX2(2, 8) MIXQ_DOT_AVX2(3, 9)
          MIXQ_DOT_AVX2(4, 10) MIXQ_DOT_AVX2(5, 11) "dec %0\n\tjnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(iters)
      :
      : MIXQ_CLOBBER_ZMM, "xmm14", "cc");
}

#undef MIXQ_DOT_AVX2

// `vpdpbusd ymm` (AVX-VNNI, VEX-encoded; `%{`, `%}` are braces in asm): the
// same 12-accumulator loop.
__attribute__((target("avx2,avxvnni"))) void vnni_loop_ymm(long iters) {
  MIXQ_LOOP_12Y("%{vex%} vpdpbusd");
}

// Runs loop(iters) on every pool thread at once, `reps` times; returns the
// rate (ops_per_iter * iters * threads / seconds / 1e9) of each repetition.
Rate peak(int threads, int reps, void (*loop)(long), double ops_per_iter) {
  set_num_threads(threads);
  // ~0.1 s per repetition at 2 instructions per cycle (a quarter for short runs).
  const long kIters = reps >= 7 ? 20'000'000 : 5'000'000;
  std::vector<double> rates;
  loop(kIters / 10);  // warm the clock up
  for (int r = 0; r < reps; ++r) {
    auto t0 = clock_type::now();
    util::parallel_for(threads, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) loop(kIters);
    });
    double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    rates.push_back(ops_per_iter * kIters * threads / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return {rates.back(), rates[rates.size() / 2]};
}

// Sums 4 interleaved streams of one thread's part, reading them as the
// streaming (M = 1) kernels read their weight panels: each stream
// software-prefetched `ahead` bytes in front of its loads (0: hardware
// prefetchers only). 8 accumulators so the adds never limit the loads; 128
// bytes per stream and step (2 zmm or 4 ymm loads). The two widths are two
// functions because each needs its own target attribute.
#define MIXQ_PREFETCH_STREAMS(s, off, ahead)                                     \
  if (ahead > 0)                                                                 \
    for (int i = 0; i < 4; ++i) {                                                \
      _mm_prefetch(reinterpret_cast<const char*>(s[i] + off + ahead), _MM_HINT_T0);      \
      _mm_prefetch(reinterpret_cast<const char*>(s[i] + off + ahead + 64), _MM_HINT_T0); \
    }

__attribute__((target("avx512f"))) uint64_t read_part_zmm(const std::byte* p, size_t bytes, size_t ahead) {
  const size_t quarter = bytes / 4 / 256 * 256;
  const std::byte* s[4] = {p, p + quarter, p + 2 * quarter, p + 3 * quarter};
  __m512i a[8];
  for (__m512i& v : a) v = _mm512_setzero_si512();
  for (size_t off = 0; off < quarter; off += 128) {
    MIXQ_PREFETCH_STREAMS(s, off, ahead)
    for (int i = 0; i < 4; ++i)
      for (int l = 0; l < 2; ++l) a[2 * i + l] = _mm512_add_epi64(a[2 * i + l], _mm512_load_si512(s[i] + off + 64 * l));
  }
  __m512i t = _mm512_setzero_si512();
  for (const __m512i& v : a) t = _mm512_add_epi64(t, v);
  // Unsigned sum of the lanes (the intrinsic's reduce adds as signed int64,
  // which overflows on arbitrary data: undefined behaviour under UBSan).
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, t);
  uint64_t sum = 0;
  for (uint64_t v : lanes) sum += v;
  return sum;
}

__attribute__((target("avx2"))) uint64_t read_part_ymm(const std::byte* p, size_t bytes, size_t ahead) {
  const size_t quarter = bytes / 4 / 256 * 256;
  const std::byte* s[4] = {p, p + quarter, p + 2 * quarter, p + 3 * quarter};
  __m256i a[8];
  for (__m256i& v : a) v = _mm256_setzero_si256();
  for (size_t off = 0; off < quarter; off += 128) {
    MIXQ_PREFETCH_STREAMS(s, off, ahead)
    for (int i = 0; i < 4; ++i)
      for (int l = 0; l < 4; ++l) {
        __m256i& acc = a[(4 * i + l) % 8];
        acc = _mm256_add_epi64(acc, _mm256_load_si256(reinterpret_cast<const __m256i*>(s[i] + off + 32 * l)));
      }
  }
  __m256i t = _mm256_setzero_si256();
  for (const __m256i& v : a) t = _mm256_add_epi64(t, v);
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), t);
  uint64_t sum = 0;
  for (uint64_t v : lanes) sum += v;
  return sum;
}

#undef MIXQ_PREFETCH_STREAMS

}  // namespace

bool has_avx512_vnni_bf16() { return best_isa() >= Isa::avx512; }

Rate int8_dot_peak_gops(int threads, int reps) {
  if (has_avx512_vnni_bf16()) return peak(threads, reps, vnni_loop, 12 * 128.0);
  if (best_isa() < Isa::avx2) return {};
  if (cpu_has_avx_vnni()) return peak(threads, reps, vnni_loop_ymm, 12 * 64.0);
  return peak(threads, reps, int8_dot_loop_ymm, 6 * 64.0);
}

Rate int8_amx_peak_gops(int threads, int reps) {
  if (best_isa() < Isa::amx) return {};
  return peak(threads, reps, x86::amx::peak_loop, 12 * 2.0 * 16 * 16 * 64 / 64);
}

Rate bf16_amx_peak_gflops(int threads, int reps) {
  if (best_isa() < Isa::amx) return {};
  return peak(threads, reps, x86::amx::peak_loop_bf16, 12 * 2.0 * 16 * 16 * 32 / 64);
}

Rate bf16_dot_peak_gflops(int threads, int reps) {
  if (!has_avx512_vnni_bf16()) return {};
  return peak(threads, reps, bf16_loop, 12 * 64.0);
}

Rate fma_f32_peak_gflops(int threads, int reps) {
  if (best_isa() == Isa::avx2) return peak(threads, reps, fma_loop_ymm, 12 * 16.0);
  if (!has_avx512_vnni_bf16()) return {};
  return peak(threads, reps, fma_loop, 12 * 32.0);
}

std::string_view float_dot_name(FloatDot dot) { return dot == FloatDot::fma ? "fma" : "bf16"; }

std::optional<FloatDot> parse_float_dot(std::string_view name) {
  if (name == "bf16") return FloatDot::bf16;
  if (name == "fma") return FloatDot::fma;
  return std::nullopt;
}

FloatDotProbe probe_float_dot() {
  if (!has_avx512_vnni_bf16()) return {};
  // 12 instructions per iteration, 5 rounds; the iteration counts keep a
  // round well under a millisecond on the machines in BENCHMARKS.md.
  constexpr long kBf16Iters = 50'000, kFmaIters = 100'000;
  auto rate = [](void (*loop)(long), long iters, double flop_per_iter) {
    const auto t0 = clock_type::now();
    loop(iters);
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    return flop_per_iter * static_cast<double>(iters) / std::max(s, 1e-9) / 1e9;
  };
  fma_loop(kFmaIters);  // wakes the 512-bit units / frequency license up
  FloatDotProbe p;
  for (int round = 0; round < 5; ++round) {
    p.bf16_gflops = std::max(p.bf16_gflops, rate(bf16_loop, kBf16Iters, 12 * 64.0));
    p.fma_gflops = std::max(p.fma_gflops, rate(fma_loop, kFmaIters, 12 * 32.0));
  }
  return p;
}

FloatDot measured_float_dot() {
  static const FloatDot choice = [] {
    if (!has_avx512_vnni_bf16()) return FloatDot::fma;
    const FloatDotProbe p = probe_float_dot();
    return p.fma_gflops > p.bf16_gflops ? FloatDot::fma : FloatDot::bf16;
  }();
  return choice;
}

namespace {

// MIXQ_FLOAT_DOT as a FloatDot, -1 when unset or unknown (automatic).
int env_float_dot() {
  static const int env = [] {
    const char* v = std::getenv("MIXQ_FLOAT_DOT");
    const std::optional<FloatDot> dot = v ? parse_float_dot(v) : std::nullopt;
    return dot ? static_cast<int>(*dot) : -1;
  }();
  return env;
}

// -1: automatic; otherwise a FloatDot.
std::atomic<int>& forced_float_dot() {
  static std::atomic<int> forced{env_float_dot()};
  return forced;
}

}  // namespace

FloatDot float_dot() {
  const int forced = forced_float_dot().load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<FloatDot>(forced) : measured_float_dot();
}

void set_float_dot(std::optional<FloatDot> dot) {
  forced_float_dot().store(dot ? static_cast<int>(*dot) : env_float_dot());
}

StreamingRead::StreamingRead(size_t bytes) {
  const size_t threads = static_cast<size_t>(std::max(1, num_threads()));
  size_ = std::max<size_t>(bytes / threads / 4096, 1) * 4096 * threads;
  void* mem = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) fail("calibration: cannot map {} bytes for the bandwidth test", size_);
  madvise(mem, size_, MADV_HUGEPAGE);
  base_ = static_cast<std::byte*>(mem);
  // First touch by the thread that will read the part (same NUMA node / pages).
  const size_t part = size_ / threads;
  util::parallel_for(static_cast<int64_t>(threads), 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) std::memset(base_ + t * part, static_cast<int>(t + 1), part);
  });
}

StreamingRead::~StreamingRead() { munmap(base_, size_); }

size_t StreamingRead::read_next(size_t bytes, size_t prefetch_bytes) {
  const Isa isa = best_isa();
  if (isa < Isa::avx2) return 0;
  auto read = isa >= Isa::avx512 ? read_part_zmm : read_part_ymm;
  const size_t threads = static_cast<size_t>(std::max(1, num_threads()));
  const size_t part = std::max<size_t>(std::min(bytes, size_) / threads / 4096, 1) * 4096;
  if (part * threads > size_) return 0;  // more threads than when the buffer was made
  if (cursor_ + part * threads > size_) cursor_ = 0;
  std::atomic<uint64_t> sink{0};
  util::parallel_for(static_cast<int64_t>(threads), 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) sink.fetch_add(read(base_ + cursor_ + t * part, part, prefetch_bytes));
  });
  cursor_ += part * threads;
  sink_ += sink.load();  // kept, so the reads are not dropped
  return part * threads;
}

Rate read_bandwidth_gbs(StreamingRead& buffer, int reps, size_t prefetch_bytes) {
  if (best_isa() < Isa::avx2) return {};
  buffer.read_next(buffer.size(), prefetch_bytes);
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    auto t0 = clock_type::now();
    const size_t read = buffer.read_next(buffer.size(), prefetch_bytes);
    double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    rates.push_back(static_cast<double>(read) / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return {rates.back(), rates[rates.size() / 2]};
}

Rate read_bandwidth_gbs(int threads, size_t bytes, int reps, size_t prefetch_bytes) {
  if (best_isa() < Isa::avx2) return {};
  set_num_threads(threads);
  StreamingRead buffer(bytes);
  return read_bandwidth_gbs(buffer, reps, prefetch_bytes);
}

}  // namespace mixq::kernels
