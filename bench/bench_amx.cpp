// What bounds the AMX kernels (BENCHMARKS.md "Issue 14 on AMX"), on one
// thread, as rerunnable switches instead of loose experiments:
//  - tdpbsud time by the K of its tiles (16 / 32 / 64 bytes per A row): the
//    instruction takes the same time whatever K, which is why NVFP4's
//    16-element blocks stay on VNNI;
//  - the integer GEMM's 2×2 tile block (amx::gemm_32x32, the library's own)
//    with its operands in L1, in L2, with B from L3 (the loop order of
//    forward_large_amx: tiles of 4 panels, 32-row steps, panel pairs), with
//    the A rows 16 bytes off a cache line, A as token rows or in the
//    kernel's tile layout, and with the next tile asked into L2;
//  - against the `tdpbsud` peak on registers measured in the same run;
//  - the FP8 GEMM on AMX-BF16 (float_gemm_amx_bf16) by the activation block
//    each thread takes (kAmxBf16BlockBytes, 1 MiB), at M = 4096 K = N = 3072 on
//    all threads, block sizes in alternating rounds.
//
//   build/bench/bench/bench_amx [--quick]
#include <algorithm>
#include <bit>
#include <iterator>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu.hpp"
#include "kernels/x86/amx_tiles.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "support/amx_probe.hpp"
#include "support/calibrate.hpp"
#include "support/run_info.hpp"
#include "support/timing.hpp"
#include "mixq/threads.hpp"

namespace {

using namespace mixq;

// How block_gops lays out A and what it asks into L2.
enum class ALayout { rows, tiles, tiles_l2_ahead };

// GOPS of gemm_32x32 over an m × k activation block and n columns of int8
// panels, in forward_large_amx's loop order: A as token rows (`offset` bytes
// past a cache line) or in the kernel's tile layout (1 KiB per 16 tokens ×
// 64 k), optionally asking each next tile of 4 panels into L2 as the kernel
// does.
double block_gops(int64_t k, int64_t m, int64_t n, int offset, ALayout layout, double min_s, int reps) {
  namespace amx = kernels::x86::amx;
  std::mt19937 rng(1);
  std::vector<uint8_t> a_buf(static_cast<size_t>(m * k + 128)), b_buf(static_cast<size_t>(n * k + 64));
  for (uint8_t& v : a_buf) v = static_cast<uint8_t>(rng());
  for (uint8_t& v : b_buf) v = static_cast<uint8_t>(rng());
  auto align = [](uint8_t* p) { return p + (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64; };
  const uint8_t* a = align(a_buf.data()) + offset;
  const uint8_t* b = align(b_buf.data());
  alignas(64) int32_t c[32 * 64];
  const int64_t panel = 16 * k, chunks = k / 64, tiles = n / 64;
  const bool tiled = layout != ALayout::rows;
  const int64_t per_chunk = layout == ALayout::tiles_l2_ahead ? (4 * panel / 64 + m / 16 * chunks - 1) / (m / 16 * chunks) : 0;
  const bench::Timing t = bench::time_calls(
      [&] {
        amx::configure();
        for (int64_t q = 0; q < tiles; ++q) {
          const uint8_t* next = b + (q + 1 < tiles ? q + 1 : 0) * 4 * panel;
          int64_t call = 0;
          for (int64_t r = 0; r < m; r += 32)
            for (int64_t p = 4 * q; p < 4 * q + 4; p += 2, ++call) {
              const uint8_t* rows = a + r * k;
              const amx::ATiles at = tiled ? amx::ATiles{rows, rows + 16 * k, 64, 1024} : amx::ATiles{rows, rows + 16 * k, k, 64};
              const amx::L2Ahead ahead = per_chunk ? amx::L2Ahead{next + 64 * call * chunks * per_chunk, per_chunk} : amx::L2Ahead{};
              amx::gemm_32x32(at, b + p * panel, b + (p + 1) * panel, chunks, c + (p - 4 * q) * 16, 64, ahead);
            }
        }
        amx::release();
      },
      min_s, reps);
  return 2.0 * m * n * k / t.median / 1e9;
}

// ms per call of the FP8 E4M3 GEMM on AMX-BF16 (k-pair panels, bf16
// activations ready) for each activation block size, alternating.
void fp8_blocks(double min_s, int reps) {
  namespace x86 = kernels::x86;
  const int64_t m = 4096, k = 3072, n = 3072, lda = (k / 2 + 15) / 16 * 16;
  std::mt19937 rng(2);
  std::vector<uint8_t> codes(static_cast<size_t>(n * k));
  for (uint8_t& c : codes) c = static_cast<uint8_t>(rng() % 0x7F | (rng() & 0x80));  // never NaN
  const x86::FloatPanels w = x86::pack_panels(x86::PanelType::e4m3, codes.data(), k, n, k, true);
  std::vector<uint32_t> a_buf(static_cast<size_t>((m + 32) * lda + 16));
  uint32_t* a = a_buf.data() + (16 - reinterpret_cast<uintptr_t>(a_buf.data()) % 64 / 4) % 16;
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (int64_t i = 0; i < m * lda; ++i)  // two bf16 (the high halves of floats)
    a[i] = (std::bit_cast<uint32_t>(value(rng)) >> 16) | (std::bit_cast<uint32_t>(value(rng)) & 0xFFFF0000u);
  std::vector<float> y(static_cast<size_t>(m * n));
  const int64_t kib[] = {256, 512, 768, 1024, 1536, 2048, 3072};
  const std::vector<double> ms = bench::alternating_medians(std::size(kib), reps, min_s, [&](size_t v) {
    x86::float_gemm_amx_bf16(a, lda, m, w, 1.0f, nullptr, y.data(), kib[v] * 1024);
  });
  const size_t def = static_cast<size_t>(std::find(std::begin(kib), std::end(kib), x86::kAmxBf16BlockBytes / 1024) - kib);
  std::printf("\n%-44s %10s %10s\n", "FP8 GEMM on AMX-BF16, M=4096 K=N=3072", "ms", "speed");
  for (size_t v = 0; v < std::size(kib); ++v) {
    char label[64];
    std::snprintf(label, sizeof label, "activation block %lld KiB%s", static_cast<long long>(kib[v]),
                  kib[v] * 1024 == x86::kAmxBf16BlockBytes ? " (default)" : "");
    std::printf("%-44s %10.2f %10s\n", label, ms[v] * 1e3, bench::ratio(ms[def], ms[v]).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const double min_s = quick ? 0.05 : 0.15;
  const int reps = quick ? 3 : 7;
  if (kernels::best_isa() < kernels::Isa::amx) {
    std::printf("bench_amx: this CPU (or OS) offers no AMX-INT8 / AMX-BF16 tiles; nothing to measure\n");
    return 0;
  }
  std::printf("# %s\n# 1 thread\n", bench::run_header().c_str());
  const bench::Rate peak = bench::int8_amx_peak_gops(1);
  std::printf("tdpbsud peak on registers (calibration loop): %.0f GOPS (median %.0f)\n", peak.best, peak.median);
  const bench::Rate bf16 = bench::bf16_amx_peak_gflops(1);
  std::printf("tdpbf16ps peak on registers (calibration loop): %.0f GFLOPS (median %.0f)\n\n", bf16.best, bf16.median);
  set_num_threads(1);
  std::printf("%-44s %10s\n", "tdpbsud, A rows of K bytes", "ns / instr");
  for (int kb : {16, 32, 64}) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) best = std::min(best, bench::amx_tdpbsud_ns(kb, quick ? 2'000'000 : 10'000'000));
    std::printf("K = %-40d %10.2f   (%.0f GOPS)\n", kb, best, 2.0 * 16 * 16 * kb / best);
  }
  struct Case {
    const char* name;
    int64_t k, m, n;
    int offset;
    ALayout layout;
  };
  const Case cases[] = {
      {"operands in L1 (K=256, 32 rows, 64 cols)", 256, 32, 64, 0, ALayout::rows},
      {"operands in L2 (K=3072, 256 rows, 64 cols)", 3072, 256, 64, 0, ALayout::rows},
      {"same, A in the tile layout", 3072, 256, 64, 0, ALayout::tiles},
      {"B from L3 (K=3072, 256 rows, 3072 cols)", 3072, 256, 3072, 0, ALayout::rows},
      {"same, A rows 16 bytes off a line", 3072, 256, 3072, 16, ALayout::rows},
      {"same, A in the tile layout", 3072, 256, 3072, 0, ALayout::tiles},
      {"same, next tile asked into L2 (the kernel)", 3072, 256, 3072, 0, ALayout::tiles_l2_ahead},
  };
  std::printf("\n%-44s %10s %10s\n", "gemm_32x32 (2x2 tiles), forward_large_amx order", "GOPS", "of peak");
  for (const Case& c : cases) {
    const double g = block_gops(c.k, c.m, c.n, c.offset, c.layout, min_s, reps);
    std::printf("%-44s %10.0f %9.0f%%\n", c.name, g, 100.0 * g / peak.median);
  }
  set_num_threads(0);
  std::printf("\n# %d threads\n", num_threads());
  fp8_blocks(min_s, reps);
  return 0;
}
