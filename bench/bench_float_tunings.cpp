// The float GEMM's FMA core (kernels/x86/float_gemm.hpp) under its target's
// tuning and variations of it (register tile at M = 1, two-step FP8 widening,
// K chunks for few and many rows, panel prefetch, row chunk, decoded-rows
// threshold, and for rows read in place the pack group and prefetch, and
// the FP8 register transpose (rows, panels side by side, row prefetch),
// and on AVX-512 the vdpbf16ps core ("dot core": FP8 kinds, from 5 rows
// where the float-dot probe prefers it, e.g. Zen 5) with its own variations:
// bench/isa/float_tunings_variants.hpp, listed per target by
// bench/isa/float_tunings.*.cpp), in alternating
// rounds so that every variant sees the same machine; the variants of a core
// compute the same bits (checked). The last rows are the library's own
// builds of the cores (the layer's kernels): the variants are compiled in
// the bench, and a bench build of the same source has run several % slower
// than the library's (BENCHMARKS.md, "Zen 4, second session"). The FMA
// core is what every AVX2 machine runs, and every AVX-512 one where the probe prefers it to vdpbf16ps (on
// AMX machines below the tiles' 32 rows), and FP8 layers up to 4 rows
// where the probe prefers vdpbf16ps. Only the GEMM is timed: the
// activation is its E4M3 values, prepared once (as f32, and as bf16 pairs
// for the dot core).
//
// At M <= 16 the weights cycle through a ring >= kRingLlcFactor times the
// last-level cache (from DRAM, as in decoding; one ring of packed panels and
// one of stored rows, shared by the tunings); "stored GB/s" counts the bytes
// the checkpoint stores, as a fraction of the read bandwidth calibrated in
// the same run (median and best pass); larger M reports GFLOPS. On AVX2 the
// header also gives which ops share the vector shifts' pipes
// (support/shift_pipes.hpp), what bounds the few-row FP8 decodes.
//
//   bench_float_tunings [--quick] [--m M ..] [--shape KxN ..] [--format F ..] [--threads N]
//                       [--tuning TEXT ..] [--in-cache]
//   --tuning TEXT: only the tunings whose name contains TEXT (repeatable),
//            next to the default.
//   --in-cache: one copy of the weights at every M (no DRAM ring): with a
//            small shape, the kernels' compute rate (GFLOPS; at M = 1 a
//            byte per FP8 weight is GFLOPS / 2 GB/s).
//   formats: float8_e4m3fn (default), float8_e5m2, mxfp8 (E4M3 codes + E8M0 per 32 k),
//            bf16 (unquantized; packed tunings only)
//   defaults: M = 1 at K=3072 N=12288, K=12288 N=3072, K=5376 N=21504; 2 threads.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "support/args.hpp"
#include "support/float_tunings.hpp"
#include "support/inputs.hpp"
#include "support/run_info.hpp"
#include "support/shift_pipes.hpp"
#include "support/timing.hpp"
#include "support/variant_table.hpp"

namespace {

using namespace mixq::bench;
namespace x86 = mixq::kernels::x86;

struct Format {
  const char* name;
  x86::PanelType type;
  int64_t element_bytes;
  bool in_place;  // the GEMM can read its stored rows in place
};
const Format kFormats[] = {{"float8_e4m3fn", x86::PanelType::e4m3, 1, true},
                           {"float8_e5m2", x86::PanelType::e5m2, 1, true},
                           {"mxfp8", x86::PanelType::mxfp8, 1, true},
                           {"bf16", x86::PanelType::bf16, 2, false}};

const Format& format_named(const std::string& name) {
  for (const Format& f : kFormats)
    if (name == f.name) return f;
  mixq::fail("bench_float_tunings: unknown format '{}' (float8_e4m3fn, float8_e5m2, mxfp8, bf16)", name);
}

// One stored layer (random rows: FP8 codes never inf or NaN, E8M0 scales 2^-4 ..
// 2^3, bf16 values of N(0, 1)) and its forms: packed and in place, for the
// FMA core and (FP8 kinds) the dot core alike.
struct Layer {
  std::vector<uint8_t> rows, scales;
  x86::FloatPanels packed, in_place;
  const x86::FloatPanels& form(const FloatTuning& t) const { return t.in_place ? in_place : packed; }
};

std::unique_ptr<Layer> random_layer(const Format& f, int64_t k, int64_t n, uint32_t seed) {
  auto l = std::make_unique<Layer>();
  std::mt19937 rng(seed);
  l->rows.resize(static_cast<size_t>(n * k * f.element_bytes));
  if (f.type == x86::PanelType::bf16) {
    std::normal_distribution<float> normal;
    for (size_t i = 0; i < l->rows.size(); i += 2) {  // little-endian bf16
      const uint16_t bits = mixq::f32_to_bf16(normal(rng));
      l->rows[i] = static_cast<uint8_t>(bits);
      l->rows[i + 1] = static_cast<uint8_t>(bits >> 8);
    }
  } else {
    random_e4m3_codes(rng, l->rows);
    if (f.type == x86::PanelType::e5m2)
      for (uint8_t& c : l->rows)
        if ((c & 0x7C) == 0x7C) c &= 0xBF;  // E5M2 inf / NaN: exponent 15 instead of 31
  }
  const uint8_t* scales = nullptr;
  if (f.type == x86::PanelType::mxfp8) {
    l->scales.resize(static_cast<size_t>(n * k / 32));
    for (uint8_t& s : l->scales) s = static_cast<uint8_t>(123 + rng() % 8);
    scales = l->scales.data();
  }
  const int64_t row_bytes = k * f.element_bytes;
  l->packed = x86::pack_panels(f.type, l->rows.data(), row_bytes, n, k, scales);
  if (f.in_place) l->in_place = x86::float_panels_in_place(f.type, l->rows.data(), row_bytes, n, k, scales);
  return l;
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<std::string> picked;
  BenchArgs o = parse_tuning_args("bench_float_tunings", argc, argv, picked);
  default_to_decode_shapes(o);
  std::vector<const Format*> formats;
  for (const std::string& name : o.formats.empty() ? std::vector<std::string>{"float8_e4m3fn"} : o.formats)
    formats.push_back(&format_named(name));
  for (const Format* f : formats)
    for (auto [k, n] : o.shapes)
      if (f->type == x86::PanelType::mxfp8 && k % 32 != 0)
        mixq::fail("bench_float_tunings: MXFP8 needs K a multiple of 32, not {}", k);

  const mixq::kernels::Isa isa = mixq::kernels::active_isa();  // MIXQ_ISA=avx2 runs AVX2's on AVX-512 machines
  const bool avx512 = isa >= mixq::kernels::Isa::avx512;
  std::vector<FloatTuning> tunings = avx512                               ? float_tunings_avx512()
                                     : isa == mixq::kernels::Isa::avx2 ? float_tunings_avx2()
                                                                       : std::vector<FloatTuning>{};
  if (tunings.empty()) {
    std::printf("bench_float_tunings: no AVX2 or AVX-512 on this CPU\n");
    return 0;
  }
  tunings = keep_picked(tunings, picked);
  const AlternatingRun run =
      start_alternating(o, avx512 ? "avx512 float tunings (FMA and vdpbf16ps cores)" : "avx2 float tunings");
  if (!avx512) {  // what bounds the few-row FP8 decodes (fp8_rows_in_place.avx2.cpp)
    std::printf("# shift pipes: 8 vpsrad with 8 more ops take, their time alone being 1 (2x: the op runs on the"
                " shifts' pipes):");
    for (const PipeShare& p : measure_shift_pipe_shares()) std::printf(" %.2fx (%s)", p.share, p.op);
    std::printf("\n");
  }
  for (const Format* f : formats) {
    std::vector<FloatTuning> runnable;  // bf16 has no in-place form and no dot core
    for (const FloatTuning& t : tunings)
      if (f->in_place || (!t.in_place && !t.dot)) runnable.push_back(t);
    const bool pairs = std::any_of(runnable.begin(), runnable.end(), [](const FloatTuning& t) { return t.dot; });
    for (int64_t m : o.ms)
      for (auto [k, n] : o.shapes) {
        const double stored =
            double(n) * double(k) * double(f->element_bytes) + (f->type == x86::PanelType::mxfp8 ? n * k / 32.0 : 0);
        const int copies = m <= 16 && !o.in_cache ? ring_copies(stored) : 1;
        std::vector<std::unique_ptr<Layer>> layers;
        for (int c = 0; c < copies; ++c)
          layers.push_back(random_layer(*f, k, n, static_cast<uint32_t>(c + 1)));
        const std::vector<float> x = random_activations(m * k);
        std::vector<float> a(x.size());  // the activation as its E4M3 values (what W8A8 FP8 layers run)
        (avx512 ? x86::prepare_f32_avx512 : x86::prepare_f32_avx2)(x.data(), m, k, k, x86::ActPrep::e4m3, 1.0f,
                                                                   a.data());
        const int64_t pair_steps = (k + 1) / 2;
        std::vector<uint32_t> a_pairs(pairs ? static_cast<size_t>(m * pair_steps) : 0);  // the same values as bf16
        if (pairs)
          x86::prepare_bf16_avx512(x.data(), m, k, pair_steps, x86::ActPrep::e4m3, 1.0f, a_pairs.data(), false);
        auto forward = [&](const FloatTuning& t, const Layer& l, float* y) {
          if (t.dot)
            t.run(a_pairs.data(), pair_steps, m, l.form(t), 1.0f, nullptr, y);
          else
            t.run(a.data(), k, m, l.form(t), 1.0f, nullptr, y);
        };
        // Each core's variants against its first (the dot core sums k-pairs:
        // other bits than the FMA chain).
        std::vector<float> y(static_cast<size_t>(m * n)), want(y.size()), want_dot(y.size());
        const FloatTuning* first_dot = nullptr;
        forward(runnable[0], *layers[0], want.data());
        for (const FloatTuning& t : runnable) {
          std::fill(y.begin(), y.end(), -1.0f);
          forward(t, *layers[0], y.data());
          if (t.dot && !first_dot) {
            first_dot = &t;
            want_dot = y;
          }
          if (std::memcmp(y.data(), (t.dot ? want_dot : want).data(), y.size() * sizeof(float)) != 0)
            mixq::fail("bench_float_tunings: tuning '{}' computes different bits than '{}'", t.name,
                       t.dot ? first_dot->name : runnable[0].name);
        }
        size_t next = 0;
        const VariantTimes times = run.time(runnable.size(), copies > 1 ? stored : 0, [&](size_t t) {
          forward(runnable[t], *layers[next], y.data());
          next = (next + 1) % layers.size();
        });
        std::printf("\n# %s M=%ld K=%ld N=%ld, %s%s\n", f->name, m, k, n, pairs ? "FMA and dot cores" : "FMA core",
                    ring_suffix(copies, stored).c_str());
        print_variant_table({"tuning", "vs default", 68}, variant_names(runnable), times, copies > 1 ? stored : 0,
                            run.bw, 2.0 * double(m) * double(n) * double(k), "GFLOPS");
        std::fflush(stdout);
      }
  }
  return 0;
} catch (const mixq::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
