// The integer GEMM under its target's tuning and variations of it
// (activation block size, small-M prefetch distance, register tile:
// bench/isa/int_tunings.*.cpp), in alternating rounds so that every variant
// sees the same machine; the variants compute the same bits (checked); the
// last rows are the library's own build, packed and in place (the layer's
// kernel: bench/isa/int_tunings.avx512.cpp says why). At
// M <= 16 the weights cycle through a ring >= kRingLlcFactor times the
// last-level cache (from DRAM, as in decoding); "stored GB/s" counts the
// bytes the checkpoint stores (codes + f32 per-row scale), given as a
// fraction of the read bandwidth calibrated in the same run (median and best
// pass); larger M reports integer GOPS.
//
//   bench_int_tunings [--quick] [--m M ..] [--shape KxN ..] [--format F ..] [--threads N]
//                     [--tuning TEXT ..] [--in-cache]
//   --in-cache: one copy of the weights, reused (the compute side of M <= 16)
//   --tuning TEXT: only the tunings whose name contains TEXT (repeatable),
//            next to the default. Each packed tuning holds its own ring of
//            copies (16x the last-level cache: 4 GiB each where the LLC is
//            260 MiB), so on such a machine pick a few.
//   formats: int8_convrot (INT8 W8A8, ConvRot group 256; default),
//            convrot_w4a4 (int4 weights and activations, ConvRot group 256) and
//            asym_w4a8_int8 (4-bit codes decoded in the GEMM through E4M3
//            s_rel per 16 k, the format's default group; int8 activations)
//   defaults: M = 1 at K=3072 N=12288, K=12288 N=3072, K=5376 N=21504; 2 threads.
//   The activation block sweep: --m 4096 --shape 3072x3072 (on AMX machines
//   the AMX kernel's blocks: --tuning AMX)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/calibrate.hpp"
#include "kernels/cpu.hpp"
#include "mixq/error.hpp"
#include "support/args.hpp"
#include "support/inputs.hpp"
#include "support/int_tunings.hpp"
#include "support/run_info.hpp"
#include "support/timing.hpp"
#include "support/variant_table.hpp"

namespace {

using namespace mixq::bench;
using mixq::kernels::IntKernel;
using mixq::kernels::IntLayerDesc;

constexpr int64_t kGroup = 256;

// Random stored weights of one layer and the description that points at them.
struct RandomLayer {
  std::vector<int8_t> weight;    // int8
  std::vector<uint8_t> nibbles;  // int4, two per byte; asym_w4a8_int8: its codes
  std::vector<uint8_t> s_rel;    // asym_w4a8_int8: E4M3 per (row, 16 k)
  mixq::kernels::IntCodes codes;
  std::vector<float> scale, bias;
  IntLayerDesc desc;
};

std::unique_ptr<RandomLayer> random_layer(const std::string& format, int64_t k, int64_t n, uint32_t seed) {
  auto l = std::make_unique<RandomLayer>();
  std::mt19937 rng(seed);
  IntLayerDesc& d = l->desc;
  d.n = n;
  d.k = k;
  d.group = kGroup;
  if (format == "int8_convrot") {
    l->weight.resize(static_cast<size_t>(n * k));
    for (int8_t& w : l->weight) w = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    d.weight = l->weight.data();
  } else if (format == "asym_w4a8_int8") {
    l->nibbles.resize(static_cast<size_t>(n * k / 2));
    for (uint8_t& b : l->nibbles) b = static_cast<uint8_t>(rng() & 0xFF);
    l->s_rel.resize(static_cast<size_t>(n * k / 16));
    for (uint8_t& s : l->s_rel) s = static_cast<uint8_t>(0x48 + rng() % 16);  // E4M3 4 .. 15: w8 within ±127
    mixq::kernels::IntCodes& c = l->codes;
    c.codes = l->nibbles.data();
    c.s_rel_e4m3 = l->s_rel.data();
    for (int i = 0; i < 16; ++i) c.levels[i] = static_cast<float>(i - 8);
    c.group_size = 16;
    d.codes = &c;
  } else {
    l->nibbles.resize(static_cast<size_t>(n * k / 2));
    for (uint8_t& b : l->nibbles) b = static_cast<uint8_t>(rng() & 0xFF);
    d.weight_nibbles = l->nibbles.data();
    d.int4_weights = true;
    d.act = mixq::kernels::ActQuant::q4row;
    d.epilogue = mixq::kernels::Epilogue::sequential;
  }
  std::uniform_real_distribution<float> scale(1e-3f, 2e-3f), bias(-1.0f, 1.0f);
  l->scale.resize(static_cast<size_t>(n));
  l->bias.resize(static_cast<size_t>(n));
  for (float& s : l->scale) s = scale(rng);
  for (float& b : l->bias) b = bias(rng);
  d.weight_scale = l->scale.data();
  d.bias = l->bias.data();
  return l;
}


}  // namespace

int main(int argc, char** argv) try {
  std::vector<std::string> picked;
  BenchArgs o = parse_tuning_args("bench_int_tunings", argc, argv, picked);
  default_to_decode_shapes(o);
  const std::vector<std::string> formats = o.formats.empty() ? std::vector<std::string>{"int8_convrot"} : o.formats;
  for (const std::string& f : formats)
    if (f != "int8_convrot" && f != "convrot_w4a4" && f != "asym_w4a8_int8")
      mixq::fail("bench_int_tunings: unknown format '{}' (int8_convrot, convrot_w4a4, asym_w4a8_int8)", f);
  require_k_multiple(o, "bench_int_tunings", kGroup, "the ConvRot group");

  const mixq::kernels::Isa isa = mixq::kernels::best_isa();
  std::vector<IntTuning> tunings = isa == mixq::kernels::Isa::amx      ? int_tunings_amx()
                                   : isa == mixq::kernels::Isa::avx512 ? int_tunings_avx512()
                                   : isa == mixq::kernels::Isa::avx2   ? int_tunings_avx2()
                                                                       : std::vector<IntTuning>{};
  tunings = keep_picked(tunings, picked);
  if (tunings.empty()) {
    std::printf("bench_int_tunings: no AVX2 or AVX-512 on this CPU\n");
    return 0;
  }
  const AlternatingRun run = start_alternating(o, isa == mixq::kernels::Isa::amx      ? "amx tunings"
                                                   : isa == mixq::kernels::Isa::avx512 ? "avx512 tunings"
                                                                                       : "avx2 tunings");
  for (const std::string& format : formats)
    for (int64_t m : o.ms)
      for (auto [k, n] : o.shapes) {
        const bool int4 = format != "int8_convrot";  // codes: 4 bits, plus 1 s_rel byte per 16
        const double stored = double(n) * double(k) / (int4 ? 2 : 1) + 4.0 * double(n) +
                              (format == "asym_w4a8_int8" ? double(n) * double(k) / 16 : 0.0);
        const int copies = m <= 16 && !o.in_cache ? ring_copies(stored) : 1;
        // kernels[t][c]: tuning t's kernel over copy c (each packs its own
        // weights, or reads copy c's rows in place: the layers stay alive).
        std::vector<std::unique_ptr<RandomLayer>> layers;
        std::vector<std::vector<std::unique_ptr<IntKernel>>> kernels(tunings.size());
        for (int c = 0; c < copies; ++c) {
          layers.push_back(random_layer(format, k, n, static_cast<uint32_t>(c + 1)));
          for (size_t t = 0; t < tunings.size(); ++t) kernels[t].push_back(tunings[t].make(layers.back()->desc));
        }
        const std::vector<float> x = random_activations(m * k);
        std::vector<float> y(static_cast<size_t>(m * n)), want(y.size());
        kernels[0][0]->forward(x.data(), m, want.data());
        for (size_t t = 0; t < tunings.size(); ++t) {
          std::fill(y.begin(), y.end(), std::nanf(""));
          kernels[t][0]->forward(x.data(), m, y.data());
          if (std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) != 0)
            mixq::fail("bench_int_tunings: tuning '{}' computes different bits than the default", tunings[t].name);
        }
        size_t next = 0;
        const VariantTimes times = run.time(tunings.size(), copies > 1 ? stored : 0, [&](size_t t) {
          kernels[t][next]->forward(x.data(), m, y.data());
          next = (next + 1) % kernels[t].size();
        });
        std::printf("\n# %s M=%ld K=%ld N=%ld, kernel %s%s\n", format.c_str(), m, k, n,
                    std::string(kernels[0][0]->name()).c_str(),
                    ring_suffix(copies, stored).c_str());
        // Small M reads the weights from DRAM: bandwidth columns. Large M: GOPS.
        print_variant_table({"tuning", "vs default", 50}, variant_names(tunings), times, copies > 1 ? stored : 0, run.bw,
                            2.0 * double(m) * double(n) * double(k));
        std::fflush(stdout);
      }
  return 0;
} catch (const mixq::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
