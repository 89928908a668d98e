// Side-by-side benchmark of the float-family kernels (NVFP4 W4A4, FP8 E4M3,
// MXFP8) against oneDNN on the same shapes, with this machine's int8/bf16 dot
// peaks and read bandwidth measured in the same run (bench/support).
//
//   build/bench/bench_linear_float [--quick]
//
// Compute-bound rows (M = 4096, K = N = 3072, AVX-512 machines): our time
// includes activation quantization; oneDNN's does not (it gets ready u8/bf16
// operands). NVFP4 is compared with oneDNN u8·s8→f32, FP8/MXFP8 with oneDNN
// bf16. Every row runs on the avx512 kernels and again with
// kernels::set_isa(avx2) (the AVX2 kernels on the same machine and shapes).
// No ymm peak is measured here, so an AVX2 row's last column is its time
// against the faster avx512 row of the same format in this run. FP8 and
// MXFP8 run on avx512 twice, once per float dot forced with
// kernels::set_float_dot: "avx512_bf16" (vdpbf16ps) against the bf16 dot
// peak and "avx512_fma" (vfmadd231ps) against the f32 FMA peak; the layers'
// automatic choice (a short probe, kernels::float_dot()) is printed in the
// header. On AMX machines the FP8 / MXFP8 rows also run on Isa::amx
// ("amx_bf16+avx512_fma": AMX-BF16 tiles from 32 rows, the FMA core below;
// the M = 4096 table runs the tiles once).
//
// On every x86 machine (AVX2 too):
//  - "FP8 vs f32": FP8 and MXFP8 layers at M = 4096 K = N = 3072 against the
//    float layer they replace: oneDNN f32 (and bf16) matmul and mixq's own
//    unquantized f32 layer, ratio against the faster of oneDNN f32 / bf16;
//  - "FP8 M = 1": FP8 and MXFP8 layers at the H3 / FLUX shapes (K=3072
//    N=12288, K=12288 N=3072, K=5376 N=21504), weights cycling through >= 1
//    GiB of distinct copies so they come from DRAM; "GB/s" counts the
//    layer's packed bytes (Linear::packed_bytes: 1 B/weight, + 1/32 for
//    MXFP8) against the streaming read bandwidth of this run (best and
//    median pass) and against a read of the same bytes timed in the same
//    alternating rounds (bench::time_beside_read).
// Memory-bound NVFP4 rows (M = 1, AVX-512 machines) as above with 0.5625
// B/weight.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/calibrate.hpp"
#include "kernels/cpu.hpp"
#include "linear/synthetic_layer.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/linear.hpp"
#include "support/calibrate.hpp"
#include "support/inputs.hpp"
#include "support/onednn.hpp"
#include "support/run_info.hpp"
#include "support/timing.hpp"

namespace {

using namespace mixq;

struct Lin {
  std::unique_ptr<linear::SyntheticLayer> layer;
  std::vector<std::unique_ptr<Linear>> copies;
};

Lin make(const char* format, int64_t n, int64_t k, int copies) {
  const FormatTraits* f = std::string(format) == "unquantized" ? &unquantized_format() : find_format(format);
  if (!f) throw Error(std::string("unknown format ") + format);
  Lin l;
  l.layer = linear::make_random_layer(*f, nlohmann::json::object(), n, k, 42, true);
  for (int c = 0; c < copies; ++c) l.copies.push_back(Linear::create(l.layer->layer));
  return l;
}

std::vector<float> random_x(int64_t count) { return bench::random_activations(count); }

using kernels::FloatDot;

struct Peaks {
  double int8 = 0, bf16 = 0, fma = 0;
};

// One row's layer: the float dot forced while it is created (NVFP4 W4A4 and
// the AVX2 kernels do not read it).
Lin make_with(const char* format, int64_t n, int64_t k, int copies, FloatDot dot) {
  kernels::set_float_dot(dot);
  Lin l = make(format, n, k, copies);
  kernels::set_float_dot(std::nullopt);
  return l;
}

void compute_bound(int threads, const Peaks& peaks) {
  const int64_t m = 4096, k = 3072, n = 3072;
  const double ops = 2.0 * m * n * k;
  bench::set_threads(threads);
  const std::vector<float> x = random_x(m * k);
  std::vector<float> y(static_cast<size_t>(m * n));
  bench::OnednnMatmul u8(bench::OnednnType::u8s8_f32, m, k, n);
  bench::OnednnMatmul bf(bench::OnednnType::bf16_f32, m, k, n);
  const double t_u8 = bench::time_calls([&] { u8.run(); }, 0.3, 5).median;
  const double t_bf = bench::time_calls([&] { bf.run(); }, 0.3, 5).median;
  struct Row { const char* format; bool int8; FloatDot dot; };
  const Row rows512[] = {{"nvfp4", true, FloatDot::bf16},
                         {"float8_e4m3fn", false, FloatDot::bf16}, {"float8_e4m3fn", false, FloatDot::fma},
                         {"mxfp8", false, FloatDot::bf16}, {"mxfp8", false, FloatDot::fma}};
  const Row rows2[] = {{"nvfp4", true, FloatDot::fma}, {"float8_e4m3fn", false, FloatDot::fma},
                       {"mxfp8", false, FloatDot::fma}};
  double best512[3] = {1e30, 1e30, 1e30};  // per format (index in rows2)
  auto format_index = [&](const char* f) { return f[0] == 'n' ? 0 : f[0] == 'f' ? 1 : 2; };
  for (kernels::Isa isa : {kernels::Isa::avx512, kernels::Isa::avx2}) {
    kernels::set_isa(isa);  // the Linear picks its kernel at creation
    const bool avx512 = isa == kernels::Isa::avx512;
    const int count = avx512 ? 5 : 3;
    for (int i = 0; i < count; ++i) {
      const Row r = avx512 ? rows512[i] : rows2[i];
      Lin l = make_with(r.format, n, k, 1, r.dot);
      const Linear& lin = *l.copies[0];
      const double t = bench::time_calls([&] { lin.forward(x.data(), m, y.data()); }, 0.3, 5).median;
      const double base = r.int8 ? t_u8 : t_bf;
      const double peak = r.int8 ? peaks.int8 : r.dot == FloatDot::fma ? peaks.fma : peaks.bf16;
      const char* peak_name = r.int8 ? "int8" : r.dot == FloatDot::fma ? "f32 FMA" : "bf16";
      std::string last;
      if (avx512) {
        best512[format_index(r.format)] = std::min(best512[format_index(r.format)], t);
        last = std::to_string(static_cast<int>(100.0 * ops / t / 1e9 / peak + 0.5)) + " % of " + peak_name + " peak";
      } else {
        last = "avx512 time / ours " + bench::ratio(best512[format_index(r.format)], t);
      }
      std::printf("| %-13s | M=%lld K=%lld N=%lld | %d | %-11s | %8.1f ms | %7.0f | %s (%s %.1f ms) | %s |\n",
                  r.format, (long long)m, (long long)k, (long long)n, threads,
                  std::string(lin.kernel_name()).c_str(), t * 1e3, ops / t / 1e9,
                  bench::ratio(base, t).c_str(), r.int8 ? "oneDNN u8s8" : "oneDNN bf16", base * 1e3,
                  last.c_str());
      std::fflush(stdout);
    }
  }
  kernels::set_isa(kernels::best_isa());
}

void memory_bound(int threads, double read_bw, kernels::StreamingRead& beside) {
  bench::set_threads(threads);
  struct Shape { int64_t k, n; };
  for (Shape s : {Shape{3072, 3072}, Shape{5376, 21504}, Shape{14336, 5376}}) {
    const double wbytes = 0.5625 * double(s.k) * double(s.n);
    const int copies = std::max(1, static_cast<int>((512.0 * (1 << 20)) / wbytes + 0.999));
    const std::vector<float> x = random_x(s.k);
    std::vector<float> y(static_cast<size_t>(s.n));
    bench::OnednnMatmul u8(bench::OnednnType::u8s8_f32, 1, s.k, s.n,
                           std::max(1, static_cast<int>((512.0 * (1 << 20)) / (double(s.k) * s.n) + 0.999)));
    const double t_u8 = bench::time_calls([&] { u8.run(); }, 0.3, 7).median;
    for (kernels::Isa isa : {kernels::Isa::avx512, kernels::Isa::avx2}) {
      kernels::set_isa(isa);
      Lin l = make("nvfp4", s.n, s.k, copies);
      size_t next = 0;
      const bench::BesideRead b = bench::time_beside_read(beside, wbytes, bench::kBesideRounds, 0.15, [&] {
        l.copies[next]->forward(x.data(), 1, y.data());
        next = (next + 1) % l.copies.size();
      });
      const double t = b.call, gbs = wbytes / t / 1e9;
      std::printf("| nvfp4 | M=1 K=%lld N=%lld | %d | %-9s | %8.1f us | %5.1f GB/s | %4.0f %% of read BW (%.1f GB/s), %.0f %% of the read beside | oneDNN u8s8 %.1f us (%.1f GB/s of int8 weights) | %s |\n",
                  (long long)s.k, (long long)s.n, threads, std::string(l.copies[0]->kernel_name()).c_str(),
                  t * 1e6, gbs, 100.0 * gbs / read_bw, read_bw, 100.0 * b.read_fraction(), t_u8 * 1e6,
                  u8.weight_bytes() / t_u8 / 1e9, bench::ratio(t_u8, t).c_str());
      std::fflush(stdout);
    }
    kernels::set_isa(kernels::best_isa());
  }
}

// The kernel paths of this machine, each with the float dot it forces on
// avx512 (both cores) or none (avx2).
struct FloatPathRun {
  kernels::Isa isa;
  std::optional<FloatDot> dot;
};
std::vector<FloatPathRun> float_paths() {
  std::vector<FloatPathRun> out;
  if (kernels::best_isa() >= kernels::Isa::amx) out.push_back({kernels::Isa::amx, FloatDot::fma});
  if (kernels::best_isa() >= kernels::Isa::avx512) {
    if (kernels::has_avx512_vnni_bf16()) out.push_back({kernels::Isa::avx512, FloatDot::bf16});
    out.push_back({kernels::Isa::avx512, FloatDot::fma});
  }
  out.push_back({kernels::Isa::avx2, std::nullopt});
  return out;
}

std::string kernel_of(const Lin& l) { return std::string(l.copies[0]->kernel_name()); }

// FP8 / MXFP8 at M = 4096 against the f32 layer they replace. Every row,
// oneDNN's and ours, is timed in the same alternating rounds
// (bench::time_side_by_side; kM4096Rounds of at least 0.3 s each).
constexpr int kM4096Rounds = 5;

void fp8_vs_f32(int threads) {
  const int64_t m = 4096, k = 3072, n = 3072;
  const double ops = 2.0 * m * n * k;
  bench::set_threads(threads);
  const std::vector<float> x = random_x(m * k);
  std::vector<float> y(static_cast<size_t>(m * n));
  struct Row {
    std::string format, kernel;  // format: "oneDNN f32" / "oneDNN bf16" for the baselines
  };
  std::vector<Row> rows;
  std::vector<std::function<void()>> calls;  // one per row
  bench::OnednnMatmul f32(bench::OnednnType::f32_f32, m, k, n);
  rows.push_back({"oneDNN f32", f32.impl()});
  calls.push_back([&] { f32.run(); });
  std::unique_ptr<bench::OnednnMatmul> bf;  // oneDNN has no bf16 matmul without AVX-512
  std::string bf_error;
  try {
    bf = std::make_unique<bench::OnednnMatmul>(bench::OnednnType::bf16_f32, m, k, n);
    rows.push_back({"oneDNN bf16", bf->impl()});
    calls.push_back([&] { bf->run(); });
  } catch (const std::exception& e) {
    bf_error = e.what();
  }
  std::vector<Lin> layers;
  for (const FloatPathRun& p : float_paths()) {
    kernels::set_isa(p.isa);
    for (const char* format : {"float8_e4m3fn", "mxfp8", "unquantized"}) {
      if (p.dot == FloatDot::bf16 && format[0] == 'u') continue;  // f32 layers run the FMA core
      layers.push_back(make_with(format, n, k, 1, p.dot.value_or(FloatDot::fma)));
      const Linear& lin = *layers.back().copies[0];
      rows.push_back({format, kernel_of(layers.back())});
      calls.push_back([&lin, &x, &y, m, isa = p.isa] {
        kernels::set_isa(isa);
        lin.forward(x.data(), m, y.data());
      });
    }
  }
  const std::vector<double> t = bench::time_side_by_side(calls, kM4096Rounds, 0.3);
  kernels::set_isa(kernels::best_isa());

  double base = 1e30;
  bool base_f32 = true;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].format.starts_with("oneDNN")) continue;
    std::printf("| %s | M=%lld K=%lld N=%lld | %d | %s | %8.1f ms | %7.0f | |\n", rows[i].format.c_str(),
                (long long)m, (long long)k, (long long)n, threads, rows[i].kernel.c_str(), t[i] * 1e3,
                ops / t[i] / 1e9);
    if (t[i] < base) base = t[i], base_f32 = rows[i].format == "oneDNN f32";
  }
  if (!bf)
    std::printf("| oneDNN bf16 | M=%lld K=%lld N=%lld | %d | not run: %s | | | |\n", (long long)m, (long long)k,
                (long long)n, threads, bf_error.c_str());
  // The rows on AMX-BF16 tiles also against tdpbf16ps's own same-run peak.
  const double tile_peak = bench::bf16_amx_peak_gflops(threads).median;
  if (tile_peak > 0) std::printf("| tdpbf16ps peak | (calibration loop) | %d | | | %7.0f | |\n", threads, tile_peak);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].format.starts_with("oneDNN")) continue;
    std::string of_peak;
    if (rows[i].kernel.starts_with("amx_bf16") && tile_peak > 0)
      of_peak = "; " + std::to_string(static_cast<int>(100.0 * ops / t[i] / 1e9 / tile_peak + 0.5)) +
                " % of the tdpbf16ps peak";
    std::printf("| %-13s | M=%lld K=%lld N=%lld | %d | %-11s | %8.1f ms | %7.0f | %s vs the faster oneDNN (%s)%s |\n",
                rows[i].format.c_str(), (long long)m, (long long)k, (long long)n, threads, rows[i].kernel.c_str(),
                t[i] * 1e3, ops / t[i] / 1e9, bench::ratio(base, t[i]).c_str(), base_f32 ? "f32" : "bf16",
                of_peak.c_str());
  }
  std::fflush(stdout);
}

// FP8 / MXFP8 at M = 1 from DRAM (1 B/weight) against the read bandwidth.
void fp8_streaming(int threads, const kernels::Rate& read_bw, kernels::StreamingRead& beside) {
  bench::set_threads(threads);
  struct Shape { int64_t k, n; };
  for (Shape s : {Shape{3072, 12288}, Shape{12288, 3072}, Shape{5376, 21504}}) {
    const std::vector<float> x = random_x(s.k);
    std::vector<float> y(static_cast<size_t>(s.n));
    for (const FloatPathRun& p : float_paths()) {
      kernels::set_isa(p.isa);
      for (const char* format : {"float8_e4m3fn", "mxfp8"}) {
        const int copies = std::max(2, static_cast<int>(double(1 << 30) / (1.03 * s.k * s.n) + 0.999));
        Lin l = make_with(format, s.n, s.k, copies, p.dot.value_or(FloatDot::fma));
        const double wbytes = static_cast<double>(l.copies[0]->packed_bytes().value_or(0));
        size_t next = 0;
        const bench::BesideRead t = bench::time_beside_read(beside, wbytes, bench::kBesideRounds, 0.15, [&] {
          l.copies[next]->forward(x.data(), 1, y.data());
          next = (next + 1) % l.copies.size();
        });
        const double gbs = wbytes / t.call / 1e9;
        std::printf("| %-13s | M=1 K=%lld N=%lld | %d | %-11s | %8.1f us | %.3f B/weight | %5.1f GB/s | %4.0f %% of read BW median, %4.0f %% of its best pass (%.1f / %.1f GB/s), %.0f %% of the read beside |\n",
                    format, (long long)s.k, (long long)s.n, threads, kernel_of(l).c_str(), t.call * 1e6,
                    wbytes / (double(s.k) * s.n), gbs, 100.0 * gbs / read_bw.median, 100.0 * gbs / read_bw.best,
                    read_bw.median, read_bw.best, 100.0 * t.read_fraction());
        std::fflush(stdout);
      }
    }
  }
  kernels::set_isa(kernels::best_isa());
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (kernels::best_isa() < kernels::Isa::avx2) {
    std::printf("bench_linear_float: needs AVX2 (the fast float kernels); skipping\n");
    return 0;
  }
  const int threads = 2;
  std::printf("# %s\n", bench::run_header().c_str());
  // The kernels' own read pattern (kernels/calibrate.hpp: 4 prefetched streams a thread).
  bench::set_threads(threads);
  kernels::StreamingRead beside;  // the calibration's buffer, read again beside each M = 1 row
  const kernels::Rate read_bw = bench::read_bandwidth_gbs(beside);
  std::printf("# read bandwidth, 1 GiB, %d threads x 4 streams: %.1f GB/s best pass, %.1f median\n", threads,
              read_bw.best, read_bw.median);
  std::fflush(stdout);
  std::printf("\n# M = 4096: every row the median of %d alternating rounds\n", kM4096Rounds);
  std::printf("| format | shape | threads | kernel | time | G(FL)OPS | vs oneDNN f32 / bf16 |\n|---|---|---|---|---|---|---|\n");
  fp8_vs_f32(threads);
  std::printf("\n| format | shape | threads | kernel | time | packed bytes | weight stream | vs read bandwidth |\n|---|---|---|---|---|---|---|---|\n");
  fp8_streaming(threads, read_bw, beside);
  if (kernels::best_isa() < kernels::Isa::avx512 || !bench::has_avx512_vnni_bf16()) {
    std::printf("\n# no AVX-512 VNNI + BF16: the NVFP4 and peak-fraction tables need them; skipped\n");
    return 0;
  }
  const auto int8_peak = bench::int8_dot_peak_gops(threads);
  const auto bf16_peak = bench::bf16_dot_peak_gflops(threads);
  const auto fma_peak = kernels::fma_f32_peak_gflops(threads);
  std::printf("\n# same-run limits (%d threads): int8 VNNI %.0f GOPS, bf16 dot %.0f GFLOPS, f32 FMA %.0f GFLOPS\n",
              threads, int8_peak.median, bf16_peak.median, fma_peak.median);
  const kernels::FloatDotProbe probe = kernels::probe_float_dot();
  std::printf("# float dot probe (1 thread): vdpbf16ps %.0f GFLOPS, vfmadd231ps %.0f GFLOPS; layers' automatic choice: %s\n",
              probe.bf16_gflops, probe.fma_gflops, std::string(kernels::float_dot_name(kernels::float_dot())).c_str());
  Peaks one;  // 1 thread (full run only)
  if (!quick) {
    one = {bench::int8_dot_peak_gops(1).median, bench::bf16_dot_peak_gflops(1).median,
           kernels::fma_f32_peak_gflops(1).median};
    std::printf("# same-run limits (1 thread): int8 VNNI %.0f GOPS, bf16 dot %.0f GFLOPS, f32 FMA %.0f GFLOPS (median)\n\n",
                one.int8, one.bf16, one.fma);
  }
  if (quick) std::printf("\n");
  std::printf("| format | shape | threads | kernel | time | G(FL)OPS | ours vs oneDNN (same shape) | fraction of peak (avx512) / vs avx512 (avx2) |\n|---|---|---|---|---|---|---|---|\n");
  compute_bound(threads, {int8_peak.median, bf16_peak.median, fma_peak.median});
  if (!quick) compute_bound(1, one);
  std::printf("\n| format | shape | threads | kernel | time | weight stream | vs read bandwidth | oneDNN | oneDNN time / ours |\n|---|---|---|---|---|---|---|---|---|\n");
  memory_bound(threads, read_bw.median, beside);
  return 0;
}
