// The SVDQuant W4A4 kernel under its target's register blocks and variations
// of them (bench/isa/svdquant_tunings.*.cpp: the one-row block's panels, the
// block of two rows and more), in alternating rounds so that every variant
// sees the same machine; the variants compute the same bits (checked). The
// layer is random with BF16 scales and low-rank factors (rank 32), as
// nunchaku ships them. At M <= 16 the packed weights cycle through a ring >=
// kRingLlcFactor times the last-level cache (from DRAM, as in decoding);
// "stored GB/s" counts the bytes the packed layer holds (codes, group scales,
// low-rank factors, smooth, bias), given as a fraction of the read bandwidth
// calibrated in the same run; larger M reports integer GOPS of the main
// branch (2·M·N·K). On AVX2 the variants are the vpmaddubsw kernel, which
// a CPU with AVX-VNNI does not run (its layer takes svdquant_avx_vnni).
// The last row of each table is the library's own build of the default
// block (the layer's kernel): the variants are compiled here, and the same
// source compiled in this file has run measurably slower than the library's
// (BENCHMARKS.md, "Zen 4, second session"). On AVX-512 the header also
// says which pipes the group epilogue's fp32 ops share with `vpdpbusd`
// (support/dot_pipes.hpp): what bounds this kernel against ConvRot W4A4's.
//
//   bench_svdquant_tunings [--quick] [--m M ..] [--shape KxN ..] [--threads N] [--tuning TEXT ..] [--in-cache]
//   --tuning TEXT: only the tunings whose name contains TEXT (repeatable), next to the default.
//   --in-cache: one copy of the weights at every M (no DRAM ring): with a small shape, the compute rate.
//   defaults: M = 1 at K=3072 N=12288, K=12288 N=3072, K=5376 N=21504; 2 threads.
//   The one-row sweep: --tuning M=1; the larger blocks: --m 16 --m 1024 --shape 3072x3072 --tuning "2+ rows"
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "support/inputs.hpp"
#include "support/dot_pipes.hpp"
#include "support/run_info.hpp"
#include "support/svdquant_tunings.hpp"
#include "support/timing.hpp"
#include "support/variant_table.hpp"

namespace {

using namespace mixq::bench;
using mixq::kernels::x86::SvdquantPacked;

// A random layer: int4 codes, BF16 group scales, rank-32 factors and smooth.
SvdquantPacked random_packed(int64_t k, int64_t n, uint32_t seed) {
  constexpr int64_t kRank = 32;
  std::mt19937 rng(seed);
  std::vector<uint8_t> codes(static_cast<size_t>(n * k / 2));
  for (uint8_t& c : codes) c = static_cast<uint8_t>(rng() & 0xFF);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto bf16 = [&](size_t count, float scale, float offset) {
    std::vector<uint16_t> v(count);
    for (uint16_t& x : v) x = mixq::f32_to_bf16(offset + scale * normal(rng));
    return v;
  };
  const std::vector<uint16_t> wscale = bf16(static_cast<size_t>(k / 64 * n), 0.001f, 0.01f);
  const std::vector<uint16_t> down = bf16(static_cast<size_t>(k * kRank), 0.05f, 0.0f);
  const std::vector<uint16_t> up = bf16(static_cast<size_t>(n * kRank), 0.05f, 0.0f);
  const std::vector<uint16_t> smooth = bf16(static_cast<size_t>(k), 0.05f, 1.0f);
  using mixq::kernels::FloatSource;
  mixq::kernels::x86::SvdquantSource src;
  src.n = n, src.k = k, src.rank = kRank;
  src.weight_row = [&](int64_t col) { return codes.data() + col * (k / 2); };
  src.wscale = FloatSource::of(mixq::DType::BF16, wscale.data());
  src.proj_down = FloatSource::of(mixq::DType::BF16, down.data());
  src.proj_up = FloatSource::of(mixq::DType::BF16, up.data());
  src.smooth = FloatSource::of(mixq::DType::BF16, smooth.data());
  src.bias.resize(static_cast<size_t>(n));
  for (float& b : src.bias) b = normal(rng);
  return mixq::kernels::x86::svdquant_pack(std::move(src));
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<std::string> picked;
  BenchArgs o = parse_tuning_args("bench_svdquant_tunings", argc, argv, picked);
  default_to_decode_shapes(o);
  require_k_multiple(o, "bench_svdquant_tunings", 64, "the group");
  const mixq::kernels::Isa isa = mixq::kernels::best_isa();
  const bool avx512 = isa >= mixq::kernels::Isa::avx512;
  std::vector<SvdquantTuning> tunings = avx512 ? svdquant_tunings_avx512()
                                        : isa == mixq::kernels::Isa::avx2 ? svdquant_tunings_avx2()
                                                                          : std::vector<SvdquantTuning>{};
  if (tunings.empty()) {
    std::printf("bench_svdquant_tunings: no AVX2 or AVX-512 on this CPU\n");
    return 0;
  }
  tunings = keep_picked(tunings, picked);
  const AlternatingRun run = start_alternating(o, avx512 ? "avx512 tunings" : "avx2 tunings");
  if (avx512) {
    std::printf("# dot pipes: 12 vpdpbusd with 3 more ops take, their time alone being 1 (1.25x: the op runs on"
                " the dots' pipes):");
    for (const PipeShare& p : measure_dot_pipe_shares()) std::printf(" %.2fx (%s)", p.share, p.op);
    std::printf("\n");
  }
  for (int64_t m : o.ms)
    for (auto [k, n] : o.shapes) {
      std::vector<SvdquantPacked> ring;
      ring.push_back(random_packed(k, n, 1));
      const double stored = static_cast<double>(ring[0].bytes());
      const int copies = m <= 16 && !o.in_cache ? ring_copies(stored) : 1;
      for (int c = 1; c < copies; ++c) ring.push_back(random_packed(k, n, static_cast<uint32_t>(c + 1)));
      const std::vector<float> x = random_activations(m * k);
      std::vector<float> y(static_cast<size_t>(m * n)), want(y.size());
      tunings[0].run(ring[0], x.data(), m, want.data());
      for (const SvdquantTuning& t : tunings) {
        std::fill(y.begin(), y.end(), std::nanf(""));
        t.run(ring[0], x.data(), m, y.data());
        if (std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) != 0)
          mixq::fail("bench_svdquant_tunings: tuning '{}' computes different bits than the default", t.name);
      }
      size_t next = 0;
      const VariantTimes times = run.time(tunings.size(), copies > 1 ? stored : 0, [&](size_t i) {
        tunings[i].run(ring[next], x.data(), m, y.data());
        next = (next + 1) % ring.size();
      });
      std::printf("\n# M=%ld K=%ld N=%ld%s\n", m, k, n, ring_suffix(copies, stored).c_str());
      print_variant_table({"tuning", "vs default", 44}, variant_names(tunings), times, copies > 1 ? stored : 0, run.bw,
                          2.0 * double(m) * double(n) * double(k));
      std::fflush(stdout);
    }
  return 0;
} catch (const mixq::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
