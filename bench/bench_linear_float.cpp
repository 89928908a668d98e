// Side-by-side benchmark of the float-family kernels (NVFP4 W4A4, FP8 E4M3,
// MXFP8) against oneDNN on the same shapes, with this machine's int8/bf16 dot
// peaks and read bandwidth measured in the same run (bench/support).
//
//   build/bench/bench_linear_float [--quick]
//
// Compute-bound rows (M = 4096, K = N = 3072): our time includes activation
// quantization; oneDNN's does not (it gets ready u8/bf16 operands). NVFP4 is
// compared with oneDNN u8·s8→f32, FP8/MXFP8 with oneDNN bf16. Memory-bound
// rows (M = 1): weights cycle through >= 512 MiB of distinct copies so they
// come from DRAM; "GB/s" counts our packed weight bytes (0.5625 B/weight for
// NVFP4) and is compared with the streaming read bandwidth of this run.
//
// Every row runs on the avx512 kernels and again with kernels::set_isa(avx2)
// (the AVX2 kernels on the same machine and shapes). No ymm peak is measured
// here, so an AVX2 row's last column is its time against the faster avx512
// row of the same format in this run.
// FP8 and MXFP8 run on avx512 twice, once per float dot forced with
// kernels::set_float_dot: "avx512_bf16" (vdpbf16ps) against the bf16 dot peak
// and "avx512_fma" (bf16 panels widened, vfmadd231ps) against the f32 FMA peak,
// both peaks measured in this run; the layers' automatic choice (a short
// probe, kernels::float_dot()) is printed in the header. The M = 1 table has
// both FP8 rows too (2 B/weight bf16 panels) against oneDNN bf16 at M = 1.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
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
#include "support/timing.hpp"

namespace {

using namespace mixq;

struct Lin {
  std::unique_ptr<linear::SyntheticLayer> layer;
  std::vector<std::unique_ptr<Linear>> copies;
};

Lin make(const char* format, int64_t n, int64_t k, int copies) {
  const FormatTraits* f = find_format(format);
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

void memory_bound(int threads, double read_bw) {
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
      const double t = bench::time_calls([&] {
        l.copies[next]->forward(x.data(), 1, y.data());
        next = (next + 1) % l.copies.size();
      }, 0.3, 7).median;
      const double gbs = wbytes / t / 1e9;
      std::printf("| nvfp4 | M=1 K=%lld N=%lld | %d | %-9s | %8.1f us | %5.1f GB/s | %4.0f %% of read BW (%.1f GB/s) | oneDNN u8s8 %.1f us (%.1f GB/s of int8 weights) | %s |\n",
                  (long long)s.k, (long long)s.n, threads, std::string(l.copies[0]->kernel_name()).c_str(),
                  t * 1e6, gbs, 100.0 * gbs / read_bw, read_bw, t_u8 * 1e6, u8.weight_bytes() / t_u8 / 1e9,
                  bench::ratio(t_u8, t).c_str());
      std::fflush(stdout);
    }
    kernels::set_isa(kernels::best_isa());
  }
}

// FP8 E4M3 at M = 1 on both avx512 cores (2 B/weight bf16 panels, from DRAM)
// against oneDNN bf16 (2 B/weight too).
void memory_bound_fp8(int threads, double read_bw) {
  bench::set_threads(threads);
  struct Shape { int64_t k, n; };
  for (Shape s : {Shape{3072, 3072}, Shape{5376, 21504}, Shape{14336, 5376}}) {
    const double wbytes = 2.0 * double(s.k) * double(s.n);
    const int copies = std::max(1, static_cast<int>((512.0 * (1 << 20)) / wbytes + 0.999));
    const std::vector<float> x = random_x(s.k);
    std::vector<float> y(static_cast<size_t>(s.n));
    bench::OnednnMatmul bf(bench::OnednnType::bf16_f32, 1, s.k, s.n, copies);
    const double t_bf = bench::time_calls([&] { bf.run(); }, 0.3, 7).median;
    for (FloatDot dot : {FloatDot::bf16, FloatDot::fma}) {
      Lin l = make_with("float8_e4m3fn", s.n, s.k, copies, dot);
      size_t next = 0;
      const double t = bench::time_calls([&] {
        l.copies[next]->forward(x.data(), 1, y.data());
        next = (next + 1) % l.copies.size();
      }, 0.3, 7).median;
      const double gbs = wbytes / t / 1e9;
      std::printf("| float8_e4m3fn | M=1 K=%lld N=%lld | %d | %-11s | %8.1f us | %5.1f GB/s | %4.0f %% of read BW (%.1f GB/s) | oneDNN bf16 %.1f us (%.1f GB/s of bf16 weights) | %s |\n",
                  (long long)s.k, (long long)s.n, threads, std::string(l.copies[0]->kernel_name()).c_str(),
                  t * 1e6, gbs, 100.0 * gbs / read_bw, read_bw, t_bf * 1e6, bf.weight_bytes() / t_bf / 1e9,
                  bench::ratio(t_bf, t).c_str());
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (kernels::best_isa() != kernels::Isa::avx512 || !bench::has_avx512_vnni_bf16()) {
    std::printf("bench_linear_float: needs AVX-512 VNNI + BF16 (the fast float kernels); skipping\n");
    return 0;
  }
  const int threads = 2;
  const auto int8_peak = bench::int8_vnni_peak_gops(threads);
  const auto bf16_peak = bench::bf16_dot_peak_gflops(threads);
  const auto fma_peak = kernels::fma_f32_peak_gflops(threads);
  const auto read_bw = bench::read_bandwidth_gbs(threads);
  std::printf("# same-run limits (%d threads): int8 VNNI %.0f GOPS, bf16 dot %.0f GFLOPS, f32 FMA %.0f GFLOPS, read %.1f GB/s (median)\n",
              threads, int8_peak.median, bf16_peak.median, fma_peak.median, read_bw.median);
  const kernels::FloatDotProbe probe = kernels::probe_float_dot();
  std::printf("# float dot probe (1 thread): vdpbf16ps %.0f GFLOPS, vfmadd231ps %.0f GFLOPS; layers' automatic choice: %s\n",
              probe.bf16_gflops, probe.fma_gflops, std::string(kernels::float_dot_name(kernels::float_dot())).c_str());
  Peaks one;  // 1 thread (full run only)
  if (!quick) {
    one = {bench::int8_vnni_peak_gops(1).median, bench::bf16_dot_peak_gflops(1).median,
           kernels::fma_f32_peak_gflops(1).median};
    std::printf("# same-run limits (1 thread): int8 VNNI %.0f GOPS, bf16 dot %.0f GFLOPS, f32 FMA %.0f GFLOPS (median)\n\n",
                one.int8, one.bf16, one.fma);
  }
  if (quick) std::printf("\n");
  std::printf("| format | shape | threads | kernel | time | G(FL)OPS | ours vs oneDNN (same shape) | fraction of peak (avx512) / vs avx512 (avx2) |\n|---|---|---|---|---|---|---|---|\n");
  compute_bound(threads, {int8_peak.median, bf16_peak.median, fma_peak.median});
  if (!quick) compute_bound(1, one);
  std::printf("\n| format | shape | threads | kernel | time | weight stream | vs read bandwidth | oneDNN | oneDNN time / ours |\n|---|---|---|---|---|---|---|---|---|\n");
  memory_bound(threads, read_bw.median);
  memory_bound_fp8(threads, read_bw.median);
  return 0;
}
