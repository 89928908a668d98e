// Side-by-side: the three "more" formats, NVFP4 W4A4 and our ConvRot W4A4
// (SVDQuant's reference) against oneDNN on the same shapes, and against this
// machine's int8 dot / bf16 dot / f32 FMA peaks and read bandwidth measured
// in the same run (bench/support):
//   asym_w4a8_int8 (4-bit codes decoded per tile inside the INT8+ConvRot
//                   kernels) vs oneDNN u8·s8→f32,
//   awq_w4a16      (4-bit codes decoded in registers to bf16 for `vdpbf16ps`,
//                   or to f32 for `vfmadd231ps`: both rows, kernels::set_float_dot)
//                                                                vs oneDNN bf16·bf16→f32,
//   svdquant_w4a4  (int4 VNNI main branch + rank-32 low-rank)    vs oneDNN u8·s8→f32,
//   nvfp4 and convrot_w4a4 (int4 activations)                   vs oneDNN u8·s8→f32.
// Without AVX-512 BF16 (AVX2 CPUs) the bf16 rows are not run: AWQ's f32 FMA
// row is compared with oneDNN f32·f32→f32 and its FMA peak instead.
// Our times INCLUDE everything the layer does per call (W4A8: Hadamard
// rotation + per-token int8 quantization; AWQ: x → bf16 and group sums of x;
// SVDQuant: smoothing, per-(row, 64-group) int4 quantization, x·proj_down);
// oneDNN gets ready u8 / bf16 activations. The calibration also measures the
// zmm f32 FMA peak: the AWQ fma row's "of peak" is against it, the bf16 row's
// against the bf16 dot peak (the layer's automatic choice is the faster of the
// two instructions on this core, kernels::float_dot()).
//   M = 4096, K = N = 3072 at 1 and 2 threads (compute-bound);
//   M = 1 at K = N = 3072, K = 5376 N = 21504, K = 14336 N = 5376 (2 threads,
//   weights cycled through a ring of copies >= 16x the last-level cache so they come from DRAM).
// At M = 1, "w GB/s" counts the bytes the kernel streams per call: what the
// Linear holds (Linear::packed_bytes: codes, per-group parameters, bias);
// the last column is its fraction of a read of the same bytes timed in the
// same alternating rounds (bench::time_beside_read).
// Usage: bench_linear_more [--quick]   (--quick: fewer, shorter repetitions)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "formats/svdquant.hpp"
#include "kernels/calibrate.hpp"
#include "kernels/cpu.hpp"
#include "linear/synthetic_layer.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/linear.hpp"
#include "mixq/numeric.hpp"
#include "kernels/stream_prefetch.hpp"
#include "support/calibrate.hpp"
#include "support/inputs.hpp"
#include "support/onednn.hpp"
#include "support/run_info.hpp"
#include "support/svdquant_layer.hpp"
#include "support/timing.hpp"

namespace {

using namespace mixq::bench;

constexpr int64_t kSvdRank = 32;  // nunchaku's usual rank

enum class Kind { w4a8, awq, svdquant };  // w4a8: any format made by the format table

using mixq::kernels::FloatDot;

struct Ours {
  const char* label;
  Kind kind;
  const char* format;
  OnednnType baseline;
  FloatDot dot;  // forced while the layer is created (only the float family reads it)
};

const Ours kOurs[] = {
    {"w4a8 (int8+convrot)", Kind::w4a8, "asym_w4a8_int8", OnednnType::u8s8_f32, FloatDot::bf16},
    {"awq w4a16 (bf16 dot)", Kind::awq, "awq_w4a16", OnednnType::bf16_f32, FloatDot::bf16},
    {"awq w4a16 (f32 fma)", Kind::awq, "awq_w4a16", OnednnType::bf16_f32, FloatDot::fma},
    {"svdquant w4a4 (r=32)", Kind::svdquant, "svdquant_w4a4", OnednnType::u8s8_f32, FloatDot::bf16},
    {"convrot w4a4 (int4)", Kind::w4a8, "convrot_w4a4", OnednnType::u8s8_f32, FloatDot::bf16},
    {"nvfp4 w4a4", Kind::w4a8, "nvfp4", OnednnType::u8s8_f32, FloatDot::bf16},
};
constexpr int kNumOurs = sizeof(kOurs) / sizeof(kOurs[0]);

const char* baseline_name(OnednnType t) {
  return t == OnednnType::u8s8_f32 ? "oneDNN u8s8->f32" : t == OnednnType::bf16_f32 ? "oneDNN bf16->f32" : "oneDNN f32->f32";
}

// AVX-512 BF16 here: the bf16 rows run, and float formats compare with oneDNN bf16.
bool bf16_dot() { return mixq::kernels::best_isa() >= mixq::kernels::Isa::avx512 && has_avx512_vnni_bf16(); }
bool runs(const Ours& o) { return bf16_dot() || o.baseline == OnednnType::u8s8_f32 || o.dot == FloatDot::fma; }
OnednnType baseline_of(const Ours& o) {
  return o.baseline == OnednnType::u8s8_f32 || bf16_dot() ? o.baseline : OnednnType::f32_f32;
}

std::vector<float> random_x(int64_t m, int64_t k) { return mixq::bench::random_activations(m * k); }

// Linears over `copies` separate repacked copies of one quantized layer.
// `streamed`: the bytes one M = 1 call reads, i.e. what the Linear holds
// (Linear::packed_bytes: packed weights, scales, bias; the checkpoint's bytes
// for a layer kind that does not count them).
struct OurLayers {
  std::unique_ptr<mixq::linear::SyntheticLayer> synthetic;
  std::unique_ptr<SvdLayer> svd;
  mixq::bench::LinearRing copies;
  double streamed = 0;
  const mixq::Linear& take() { return copies.take(); }
};

// One Linear, or (ring) as many copies as make a ring >= kRingLlcFactor x the LLC.
OurLayers make_ours(const Ours& o, int64_t k, int64_t n, bool ring) {
  OurLayers out;
  const mixq::Layer* layer = nullptr;
  if (o.kind == Kind::svdquant) {
    out.svd = make_svdquant(k, n, kSvdRank);
    layer = &out.svd->layer;
  } else {
    const mixq::FormatTraits* f = mixq::find_format(o.format);
    if (!f) mixq::fail("bench_linear_more: format {} is not in the table", o.format);
    out.synthetic = mixq::linear::make_random_layer(*f, nlohmann::json::object(), n, k, 1, true);
    layer = &out.synthetic->layer;
  }
  mixq::kernels::set_float_dot(o.dot);
  out.copies.push_back(mixq::Linear::create(*layer));
  out.streamed = static_cast<double>(out.copies[0].packed_bytes().value_or(layer->bytes()));
  const int copies = ring ? mixq::bench::ring_copies(out.streamed) : 1;
  for (int c = 1; c < copies; ++c) out.copies.push_back(mixq::Linear::create(*layer));
  mixq::kernels::set_float_dot(std::nullopt);
  return out;
}

int copies_for(double bytes) { return mixq::bench::ring_copies(bytes); }

std::string kxn(int64_t k, int64_t n) { return std::to_string(k) + "x" + std::to_string(n); }

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const double min_s = quick ? 0.05 : 0.15;
  const int reps = quick ? 3 : 7;
  if (mixq::kernels::best_isa() < mixq::kernels::Isa::avx2) {
    std::printf("bench_linear_more: this CPU has no AVX2 (no fast kernels); nothing to compare\n");
    return 0;
  }
  const OnednnType float_baseline = bf16_dot() ? OnednnType::bf16_f32 : OnednnType::f32_f32;
  std::printf("# %s\n", run_header().c_str());
  std::printf("# calibration (same run)\n");
  const Rate ipeak1 = int8_dot_peak_gops(1), ipeak2 = int8_dot_peak_gops(2);
  const Rate bpeak1 = bf16_dot() ? bf16_dot_peak_gflops(1) : Rate{}, bpeak2 = bf16_dot() ? bf16_dot_peak_gflops(2) : Rate{};
  const Rate fpeak1 = mixq::kernels::fma_f32_peak_gflops(1), fpeak2 = mixq::kernels::fma_f32_peak_gflops(2);
  const Rate bw2 = read_bandwidth_gbs(2);
  std::printf("int8 dot peak:  1 thread %.0f GOPS (median %.0f), 2 threads %.0f (median %.0f)\n", ipeak1.best,
              ipeak1.median, ipeak2.best, ipeak2.median);
  if (bf16_dot())
    std::printf("bf16 dot peak:  1 thread %.0f GFLOPS (median %.0f), 2 threads %.0f (median %.0f)\n", bpeak1.best,
                bpeak1.median, bpeak2.best, bpeak2.median);
  else
    std::printf("bf16 dot: none (no AVX-512 BF16): the bf16 rows are not run, AWQ's f32 row is against oneDNN f32\n");
  std::printf("f32 FMA peak:   1 thread %.0f GFLOPS (median %.0f), 2 threads %.0f (median %.0f)\n", fpeak1.best,
              fpeak1.median, fpeak2.best, fpeak2.median);
  std::printf("float dot in force (automatic: the faster instruction, probed): %s\n",
              std::string(mixq::kernels::float_dot_name(mixq::kernels::float_dot())).c_str());
  std::printf("read bandwidth, 1 GiB, 2 threads x 4 streams, prefetch %zu B ahead: %.1f GB/s (median %.1f)\n\n",
              mixq::kernels::kStreamPrefetchBytes, bw2.best, bw2.median);

  // ---- compute-bound: M = 4096, K = N = 3072 --------------------------------
  const int64_t M = 4096, K = 3072, N = 3072;
  const double ops = 2.0 * M * N * K;
  const auto x = random_x(M, K);
  std::vector<float> y(static_cast<size_t>(M * N));
  std::printf("# M=%ld K=%ld N=%ld (G(FL)OPS = 2MNK/t; oneDNN and ours: medians of the same %d alternating\n"
              "# rounds; int8 peak for W4A8/SVDQuant/W4A4/NVFP4, bf16 dot / f32 FMA peak for AWQ's two rows;\n"
              "# SVDQuant's count excludes its low-rank branch)\n",
              M, K, N, side_by_side_rounds(reps));
  std::printf("%-22s %7s %10s %8s %12s %10s\n", "kernel", "threads", "G(FL)OPS", "ms", "vs oneDNN", "of peak");
  double ours_t[kNumOurs][3] = {};
  for (int threads : {1, 2}) {
    set_threads(threads);
    // oneDNN's rows and ours in the same alternating rounds.
    const OnednnType types[2] = {OnednnType::u8s8_f32, float_baseline};
    std::vector<std::unique_ptr<OnednnMatmul>> dnnl;
    std::vector<std::function<void()>> rows;
    for (OnednnType type : types) {
      dnnl.push_back(std::make_unique<OnednnMatmul>(type, M, K, N));
      rows.push_back([d = dnnl.back().get()] { d->run(); });
    }
    std::vector<OurLayers> ours;
    std::vector<int> which;  // kOurs index of each of ours
    for (int i = 0; i < kNumOurs; ++i) {
      if (!runs(kOurs[i])) continue;
      ours.push_back(make_ours(kOurs[i], K, N, false));
      which.push_back(i);
      rows.push_back([&, j = ours.size() - 1] { ours[j].take().forward(x.data(), M, y.data()); });
    }
    const std::vector<double> t = time_side_by_side(rows, reps, min_s);
    double base_gops[2] = {};
    for (int b = 0; b < 2; ++b) {
      const bool int8 = types[b] == OnednnType::u8s8_f32;
      const double gops = ops / t[b] / 1e9;
      const double peak = int8                            ? (threads == 1 ? ipeak1 : ipeak2).median
                          : types[b] == OnednnType::bf16_f32 ? (threads == 1 ? bpeak1 : bpeak2).median
                                                             : (threads == 1 ? fpeak1 : fpeak2).median;
      base_gops[int8 ? 0 : 1] = gops;
      std::printf("%-22s %7d %10.0f %8.2f %12s %9.0f%%   (%s)\n", baseline_name(types[b]), threads, gops, t[b] * 1e3,
                  "1.00x", 100 * gops / peak, dnnl[b]->impl());
    }
    for (size_t j = 0; j < ours.size(); ++j) {
      const int i = which[j];
      const double tj = t[2 + j];
      const bool int8 = kOurs[i].baseline == OnednnType::u8s8_f32;
      ours_t[i][threads] = tj;
      const double gops = ops / tj / 1e9;
      const bool fma = !int8 && kOurs[i].dot == FloatDot::fma;
      const double peak = int8  ? (threads == 1 ? ipeak1 : ipeak2).median
                          : fma ? (threads == 1 ? fpeak1 : fpeak2).median
                                : (threads == 1 ? bpeak1 : bpeak2).median;
      std::printf("%-22s %7d %10.0f %8.2f %12s %9.0f%%   (%s vs %s)\n", kOurs[i].label, threads, gops, tj * 1e3,
                  ratio(gops, base_gops[int8 ? 0 : 1]).c_str(), 100 * gops / peak,
                  std::string(ours[j].copies[0].kernel_name()).c_str(), baseline_name(baseline_of(kOurs[i])));
    }
    std::fflush(stdout);
  }
  std::printf("thread scaling 1->2 at M=4096:");
  for (int i = 0; i < kNumOurs; ++i)
    if (runs(kOurs[i])) std::printf("  %s %s", kOurs[i].label, ratio(ours_t[i][1], ours_t[i][2]).c_str());
  std::printf("\n\n");

  // ---- memory-bound: M = 1 ------------------------------------------------------
  set_threads(2);
  mixq::kernels::StreamingRead beside;  // for the read beside each row
  std::printf("# %s\n# M=1, 2 threads, weights from DRAM (copies cycled: a ring >= %dx the %.0f MiB LLC); fraction of the "
              "read bandwidth above (median pass; best pass in the next column) and of a read of the same bytes "
              "timed in the same %d alternating rounds (last column)\n",
              run_header().c_str(), kRingLlcFactor, static_cast<double>(llc_bytes()) / (1 << 20), kBesideRounds);
  std::printf("%-22s %16s %10s %8s %10s %10s %12s %10s %12s\n", "kernel", "KxN", "us", "B/weight", "w GB/s",
              "of read bw", "oneDNN/ours", "of best bw", "of read bes.");
  for (auto [k, n] : {std::pair<int64_t, int64_t>{3072, 3072}, {5376, 21504}, {14336, 5376}}) {
    const auto x1 = random_x(1, k);
    std::vector<float> y1(static_cast<size_t>(n));
    double base_us[2] = {};
    for (OnednnType type : {OnednnType::u8s8_f32, float_baseline}) {
      const double bytes_per = type == OnednnType::u8s8_f32 ? 1.0 : type == OnednnType::bf16_f32 ? 2.0 : 4.0;
      OnednnMatmul dnnl(type, 1, k, n, copies_for(bytes_per * double(k) * double(n)));
      // No read beside oneDNN: its OpenMP threads spin on after each call and
      // slow a read timed right after it (bench_linear_int says by how much).
      const Timing t = time_calls([&] { dnnl.run(); }, min_s, reps);
      base_us[type == OnednnType::u8s8_f32 ? 0 : 1] = t.median * 1e6;
      const double gbs = dnnl.weight_bytes() / t.median / 1e9;
      std::printf("%-22s %16s %10.1f %8.2f %10.1f %9.0f%% %12s %9.0f%% %12s\n", baseline_name(type),
                  kxn(k, n).c_str(), t.median * 1e6, dnnl.weight_bytes() / (double(k) * double(n)), gbs,
                  100 * gbs / bw2.median, "1.00x", 100 * gbs / bw2.best, "-");
      std::fflush(stdout);
    }
    for (const Ours& o : kOurs) {
      if (!runs(o)) continue;
      OurLayers ours = make_ours(o, k, n, true);
      const double bytes = ours.streamed;
      const BesideRead t = time_beside_read(beside, bytes, kBesideRounds, min_s / 2,
                                            [&] { ours.take().forward(x1.data(), 1, y1.data()); });
      const double gbs = bytes / t.call / 1e9;
      const double base = base_us[o.baseline == OnednnType::u8s8_f32 ? 0 : 1];
      std::printf("%-22s %16s %10.1f %8.3f %10.1f %9.0f%% %12s %9.0f%% %11.0f%%\n", o.label, kxn(k, n).c_str(),
                  t.call * 1e6, bytes / (double(k) * double(n)), gbs, 100 * gbs / bw2.median,
                  ratio(base, t.call * 1e6).c_str(), 100 * gbs / bw2.best, 100 * t.read_fraction());
      std::fflush(stdout);
    }
  }
  return 0;
}
