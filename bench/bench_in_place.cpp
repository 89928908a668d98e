// Every format whose kernels can read a checkpoint's bytes in place, on its
// packed copy and in place, in alternating rounds so that both see the same
// machine; they compute the same bits (checked). Only the GEMM is timed (the
// activation is prepared once).
//  - nvfp4: W4A4 (kernels/x86/nvfp4_w4a4.hpp: the k-lane GEMV for M <=
//    kNvfp4InPlaceGemvM, panels decoded from the rows above);
//  - float8_e4m3fn: the float GEMM's FMA core (kernels/x86/float_gemm.hpp:
//    each K chunk of panels packed from the rows inside the GEMM).
// (INT8 and ConvRot W4A4: bench_int_tunings' "rows read in place" rows.)
// At M <= 16 the weights cycle through a ring >= kRingLlcFactor times the
// last-level cache; "stored GB/s" counts the bytes the checkpoint stores, as
// a fraction of the read bandwidth calibrated in the same run; larger M
// reports 2·M·N·K per second (int8 GOPS for nvfp4's block dots, GFLOPS for FP8).
//
//   bench_in_place [--quick] [--format nvfp4|float8_e4m3fn ..] [--m M ..] [--shape KxN ..] [--threads N]
//                  [--in-cache]
//   --in-cache: one copy of the weights at every M (no DRAM ring): with a
//            small shape, the kernels' compute rate.
//   defaults: both formats, M = 1 at K=3072 N=12288, K=12288 N=3072, K=5376 N=21504; 2 threads.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "kernels/x86/nvfp4_w4a4.hpp"
#include "mixq/error.hpp"
#include "numeric/swizzle.hpp"
#include "support/args.hpp"
#include "support/inputs.hpp"
#include "support/run_info.hpp"
#include "support/timing.hpp"
#include "support/variant_table.hpp"

namespace {

using namespace mixq::bench;
namespace x86 = mixq::kernels::x86;

// One stored layer and its two forms: forward(in_place, y) runs one of them
// on the prepared activation.
struct Layer {
  std::vector<uint8_t> codes, scales;
  std::function<void(bool in_place, float* y)> forward;
  std::shared_ptr<void> state;  // what forward uses
};

bool avx512() { return mixq::kernels::best_isa() >= mixq::kernels::Isa::avx512; }

// Random codes and swizzled E4M3 block scales (0.25 .. 2, never NaN).
std::unique_ptr<Layer> nvfp4_layer(int64_t k, int64_t n, uint32_t seed, const x86::Nvfp4Activation& act) {
  auto l = std::make_unique<Layer>();
  std::mt19937 rng(seed);
  l->codes.resize(static_cast<size_t>(n * k / 2));
  for (uint8_t& c : l->codes) c = static_cast<uint8_t>(rng() & 0xFF);
  l->scales.resize(static_cast<size_t>(mixq::swizzled_rows(n) * mixq::swizzled_cols(k / 16)));
  for (uint8_t& s : l->scales) s = static_cast<uint8_t>(0x28 + rng() % 24);
  auto w = std::make_shared<std::pair<x86::Nvfp4Weights, x86::Nvfp4Weights>>(
      x86::nvfp4_pack(l->codes.data(), n, k / 2, l->scales.data(), n, 0.01f),
      x86::nvfp4_in_place(l->codes.data(), n, k / 2, l->scales.data(), n, 0.01f));
  const bool wide = avx512() && x86::nvfp4_avx512_supported(), vnni = mixq::kernels::cpu_has_avx_vnni();
  l->forward = [w, &act, wide, vnni](bool in_place, float* y) {
    const x86::Nvfp4Weights& weights = in_place ? w->second : w->first;
    if (wide) x86::nvfp4_gemm_avx512(act, weights, nullptr, y);
    else x86::nvfp4_gemm_avx2(act, weights, nullptr, y, vnni);
  };
  l->state = w;
  return l;
}

// Random E4M3 codes (never NaN), on the FMA core.
std::unique_ptr<Layer> fp8_layer(int64_t k, int64_t n, uint32_t seed, const std::vector<float>& a) {
  auto l = std::make_unique<Layer>();
  std::mt19937 rng(seed);
  l->codes.resize(static_cast<size_t>(n * k));
  random_e4m3_codes(rng, l->codes);
  auto w = std::make_shared<std::pair<x86::FloatPanels, x86::FloatPanels>>(
      x86::pack_panels(x86::PanelType::e4m3, l->codes.data(), k, n, k),
      x86::float_panels_in_place(x86::PanelType::e4m3, l->codes.data(), k, n, k));
  const int64_t m = static_cast<int64_t>(a.size()) / k;
  l->forward = [w, &a, k, m](bool in_place, float* y) {
    (avx512() ? x86::float_gemm_avx512 : x86::float_gemm_avx2)(a.data(), k, m, in_place ? w->second : w->first,
                                                               1.0f, nullptr, y);
  };
  l->state = w;
  return l;
}

}  // namespace

int main(int argc, char** argv) try {
  BenchArgs o = parse_args("bench_in_place", argc, argv);
  default_to_decode_shapes(o);
  const std::vector<std::string> formats =
      o.formats.empty() ? std::vector<std::string>{"nvfp4", "float8_e4m3fn"} : o.formats;
  for (const std::string& f : formats)
    if (f != "nvfp4" && f != "float8_e4m3fn") mixq::fail("bench_in_place: unknown format '{}' (nvfp4, float8_e4m3fn)", f);
  require_k_multiple(o, "bench_in_place", 32, "the MXFP8 / NVFP4 scale blocks");
  if (mixq::kernels::best_isa() == mixq::kernels::Isa::reference) {
    std::printf("bench_in_place: no AVX2 or AVX-512 on this CPU\n");
    return 0;
  }
  const AlternatingRun run = start_alternating(o, avx512() ? "avx512" : "avx2");
  const std::vector<std::string> names = {"packed (a copy)", "in place (the file's bytes)"};
  for (const std::string& format : formats)
    for (int64_t m : o.ms)
      for (auto [k, n] : o.shapes) {
        const bool nvfp4 = format == "nvfp4";
        const double stored = nvfp4 ? double(n) * double(k) * (0.5 + 1.0 / 16) : double(n) * double(k);
        const int copies = m <= 16 && !o.in_cache ? ring_copies(stored) : 1;
        const std::vector<float> x = random_activations(m * k);
        x86::Nvfp4Activation act;
        std::vector<float> a;  // FP8: the activation as its E4M3 values
        if (nvfp4) {
          if (avx512() && x86::nvfp4_avx512_supported())
            x86::nvfp4_quantize_avx512(x.data(), m, k, k / 16, nullptr, std::nullopt, act);
          else
            x86::nvfp4_quantize_avx2(x.data(), m, k, k / 16, nullptr, std::nullopt, act);
        } else {
          a.resize(x.size());
          (avx512() ? x86::prepare_f32_avx512 : x86::prepare_f32_avx2)(x.data(), m, k, k, x86::ActPrep::e4m3, 1.0f,
                                                                       a.data());
        }
        std::vector<std::unique_ptr<Layer>> layers;
        for (int c = 0; c < copies; ++c)
          layers.push_back(nvfp4 ? nvfp4_layer(k, n, static_cast<uint32_t>(c + 1), act)
                                 : fp8_layer(k, n, static_cast<uint32_t>(c + 1), a));
        std::vector<float> y(static_cast<size_t>(m * n)), want(y.size());
        layers[0]->forward(false, want.data());
        layers[0]->forward(true, y.data());
        if (std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) != 0)
          mixq::fail("bench_in_place: {} in place computes different bits than packed", format);
        size_t next = 0;
        const VariantTimes times = run.time(2, copies > 1 ? stored : 0, [&](size_t v) {
          layers[next]->forward(v == 1, y.data());
          next = (next + 1) % layers.size();
        });
        std::printf("\n# %s M=%ld K=%ld N=%ld%s\n", format.c_str(), m, k, n,
                    ring_suffix(copies, stored).c_str());
        print_variant_table({"weights", "vs packed", 32}, names, times, m <= 16 ? stored : 0, run.bw,
                            2.0 * double(m) * double(n) * double(k), nvfp4 ? "int GOPS" : "GFLOPS");
        std::fflush(stdout);
      }
  return 0;
} catch (const mixq::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
