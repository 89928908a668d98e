// NVFP4 W4A4 on its packed panels and on the checkpoint's own bytes in place
// (kernels/x86/nvfp4_w4a4.hpp: the k-lane GEMV for M <= kNvfp4InPlaceGemvM,
// panels decoded from the rows above), in alternating rounds so that both
// see the same machine; they compute the same bits (checked). Only the GEMM
// is timed (the activation is quantized once). At M <= 16 the weights cycle
// through a ring >= kRingLlcFactor times the last-level cache; "stored GB/s"
// counts the codes and block scales the checkpoint stores, as a fraction of
// the read bandwidth calibrated in the same run (median and best pass);
// larger M reports the block-dot rate in int8 GOPS (2·M·N·K per call).
//
//   bench_nvfp4_in_place [--quick] [--m M ..] [--shape KxN ..] [--threads N]
//   defaults: M = 1 at K=3072 N=12288, K=12288 N=3072, K=5376 N=21504; 2 threads.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/calibrate.hpp"
#include "kernels/cpu.hpp"
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

// Random stored codes and swizzled E4M3 block scales (0.25 .. 2, never NaN),
// and both forms of the weight over them.
struct Layer {
  std::vector<uint8_t> codes, scales;
  x86::Nvfp4Weights packed, in_place;
};

std::unique_ptr<Layer> random_layer(int64_t k, int64_t n, uint32_t seed) {
  auto l = std::make_unique<Layer>();
  std::mt19937 rng(seed);
  l->codes.resize(static_cast<size_t>(n * k / 2));
  for (uint8_t& c : l->codes) c = static_cast<uint8_t>(rng() & 0xFF);
  l->scales.resize(static_cast<size_t>(mixq::swizzled_rows(n) * mixq::swizzled_cols(k / 16)));
  for (uint8_t& s : l->scales) s = static_cast<uint8_t>(0x28 + rng() % 24);
  l->packed = x86::nvfp4_pack(l->codes.data(), n, k / 2, l->scales.data(), n, 0.01f);
  l->in_place = x86::nvfp4_in_place(l->codes.data(), n, k / 2, l->scales.data(), n, 0.01f);
  return l;
}

}  // namespace

int main(int argc, char** argv) try {
  BenchArgs o = parse_args("bench_nvfp4_in_place", argc, argv);
  default_to_decode_shapes(o);
  for (auto [k, n] : o.shapes)
    if (k % 32 != 0) mixq::fail("bench_nvfp4_in_place: K = {} is not a multiple of 32", k);
  const bool avx512 = mixq::kernels::best_isa() == mixq::kernels::Isa::avx512 && x86::nvfp4_avx512_supported();
  if (!avx512 && mixq::kernels::best_isa() == mixq::kernels::Isa::reference) {
    std::printf("bench_nvfp4_in_place: no AVX2 or AVX-512 on this CPU\n");
    return 0;
  }
  const bool vnni = mixq::kernels::cpu_has_avx_vnni();
  const char* kernel = avx512 ? "avx512" : vnni ? "avx2_vnni" : "avx2";
  const AlternatingRun run = start_alternating(o, std::string("nvfp4 ") + kernel);
  const int rounds = run.rounds;
  const double min_s = run.min_seconds;
  const mixq::kernels::Rate bw = run.bw;
  const char* names[2] = {"packed panels (a copy)", "in place (the file's bytes)"};
  for (int64_t m : o.ms)
    for (auto [k, n] : o.shapes) {
      const double stored = double(n) * double(k) / 2 + double(n) * double(k) / 16;
      const int copies = m <= 16 ? ring_copies(stored) : 1;
      std::vector<std::unique_ptr<Layer>> layers;
      for (int c = 0; c < copies; ++c) layers.push_back(random_layer(k, n, static_cast<uint32_t>(c + 1)));
      const std::vector<float> x = random_activations(m * k);
      x86::Nvfp4Activation act;
      if (avx512) x86::nvfp4_quantize_avx512(x.data(), m, k, k / 16, nullptr, std::nullopt, act);
      else x86::nvfp4_quantize_avx2(x.data(), m, k, k / 16, nullptr, std::nullopt, act);
      auto gemm = [&](const x86::Nvfp4Weights& w, float* y) {
        if (avx512) x86::nvfp4_gemm_avx512(act, w, nullptr, y);
        else x86::nvfp4_gemm_avx2(act, w, nullptr, y, vnni);
      };
      std::vector<float> y(static_cast<size_t>(m * n)), want(y.size());
      gemm(layers[0]->packed, want.data());
      gemm(layers[0]->in_place, y.data());
      if (std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) != 0)
        mixq::fail("bench_nvfp4_in_place: in place computes different bits than packed");
      size_t next = 0;
      const std::vector<double> times = alternating_medians(2, rounds, min_s, [&](size_t v) {
        gemm(v == 0 ? layers[next]->packed : layers[next]->in_place, y.data());
        next = (next + 1) % layers.size();
      });
      std::printf("\n# nvfp4 M=%ld K=%ld N=%ld, kernel %s%s\n", m, k, n, kernel,
                  copies > 1 ? ("; " + ring_note(copies, stored)).c_str() : " (one copy: weights reused)");
      print_variant_table({"weights", "vs packed", 32}, {names[0], names[1]}, times, copies > 1 ? stored : 0, bw,
                          2.0 * double(m) * double(n) * double(k));
      std::fflush(stdout);
    }
  return 0;
} catch (const mixq::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
