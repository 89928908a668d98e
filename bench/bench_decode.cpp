// M = 1 (decode) for every format: each format of the table that quantizes
// (default parameters) plus svdquant_w4a4 (no quantizer: a random rank-32
// layer, support/svdquant_layer.hpp), at the shapes of issue 14 §2
// (K = 3072 N = 12288, K = 12288 N = 3072, K = 5376 N = 21504), 2 threads.
// Weights cycle through a ring of copies >= kRingLlcFactor times the
// last-level cache (support/run_info.hpp), so every call reads them from DRAM.
// "stored GB/s" counts the bytes the format stores for the layer (its
// checkpoint tensors: codes, scales, bias), the figure the target is set in;
// it is reported as a fraction of a read of the same number of bytes from
// DRAM timed beside the layer's calls ("of read beside": alternating rounds
// of a call and a kernels::StreamingRead window, so both see the same phase
// of a shared host's memory), and of the read bandwidth calibrated once at
// the start of the run, against its median and its best pass. Both reads are
// done the way the streaming kernels read (4 streams per thread, software
// prefetch at kernels::kStreamPrefetchBytes).
// A format whose Linear, built from a mapped checkpoint file, reads its
// weight in place (Linear::reads_file_in_place: INT8, ConvRot W4A4) gets a second row, "in
// place": its ring is of separate files (written to the temp directory,
// mapped, then unlinked), the path a real checkpoint takes; the first row is
// the packed copy a caller's in-memory tensors get.
//
//   bench_decode [--quick] [--threads N] [--format NAME ..] [--shape KxN ..]
//                [--prefetch-sweep]
//   --quick           3 shorter repetitions (still >= 5 timed calls per point)
//   --format NAME     only these formats (repeatable; "svdquant_w4a4" included)
//   --shape KxN       other shapes (repeatable)
//   --prefetch-sweep  first, the calibration read at software-prefetch
//                     distances 0 (hardware prefetchers only) to 8 KiB
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/calibrate.hpp"
#include "kernels/stream_prefetch.hpp"
#include "linear/synthetic_layer.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/linear.hpp"
#include "support/args.hpp"
#include "support/inputs.hpp"
#include "support/run_info.hpp"
#include "support/svdquant_layer.hpp"
#include "support/timing.hpp"

namespace {

using namespace mixq::bench;

struct Options : BenchArgs {
  bool sweep = false;
};

Options parse(int argc, char** argv) {
  Options o;
  static_cast<BenchArgs&>(o) = parse_args("bench_decode", argc, argv, [&](const std::string& flag, const auto&) {
    if (flag != "--prefetch-sweep") return false;
    o.sweep = true;
    return true;
  });
  if (o.shapes.empty()) o.shapes = {{3072, 12288}, {12288, 3072}, {5376, 21504}};
  return o;
}

// One format's layer at one shape, and a ring of Linears over it.
struct Subject {
  std::unique_ptr<mixq::linear::SyntheticLayer> synthetic;
  std::unique_ptr<SvdLayer> svd;
  const mixq::Layer* layer = nullptr;
  LinearRing ring;
};

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  const double min_s = o.min_seconds();
  const int reps = o.reps();
  std::printf("# %s\n", run_header().c_str());
  set_threads(o.threads);

  if (o.sweep) {
    std::printf("# calibration read (1 GiB, %d threads x 4 streams) by software-prefetch distance\n", o.threads);
    std::printf("%10s %12s %12s\n", "prefetch", "best GB/s", "median GB/s");
    for (size_t ahead : {size_t(0), size_t(512), size_t(1024), size_t(2048), size_t(4096), size_t(8192)}) {
      const mixq::kernels::Rate r = mixq::kernels::read_bandwidth_gbs(o.threads, size_t(1) << 30, reps, ahead);
      std::printf("%10zu %12.1f %12.1f\n", ahead, r.best, r.median);
    }
    std::printf("\n");
  }

  mixq::kernels::StreamingRead buffer;  // the calibration's, read again beside every layer
  const mixq::kernels::Rate bw = mixq::kernels::read_bandwidth_gbs(buffer, reps);
  if (bw.median <= 0) {
    std::printf("bench_decode: no read-bandwidth calibration on this CPU (needs AVX2); nothing to compare\n");
    return 0;
  }
  std::printf("# read bandwidth (same run): 1 GiB, %d threads x 4 streams, prefetch %zu B ahead: best %.1f GB/s, "
              "median %.1f GB/s (%d passes)\n",
              o.threads, mixq::kernels::kStreamPrefetchBytes, bw.best, bw.median, reps);
  std::printf("# M=1, %d threads; weights cycled through a ring >= %dx the last-level cache (%.0f MiB); "
              "stored = the layer's checkpoint bytes\n",
              o.threads, kRingLlcFactor, static_cast<double>(llc_bytes()) / (1 << 20));
  std::printf("# time: median of %d alternating rounds of the layer's calls and a read of its stored bytes "
              "(each >= %.2f s)\n",
              kBesideRounds, min_s / 2);
  std::printf("%-16s %12s %-22s %10s %9s %11s %10s %13s %12s %10s  %s\n", "format", "KxN", "kernel", "us", "B/weight",
              "stored GB/s", "read GB/s", "of read beside", "of median bw", "of best bw", "ring");

  std::vector<const mixq::FormatTraits*> formats;
  for (const mixq::FormatTraits* f : mixq::all_formats())
    if (f->quantize && o.wants(f->name)) formats.push_back(f);
  const bool svd = o.wants("svdquant_w4a4");
  for (auto [k, n] : o.shapes) {
    const std::vector<float> x = random_activations(k);
    std::vector<float> y(static_cast<size_t>(n));
    const int count = static_cast<int>(formats.size()) + (svd ? 1 : 0);
    for (int i = 0; i < count; ++i) {
      const bool is_svd = i == static_cast<int>(formats.size());
      const std::string name = is_svd ? "svdquant_w4a4" : std::string(formats[i]->name);
      Subject s;
      try {
        if (is_svd) {
          s.svd = make_svdquant(k, n, 32);
          s.layer = &s.svd->layer;
        } else {
          s.synthetic = mixq::linear::make_random_layer(*formats[i], nlohmann::json::object(), n, k, 1, true);
          s.layer = &s.synthetic->layer;
        }
        const double stored = static_cast<double>(s.layer->bytes());
        // The ring is sized by the stored bytes: a Linear holds at least as many.
        const int copies = ring_copies(stored);
        auto report = [&](LinearRing& ring, const std::string& how) {
          const BesideRead t = time_beside_read(buffer, stored, kBesideRounds, min_s / 2,
                                                [&] { ring.take().forward(x.data(), 1, y.data()); });
          const double gbs = stored / t.call / 1e9, read_gbs = stored / t.read / 1e9;
          std::printf("%-16s %12s %-22s %10.1f %9.3f %11.1f %10.1f %12.0f%% %11.0f%% %9.0f%%  %s\n", name.c_str(),
                      (std::to_string(k) + "x" + std::to_string(n)).c_str(),
                      (std::string(ring[0].kernel_name()) + how).c_str(), t.call * 1e6,
                      stored / (double(k) * double(n)), gbs, read_gbs, 100 * t.read_fraction(), 100 * gbs / bw.median,
                      100 * gbs / bw.best, ring_note(copies, stored).c_str());
          std::fflush(stdout);
        };
        for (int c = 0; c < copies; ++c) s.ring.push_back(mixq::Linear::create(*s.layer));
        report(s.ring, "");
        if (s.synthetic) {
          s.ring = {};
          LinearRing mapped;
          for (int c = 0; c < copies; ++c) {
            auto file = mixq::linear::map_synthetic_layer(*s.synthetic);  // the Linear holds its mapping
            auto linear = mixq::Linear::create(*file->layer);
            if (!linear->reads_file_in_place()) break;
            mapped.push_back(std::move(linear));
          }
          if (static_cast<int>(mapped.copies.size()) == copies) report(mapped, " in place");
        }
      } catch (const mixq::Error& e) {
        std::printf("%-16s %12s not run: %s\n", name.c_str(), (std::to_string(k) + "x" + std::to_string(n)).c_str(),
                    e.what());
      }
    }
  }
  return 0;
} catch (const mixq::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
