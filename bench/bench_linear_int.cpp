// Side-by-side: our integer Linears (INT8+ConvRot, ConvRot W4A4 with int4 and
// int8 activations) against oneDNN's u8·s8→f32 matmul on the same shapes, and
// against this machine's int8 dot peak (the VNNI loop; on AVX2 CPUs without
// VNNI the vpmaddubsw sequence: kernels/calibrate.hpp), the AMX peak where
// the CPU has AMX (there our kernels also run limited to VNNI), and the read
// bandwidth, all measured in the same run. Our times INCLUDE the ConvRot rotation and the per-token activation
// quantization; oneDNN gets ready u8 activations.
//   M = 4096, K = N = 3072 at 1 and 2 threads (compute-bound), and at the
//   H3 / FLUX shapes below at 2 threads (INT8 ConvRot, W4A4 int4);
//   M = 1 at K = N = 3072, K = 5376 N = 21504, K = 14336 N = 5376 (2 threads,
//   weights cycled through a ring of copies >= 16x the last-level cache so they come from DRAM;
//   the last column: the fraction of a read of the same bytes timed in the same alternating rounds).
// Usage: bench_linear_int [--quick]   (--quick: fewer, shorter repetitions)
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/cpu.hpp"
#include "linear/synthetic_layer.hpp"
#include "mixq/format.hpp"
#include "mixq/linear.hpp"
#include "kernels/stream_prefetch.hpp"
#include "support/calibrate.hpp"
#include "support/inputs.hpp"
#include "support/onednn.hpp"
#include "support/run_info.hpp"
#include "support/timing.hpp"

namespace {

using namespace mixq::bench;

struct Ours {
  const char* label;
  const char* format;
  nlohmann::json params;
};

const Ours kOurs[] = {
    {"int8+convrot(G=256)", "int8_tensorwise", {{"convrot", true}, {"convrot_groupsize", 256}}},
    {"w4a4 int4", "convrot_w4a4", {{"convrot_groupsize", 256}}},
    {"w4a4 int8-act", "convrot_w4a4", {{"convrot_groupsize", 256}, {"linear_dtype", "int8"}}},
};

std::vector<float> random_x(int64_t m, int64_t k) { return mixq::bench::random_activations(m * k); }

// Linears over `copies` separate repacked copies of one quantized layer.
struct OurLayers {
  std::unique_ptr<mixq::linear::SyntheticLayer> source;
  mixq::bench::LinearRing copies;
  double weight_bytes = 0;  // bytes the checkpoint stores for the weight + scales
  const mixq::Linear& take() { return copies.take(); }
};

OurLayers make_ours(const Ours& o, int64_t k, int64_t n, int copies) {
  OurLayers out;
  out.source = mixq::linear::make_random_layer(*mixq::find_format(o.format), o.params, n, k, 1, true);
  out.weight_bytes = static_cast<double>(out.source->layer.bytes());
  for (int c = 0; c < copies; ++c) out.copies.push_back(mixq::Linear::create(out.source->layer));
  return out;
}

int copies_for(double bytes) { return mixq::bench::ring_copies(bytes); }

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const double min_s = quick ? 0.05 : 0.15;
  const int reps = quick ? 3 : 7;
  if (mixq::kernels::best_isa() < mixq::kernels::Isa::avx2) {
    std::printf("bench_linear_int: this CPU has no AVX2; nothing to compare\n");
    return 0;
  }
  std::printf("# %s\n", run_header().c_str());
  std::printf("# calibration (same run)\n");
  const Rate peak1 = int8_dot_peak_gops(1), peak2 = int8_dot_peak_gops(2);
  const Rate bw2 = read_bandwidth_gbs(2);
  std::printf("int8 dot peak (%s): 1 thread %.0f GOPS (median %.0f), 2 threads %.0f (median %.0f)\n",
              mixq::kernels::isa_name(mixq::kernels::best_isa()).data(),
              peak1.best, peak1.median, peak2.best, peak2.median);
  const Rate amx1 = int8_amx_peak_gops(1), amx2 = int8_amx_peak_gops(2);
  if (amx1.median > 0)
    std::printf("int8 AMX peak (tdpbsud): 1 thread %.0f GOPS (median %.0f), 2 threads %.0f (median %.0f)\n",
                amx1.best, amx1.median, amx2.best, amx2.median);
  std::printf("read bandwidth, 1 GiB, 2 threads x 4 streams, prefetch %zu B ahead: %.1f GB/s (median %.1f)\n\n",
              mixq::kernels::kStreamPrefetchBytes, bw2.best,
              bw2.median);

  // ---- compute-bound: M = 4096, K = N = 3072 --------------------------------
  const int64_t M = 4096, K = 3072, N = 3072;
  const double ops = 2.0 * M * N * K;
  const auto x = random_x(M, K);
  std::vector<float> y(static_cast<size_t>(M * N));
  std::printf("# M=%ld K=%ld N=%ld (GOPS = 2MNK/t; oneDNN and ours: medians of the same %d alternating rounds)\n", M, K, N,
              side_by_side_rounds(reps));
  // On AMX machines our kernels also run once more limited to AVX-512 VNNI
  // (set_isa), so the AMX speedup is a same-run ratio. Peaks: of the VNNI
  // loop, and of the AMX loop where there is one.
  std::printf("%-26s %7s %10s %8s %12s %10s %10s\n", "kernel", "threads", "GOPS", "ms", "vs oneDNN", "of dot pk",
              "of AMX pk");
  auto of_peak = [](double gops, double peak) {
    return peak > 0 ? fmt::format("{:.0f}%", 100 * gops / peak) : std::string("-");
  };
  std::vector<mixq::kernels::Isa> isas = {mixq::kernels::best_isa()};
  if (isas[0] == mixq::kernels::Isa::amx) isas.push_back(mixq::kernels::Isa::avx512);
  double ours_t[3][3] = {};
  for (int threads : {1, 2}) {
    set_threads(threads);
    // oneDNN's row and ours (per isa) in the same alternating rounds.
    OnednnMatmul dnnl(OnednnType::u8s8_f32, M, K, N);
    std::vector<OurLayers> ours;
    std::vector<std::function<void()>> rows = {[&] { dnnl.run(); }};
    for (mixq::kernels::Isa isa : isas)
      for (int i = 0; i < 3; ++i) {
        mixq::kernels::set_isa(isa);
        ours.push_back(make_ours(kOurs[i], K, N, 1));
        rows.push_back([&, isa, j = ours.size() - 1] {
          mixq::kernels::set_isa(isa);
          ours[j].take().forward(x.data(), M, y.data());
        });
      }
    const std::vector<double> t = time_side_by_side(rows, reps, min_s);
    mixq::kernels::set_isa(isas[0]);
    const double dnnl_gops = ops / t[0] / 1e9;
    const double peak = threads == 1 ? peak1.median : peak2.median;
    const double amx_peak = threads == 1 ? amx1.median : amx2.median;
    std::printf("%-26s %7d %10.0f %8.2f %12s %10s %10s   (%s)\n", "oneDNN u8s8->f32", threads, dnnl_gops,
                t[0] * 1e3, "1.00x", of_peak(dnnl_gops, peak).c_str(), of_peak(dnnl_gops, amx_peak).c_str(),
                dnnl.impl());
    for (size_t j = 0; j < ours.size(); ++j) {
      const int i = static_cast<int>(j % 3);
      if (j < 3) ours_t[i][threads] = t[j + 1];
      const double gops = ops / t[j + 1] / 1e9;
      std::printf("%-26s %7d %10.0f %8.2f %12s %10s %10s   (%s)\n", kOurs[i].label, threads, gops, t[j + 1] * 1e3,
                  ratio(gops, dnnl_gops).c_str(), of_peak(gops, peak).c_str(), of_peak(gops, amx_peak).c_str(),
                  std::string(ours[j].copies[0].kernel_name()).c_str());
    }
  }
  std::printf("thread scaling 1->2 at M=4096:");
  for (int i = 0; i < 3; ++i)
    std::printf("  %s %s", kOurs[i].label, ratio(ours_t[i][1], ours_t[i][2]).c_str());
  std::printf("\n\n");

  // ---- compute-bound at the MiniMax-H3 / FLUX shapes: M = 4096, 2 threads ----
  set_threads(2);
  std::printf("# M=4096 at the H3 / FLUX shapes, 2 threads (our kernel on this CPU's best path)\n");
  std::printf("%-26s %16s %10s %8s %12s   %s\n", "kernel", "KxN", "GOPS", "ms", "vs oneDNN", "impl");
  for (auto [k, n] : {std::pair<int64_t, int64_t>{3072, 12288}, {12288, 3072}, {5376, 21504}}) {
    const double big_ops = 2.0 * M * n * k;
    const auto xb = random_x(M, k);
    std::vector<float> yb(static_cast<size_t>(M * n));
    const std::string shape = std::to_string(k) + "x" + std::to_string(n);
    OnednnMatmul dnnl(OnednnType::u8s8_f32, M, k, n);
    std::vector<OurLayers> ours;  // INT8 ConvRot and W4A4 int4
    std::vector<std::function<void()>> rows = {[&] { dnnl.run(); }};
    for (int i = 0; i < 2; ++i) {
      ours.push_back(make_ours(kOurs[i], k, n, 1));
      rows.push_back([&, i] { ours[i].take().forward(xb.data(), M, yb.data()); });
    }
    const std::vector<double> t = time_side_by_side(rows, reps, min_s);
    const double dnnl_gops = big_ops / t[0] / 1e9;
    std::printf("%-26s %16s %10.0f %8.2f %12s   %s\n", "oneDNN u8s8->f32", shape.c_str(), dnnl_gops, t[0] * 1e3,
                "1.00x", dnnl.impl());
    for (int i = 0; i < 2; ++i) {
      const double gops = big_ops / t[i + 1] / 1e9;
      std::printf("%-26s %16s %10.0f %8.2f %12s   %s\n", kOurs[i].label, shape.c_str(), gops, t[i + 1] * 1e3,
                  ratio(gops, dnnl_gops).c_str(), std::string(ours[i].copies[0].kernel_name()).c_str());
    }
  }
  std::printf("\n");

  // ---- memory-bound: M = 1 ------------------------------------------------------
  set_threads(2);
  mixq::kernels::StreamingRead beside;  // for the read beside each row
  std::printf("# %s\n# M=1, 2 threads, weights from DRAM (copies cycled: a ring >= %dx the %.0f MiB LLC); fraction of the "
              "read bandwidth above (median pass; best pass in the next column) and of a read of the same bytes "
              "timed in the same %d alternating rounds (last column)\n",
              run_header().c_str(), kRingLlcFactor, static_cast<double>(llc_bytes()) / (1 << 20), kBesideRounds);
  std::printf("%-22s %16s %10s %10s %10s %10s %10s %12s\n", "kernel", "KxN", "us", "w GB/s", "of read bw", "GOPS",
              "of best bw", "of read bes.");
  for (auto [k, n] : {std::pair<int64_t, int64_t>{3072, 3072}, {5376, 21504}, {14336, 5376}}) {
    const auto x1 = random_x(1, k);
    std::vector<float> y1(static_cast<size_t>(n));
    {
      const int copies = copies_for(static_cast<double>(k * n));
      OnednnMatmul dnnl(OnednnType::u8s8_f32, 1, k, n, copies);
      // No read beside oneDNN: its OpenMP threads spin on after each call and
      // slowed a read timed right after it by ~1.2x (its rows showed 114-117 %).
      const Timing t = time_calls([&] { dnnl.run(); }, min_s, reps);
      const double gbs = dnnl.weight_bytes() / t.median / 1e9;
      std::printf("%-22s %16s %10.1f %10.1f %9.0f%% %10.1f %9.0f%% %12s\n", "oneDNN u8s8->f32",
                  (std::to_string(k) + "x" + std::to_string(n)).c_str(), t.median * 1e6, gbs, 100 * gbs / bw2.median,
                  2.0 * k * n / t.median / 1e9, 100 * gbs / bw2.best, "-");
    }
    for (const Ours& o : kOurs) {
      const double bytes = o.format == std::string("convrot_w4a4") ? k * n / 2.0 : double(k * n);
      OurLayers ours = make_ours(o, k, n, copies_for(bytes));
      const BesideRead t = time_beside_read(beside, ours.weight_bytes, kBesideRounds, min_s / 2,
                                            [&] { ours.take().forward(x1.data(), 1, y1.data()); });
      const double gbs = ours.weight_bytes / t.call / 1e9;
      std::printf("%-22s %16s %10.1f %10.1f %9.0f%% %10.1f %9.0f%% %11.0f%%\n", o.label,
                  (std::to_string(k) + "x" + std::to_string(n)).c_str(), t.call * 1e6, gbs, 100 * gbs / bw2.median,
                  2.0 * k * n / t.call / 1e9, 100 * gbs / bw2.best, 100 * t.read_fraction());
    }
  }
  return 0;
}
