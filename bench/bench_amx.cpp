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
//  - the bf16 block of the FP8 GEMM (gemm_bf16_32x32) with A as token rows
//    or in the tile layout;
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
#include "support/inputs.hpp"
#include "support/run_info.hpp"
#include "support/timing.hpp"
#include "mixq/threads.hpp"

namespace {

using namespace mixq;

// How an integer block case lays out A and what it asks into L2.
enum class ALayout { rows, tiles, tiles_l2_ahead };

struct IntBlockCase {
  const char* name;
  int64_t k, m, n;
  int offset;  // A rows this many bytes past a cache line
  ALayout layout;
};

// One call of gemm_32x32 over an m × k activation block and n columns of
// int8 panels, in forward_large_amx's loop order: A as token rows or in the
// kernel's tile layout (1 KiB per 16 tokens × 64 k), optionally asking each
// next tile of 4 panels into L2 as the kernel does. a, b: 64-byte aligned
// buffers large enough for every case.
void int_block(const IntBlockCase& cs, const uint8_t* a_base, const uint8_t* b) {
  namespace amx = kernels::x86::amx;
  const int64_t k = cs.k, m = cs.m, panel = 16 * k, chunks = k / 64, tiles = cs.n / 64;
  const uint8_t* a = a_base + cs.offset;
  const bool tiled = cs.layout != ALayout::rows, ahead = cs.layout == ALayout::tiles_l2_ahead;
  alignas(64) int32_t c[32 * 64];
  amx::configure();
  for (int64_t q = 0; q < tiles; ++q) {
    const uint8_t* next = b + (q + 1 < tiles ? q + 1 : 0) * 4 * panel;
    int64_t call = 0;
    for (int64_t r = 0; r < m; r += 32)
      for (int64_t p = 4 * q; p < 4 * q + 4; p += 2, ++call) {
        const uint8_t* rows = a + r * k;
        amx::gemm_32x32(tiled ? amx::ATiles::tile_layout(rows, k) : amx::ATiles::token_rows(rows, k), b + p * panel,
                        b + (p + 1) * panel, chunks, c + (p - 4 * q) * 16, 64,
                        ahead ? amx::L2Ahead::share(next, 4 * panel, m / 16, chunks, call) : amx::L2Ahead{});
      }
  }
  amx::release();
}

// One call of gemm_bf16_32x32 in float_gemm_amx_bf16's loop order: a block
// of 160 token rows (~1 MiB of bf16 pairs at K = 3072) against two decoded
// panels (192 KiB), both in L2, for 8 panel pairs; A as token rows or in the
// tile layout.
constexpr int64_t kBf16K = 3072, kBf16Rows = 160;
void bf16_block(bool tiled, const uint8_t* a, const uint8_t* b) {
  namespace amx = kernels::x86::amx;
  const int64_t row_bytes = 2 * kBf16K, chunks = kBf16K / 32;
  alignas(64) float c[32 * 32];
  amx::configure();
  for (int pair = 0; pair < 8; ++pair)
    for (int64_t r = 0; r < kBf16Rows; r += 32) {
      const uint8_t* rows = a + r * row_bytes;
      amx::gemm_bf16_32x32(tiled ? amx::ATiles::tile_layout(rows, row_bytes) : amx::ATiles::token_rows(rows, row_bytes),
                           b, b + 16 * row_bytes, chunks, c, 32);
    }
  amx::release();
}

// ms per call of the FP8 E4M3 GEMM on AMX-BF16 (packed panels, bf16
// activations ready) for each activation block size, alternating.
void fp8_blocks(double min_s, int reps) {
  namespace x86 = kernels::x86;
  const int64_t m = 4096, k = 3072, n = 3072, lda = (k / 2 + 15) / 16 * 16;
  std::mt19937 rng(2);
  std::vector<uint8_t> codes(static_cast<size_t>(n * k));
  bench::random_e4m3_codes(rng, codes);  // never NaN
  const x86::FloatPanels w = x86::pack_panels(x86::PanelType::e4m3, codes.data(), k, n, k);
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
  // The block cases in alternating rounds (this VM's AMX throughput comes
  // and goes in bursts: a case measured alone can land in a slow one).
  const IntBlockCase cases[] = {
      {"operands in L1 (K=256, 32 rows, 64 cols)", 256, 32, 64, 0, ALayout::rows},
      {"operands in L2 (K=3072, 256 rows, 64 cols)", 3072, 256, 64, 0, ALayout::rows},
      {"same, A in the tile layout", 3072, 256, 64, 0, ALayout::tiles},
      {"B from L3 (K=3072, 256 rows, 3072 cols)", 3072, 256, 3072, 0, ALayout::rows},
      {"same, A rows 16 bytes off a line", 3072, 256, 3072, 16, ALayout::rows},
      {"same, A in the tile layout", 3072, 256, 3072, 0, ALayout::tiles},
      {"same, next tile asked into L2 (the kernel)", 3072, 256, 3072, 0, ALayout::tiles_l2_ahead},
  };
  std::mt19937 rng(1);
  std::vector<uint8_t> a_buf(256 * 3072 + 128), b_buf(3072 * 3072 + 64);
  for (uint8_t& v : a_buf) v = static_cast<uint8_t>(rng());
  for (uint8_t& v : b_buf) v = static_cast<uint8_t>(rng());
  auto align = [](uint8_t* p) { return p + (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64; };
  const std::vector<double> int_s = bench::alternating_medians(
      std::size(cases), reps, min_s, [&](size_t v) { int_block(cases[v], align(a_buf.data()), align(b_buf.data())); });
  std::printf("\n%-44s %10s %10s\n", "gemm_32x32 (2x2 tiles), forward_large_amx order", "GOPS", "of peak");
  for (size_t v = 0; v < std::size(cases); ++v) {
    const IntBlockCase& c = cases[v];
    const double g = 2.0 * c.m * c.n * c.k / int_s[v] / 1e9;
    std::printf("%-44s %10.0f %9.0f%%\n", c.name, g, 100.0 * g / peak.median);
  }
  // bf16 ones (1.0) in both operands: finite products, no subnormals.
  std::vector<uint16_t> fa(kBf16Rows * kBf16K + 32, 0x3F80), fb(32 * kBf16K + 32, 0x3F80);
  const std::vector<double> bf16_s = bench::alternating_medians(2, reps, min_s, [&](size_t v) {
    bf16_block(v == 1, align(reinterpret_cast<uint8_t*>(fa.data())), align(reinterpret_cast<uint8_t*>(fb.data())));
  });
  std::printf("\n%-44s %10s %10s\n", "gemm_bf16_32x32, float_gemm_amx_bf16 order", "GFLOPS", "of peak");
  for (size_t v = 0; v < 2; ++v) {
    const double g = 2.0 * kBf16Rows * 32 * kBf16K * 8 / bf16_s[v] / 1e9;
    std::printf("%-44s %10.0f %9.0f%%\n", v == 1 ? "A in the tile layout (the kernel)" : "A as token rows", g,
                100.0 * g / bf16.median);
  }
  set_num_threads(0);
  std::printf("\n# %d threads\n", num_threads());
  fp8_blocks(min_s, reps);
  return 0;
}
