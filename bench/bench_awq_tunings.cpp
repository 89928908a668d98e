// The f32-FMA AWQ W4A16 kernel under its target's tuning and variations of it
// (tile shape, software-prefetch distances, row chunk: bench/isa/
// awq_tunings.*.cpp), and on AVX-512 the vdpbf16ps kernel under its tuning
// and variations of it, in alternating rounds so that every variant sees the
// same machine; each core's variants compute that core's bits (checked);
// each core's last row is the library's own build of it (what a layer runs:
// a variant must beat that row, BENCHMARKS.md "Zen 4, second session"). At M <=
// 16 the packed weights cycle through a ring >= kRingLlcFactor times the
// last-level cache
// (from DRAM, as in decoding); "stored GB/s" counts the bytes the checkpoint
// stores and the packed layer reads (4-bit codes + bf16 scale and zero per
// group), given as a fraction of the read bandwidth calibrated in the same
// run (median and best pass).
//
//   bench_awq_tunings [--quick] [--m M ..] [--shape KxN ..] [--group G] [--threads N] [--in-cache]
//                     [--tuning TEXT ..]
//   --tuning: only the rows whose name contains TEXT (and the default).
//   --in-cache: one copy of the weights at every M (no DRAM ring): with a
//            small shape, the kernels' compute rate.
//   defaults: M = 1 at K=3072 N=12288, K=12288 N=3072, K=5376 N=21504; group 64;
//   2 threads. Example, the large-M tiles: --m 64 --m 4096 --shape 3072x3072
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/calibrate.hpp"
#include "kernels/cpu.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "support/awq_tunings.hpp"
#include "support/args.hpp"
#include "support/inputs.hpp"
#include "support/run_info.hpp"
#include "support/timing.hpp"
#include "support/variant_table.hpp"

namespace {

using namespace mixq::bench;
using mixq::kernels::x86::AwqPacked;

struct Options : BenchArgs {
  int64_t group = 64;
  std::vector<std::string> picked;  // --tuning TEXT
};

Options parse(int argc, char** argv) {
  Options o;
  static_cast<BenchArgs&>(o) =
      parse_tuning_args("bench_awq_tunings", argc, argv, o.picked, [&](const std::string& flag, const auto& value) {
        if (flag != "--group") return false;
        o.group = std::atol(value());
        return true;
      });
  default_to_decode_shapes(o);
  for (auto [k, n] : o.shapes)
    if (o.group <= 0 || o.group % 2 != 0 || k % o.group != 0)
      mixq::fail("bench_awq_tunings: group {} must be even and divide K = {}", o.group, k);
  return o;
}

// A random layer with BF16 scale and zeros, the width AWQ files store and a
// loaded layer keeps (kernels/stored_floats.hpp).
AwqPacked random_packed(int64_t k, int64_t n, int64_t group, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> codes(static_cast<size_t>(n * k / 2));
  for (uint8_t& c : codes) c = static_cast<uint8_t>(rng() & 0xFF);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> scale(static_cast<size_t>(k / group * n)), zeros(scale.size());
  std::vector<float> bias(static_cast<size_t>(n));
  for (uint16_t& s : scale) s = mixq::f32_to_bf16(0.01f * std::fabs(normal(rng)) + 1e-3f);
  for (uint16_t& z : zeros) z = mixq::f32_to_bf16(0.05f * normal(rng));
  for (float& b : bias) b = normal(rng);
  using mixq::kernels::FloatSource;
  return mixq::kernels::x86::awq_pack(codes.data(), FloatSource::of(mixq::DType::BF16, scale.data()),
                                      FloatSource::of(mixq::DType::BF16, zeros.data()), n, k, group, std::move(bias));
}


}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  const mixq::kernels::Isa isa = mixq::kernels::best_isa();
  const std::vector<AwqTuning> tunings = keep_picked(isa == mixq::kernels::Isa::avx512 ? awq_tunings_avx512()
                                                     : isa == mixq::kernels::Isa::avx2 ? awq_tunings_avx2()
                                                                                       : std::vector<AwqTuning>{},
                                                     o.picked);
  if (tunings.empty()) {
    std::printf("bench_awq_tunings: no AVX2 or AVX-512 on this CPU\n");
    return 0;
  }
  const AlternatingRun run = start_alternating(
      o, std::string(isa == mixq::kernels::Isa::avx512 ? "avx512" : "avx2") + " tunings, group " + std::to_string(o.group));
  for (int64_t m : o.ms)
    for (auto [k, n] : o.shapes) {
      // Codes + BF16 scale and zero per (group, column): what the file stores
      // and the packed layer holds.
      const double stored = double(n) * double(k) / 2 + 4.0 * double(n) * double(k / o.group);
      const int copies = m <= 16 && !o.in_cache ? ring_copies(stored) : 1;
      std::vector<AwqPacked> ring;
      for (int c = 0; c < copies; ++c) ring.push_back(random_packed(k, n, o.group, static_cast<uint32_t>(c + 1)));
      const std::vector<float> x = random_activations(m * k);
      std::vector<float> y(static_cast<size_t>(m * n)), want(y.size());
      // Every variant of a core computes the same bits as that core's first
      // row (the f32-FMA default, the vdpbf16ps default).
      std::vector<float> want_bf16;
      tunings[0].run(ring[0], x.data(), m, want.data());
      for (const AwqTuning& t : tunings) {
        std::fill(y.begin(), y.end(), std::nanf(""));
        t.run(ring[0], x.data(), m, y.data());
        if (t.bf16 && want_bf16.empty()) want_bf16 = y;
        const std::vector<float>& same = t.bf16 ? want_bf16 : want;
        if (std::memcmp(y.data(), same.data(), y.size() * sizeof(float)) != 0)
          mixq::fail("bench_awq_tunings: tuning '{}' computes different bits than its core's default", t.name);
      }
      size_t next = 0;
      const VariantTimes times = run.time(tunings.size(), copies > 1 ? stored : 0, [&](size_t i) {
        tunings[i].run(ring[next], x.data(), m, y.data());
        next = (next + 1) % ring.size();
      });
      std::printf("\n# M=%ld K=%ld N=%ld%s\n", m, k, n, ring_suffix(copies, stored).c_str());
      print_variant_table({"tuning", "vs default", 44}, variant_names(tunings), times, stored, run.bw);
      std::fflush(stdout);
    }
  return 0;
} catch (const mixq::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
