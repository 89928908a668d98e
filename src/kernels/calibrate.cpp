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

// Sums 4 interleaved streams of one thread's part; 8 accumulators so the
// adds never limit the loads.
__attribute__((target("avx512f"))) uint64_t read_part(const std::byte* p, size_t bytes) {
  const size_t quarter = bytes / 4 / 256 * 256;
  const std::byte* s[4] = {p, p + quarter, p + 2 * quarter, p + 3 * quarter};
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
          a7 = a0;
  for (size_t off = 0; off < quarter; off += 128) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(s[0] + off));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(s[0] + off + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(s[1] + off));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(s[1] + off + 64));
    a4 = _mm512_add_epi64(a4, _mm512_load_si512(s[2] + off));
    a5 = _mm512_add_epi64(a5, _mm512_load_si512(s[2] + off + 64));
    a6 = _mm512_add_epi64(a6, _mm512_load_si512(s[3] + off));
    a7 = _mm512_add_epi64(a7, _mm512_load_si512(s[3] + off + 64));
  }
  __m512i t = _mm512_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)),
                               _mm512_add_epi64(_mm512_add_epi64(a4, a5), _mm512_add_epi64(a6, a7)));
  // Unsigned sum of the lanes (the intrinsic's reduce adds as signed int64,
  // which overflows on arbitrary data: undefined behaviour under UBSan).
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, t);
  uint64_t sum = 0;
  for (uint64_t v : lanes) sum += v;
  return sum;
}

}  // namespace

bool has_avx512_vnni_bf16() { return best_isa() == Isa::avx512; }

Rate int8_vnni_peak_gops(int threads, int reps) {
  if (!has_avx512_vnni_bf16()) return {};
  return peak(threads, reps, vnni_loop, 12 * 128.0);
}

Rate bf16_dot_peak_gflops(int threads, int reps) {
  if (!has_avx512_vnni_bf16()) return {};
  return peak(threads, reps, bf16_loop, 12 * 64.0);
}

Rate fma_f32_peak_gflops(int threads, int reps) {
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

Rate read_bandwidth_gbs(int threads, size_t bytes, int reps) {
  if (!has_avx512_vnni_bf16()) return {};
  set_num_threads(threads);
  const size_t part = bytes / threads / 4096 * 4096;
  const size_t total = part * threads;
  void* mem = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) fail("calibration: cannot map {} bytes for the bandwidth test", total);
  madvise(mem, total, MADV_HUGEPAGE);
  auto* base = static_cast<std::byte*>(mem);
  // First touch by the thread that will read the part (same NUMA node / pages).
  util::parallel_for(threads, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) std::memset(base + t * part, static_cast<int>(t + 1), part);
  });
  std::atomic<uint64_t> sink{0};
  auto pass = [&] {
    util::parallel_for(threads, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) sink.fetch_add(read_part(base + t * part, part));
    });
  };
  pass();
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    auto t0 = clock_type::now();
    pass();
    double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    rates.push_back(static_cast<double>(total) / s / 1e9);
  }
  munmap(mem, total);
  std::sort(rates.begin(), rates.end());
  return {rates.back(), rates[rates.size() / 2]};
}

}  // namespace mixq::kernels
