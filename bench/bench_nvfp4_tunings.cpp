// The NVFP4 W4A4 GEMM under its target's register tiles and variations of
// them (bench/isa/nvfp4_tunings.*.cpp: the large-M tile, the tile of 3 rows
// up to the large-M path and where that path starts, column vectors per pass), in alternating rounds so that every variant sees
// the same machine; the variants compute the same bits (checked). The last
// rows are the library's own build of the default: on packed weights, and
// (with one copy of the weights, not beside a ring) on the same weights read in place (as a loaded checkpoint runs them; from 9
// rows that path decodes each panel from the rows into the large-M tiles'
// buffer, so the large-M variants matter there too). Only the GEMM is
// timed: the activation is quantized once per M by the library. The weights
// are random codes and E4M3 block scales (every nibble is an E2M1 code). At
// M <= 16 the packed weights cycle through a ring >= kRingLlcFactor times the
// last-level cache (from DRAM, as in decoding) and "stored GB/s" counts the
// packed bytes; larger M reports integer GOPS (2·M·N·K).
//
//   bench_nvfp4_tunings [--quick] [--m M ..] [--shape KxN ..] [--threads N] [--tuning TEXT ..] [--in-cache]
//   --tuning TEXT: only the tunings whose name contains TEXT (repeatable), next to the default.
//   --in-cache: one copy of the weights at every M (no DRAM ring).
//   defaults: M = 1 at K=3072 N=12288, K=12288 N=3072, K=5376 N=21504; 2 threads.
//   The large-M tile: --m 1024 --m 4096 --shape 3072x3072 --tuning "large M"
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu.hpp"
#include "mixq/error.hpp"
#include "numeric/swizzle.hpp"
#include "support/inputs.hpp"
#include "support/nvfp4_tunings.hpp"
#include "support/run_info.hpp"
#include "support/timing.hpp"
#include "support/variant_table.hpp"

namespace {

using namespace mixq::bench;
namespace x86 = mixq::kernels::x86;

// A weight as a checkpoint stores it: [rows, K/2] hi-first codes and swizzled
// E4M3 block scales (0x08..0x77: never the NaN codes 0x7F / 0xFF).
struct StoredWeight {
  int64_t rows = 0, row_bytes = 0;
  std::vector<uint8_t> codes, scales;
};

StoredWeight random_stored(int64_t k, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  StoredWeight s;
  s.rows = (n + 15) / 16 * 16;
  s.row_bytes = k / 2;
  s.codes.resize(static_cast<size_t>(s.rows * s.row_bytes));
  for (uint8_t& c : s.codes) c = static_cast<uint8_t>(rng() & 0xFF);
  std::vector<uint8_t> linear(static_cast<size_t>(s.rows * (k / 16)));
  for (uint8_t& e : linear) e = static_cast<uint8_t>(0x08 + rng() % 0x70);
  s.scales = mixq::swizzle_scales(linear.data(), s.rows, k / 16);
  return s;
}

constexpr float kGlobal = 0.01f;

x86::Nvfp4Weights packed(const StoredWeight& s, int64_t n) {
  return x86::nvfp4_pack(s.codes.data(), s.rows, s.row_bytes, s.scales.data(), n, kGlobal);
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<std::string> picked;
  BenchArgs o = parse_tuning_args("bench_nvfp4_tunings", argc, argv, picked);
  default_to_decode_shapes(o);
  require_k_multiple(o, "bench_nvfp4_tunings", 16, "the block");
  const bool avx512 = x86::nvfp4_avx512_supported();
  const bool avx2 = mixq::kernels::best_isa() >= mixq::kernels::Isa::avx2;
  std::vector<Nvfp4Tuning> tunings = avx512 ? nvfp4_tunings_avx512vbmi()
                                     : avx2 ? nvfp4_tunings_avx2()
                                            : std::vector<Nvfp4Tuning>{};
  if (tunings.empty()) {
    std::printf("bench_nvfp4_tunings: no AVX2 or AVX-512 VBMI on this CPU\n");
    return 0;
  }
  const Nvfp4Tuning library = tunings.back();  // the in-place row's kernel, whatever --tuning keeps
  tunings = keep_picked(tunings, picked);
  const AlternatingRun run = start_alternating(o, avx512 ? "avx512vbmi nvfp4 tunings" : "avx2 nvfp4 tunings");
  for (int64_t m : o.ms)
    for (auto [k, n] : o.shapes) {
      const StoredWeight stored = random_stored(k, n, 1);
      std::vector<x86::Nvfp4Weights> ring{packed(stored, n)};
      const double bytes = static_cast<double>(ring[0].data.size());
      const int copies = m <= 16 && !o.in_cache ? ring_copies(bytes) : 1;
      for (int c = 1; c < copies; ++c) ring.push_back(packed(random_stored(k, n, static_cast<uint32_t>(c + 1)), n));
      const x86::Nvfp4Weights in_place =
          x86::nvfp4_in_place(stored.codes.data(), stored.rows, stored.row_bytes, stored.scales.data(), n, kGlobal);
      const std::vector<float> x = random_activations(m * k);
      x86::Nvfp4Activation act;
      if (avx512) x86::nvfp4_quantize_avx512(x.data(), m, k, ring[0].blocks, nullptr, std::nullopt, act);
      else x86::nvfp4_quantize_avx2(x.data(), m, k, ring[0].blocks, nullptr, std::nullopt, act);
      std::vector<float> bias(static_cast<size_t>(n), 0.5f);
      std::vector<float> y(static_cast<size_t>(m * n)), want(y.size());
      tunings[0].run(act, ring[0], bias.data(), want.data());
      auto check = [&](const char* name) {
        if (std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) != 0)
          mixq::fail("bench_nvfp4_tunings: '{}' computes different bits than the default", name);
      };
      for (const Nvfp4Tuning& t : tunings) {
        std::fill(y.begin(), y.end(), std::nanf(""));
        t.run(act, ring[0], bias.data(), y.data());
        check(t.name);
      }
      std::fill(y.begin(), y.end(), std::nanf(""));
      library.run(act, in_place, bias.data(), y.data());
      check("the layer's kernel, in place");
      // The variants on the ring; with one copy, then the library's build on
      // the in-place weights (beside a ring it would read cached rows).
      const size_t variants = tunings.size() + (copies == 1 ? 1 : 0);
      size_t next = 0;
      const VariantTimes times = run.time(variants, copies > 1 ? bytes : 0, [&](size_t i) {
        if (i == tunings.size()) return library.run(act, in_place, bias.data(), y.data());
        tunings[i].run(act, ring[next], bias.data(), y.data());
        next = (next + 1) % ring.size();
      });
      std::vector<std::string> names = variant_names(tunings);
      if (copies == 1) names.push_back("the layer's kernel, weights read in place");
      std::printf("\n# M=%ld K=%ld N=%ld%s\n", m, k, n, ring_suffix(copies, bytes).c_str());
      print_variant_table({"tuning", "vs default", 56}, names, times, copies > 1 ? bytes : 0, run.bw,
                          2.0 * double(m) * double(n) * double(k));
      std::fflush(stdout);
    }
  return 0;
} catch (const mixq::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
