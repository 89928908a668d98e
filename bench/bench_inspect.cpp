// Time of `mixq inspect --json`'s work on a MiniMax-H3-like checkpoint header:
// ~1100 tensors, ~120 KB of header JSON (200 quantized linears with weight,
// weight_scale, comfy_quant and bias, plus norms). Target: well under 50 ms.
//
//   build/bench/bench/bench_inspect [--quick] [Google Benchmark flags]
//
// The checkpoint is written once to a temporary folder (tensor data is tiny;
// opening never reads it). Rows: open only; open + markers + layers; the whole
// inspect JSON (open, markers, layers, report, dump).
//
// Before the timed rows, a page-cache check on the same header with real
// tensor sizes (1124 tensors, ~160 MiB of weights): the file is evicted from
// the page cache (fdatasync + POSIX_FADV_DONTNEED), one whole inspect runs
// cold (timed), and mincore() on the checkpoint's mapping counts the resident
// pages before and after, split into pages that hold marker tensors (the
// comfy_quant JSON, which inspect must read) and pages of other tensor data
// (which it must not).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "support/run_info.hpp"

#include "mixq/checkpoint.hpp"
#include "mixq/inspect.hpp"
#include "mixq/layer.hpp"
#include "mixq/marker.hpp"
#include "mixq/safetensors_writer.hpp"

namespace {

namespace fs = std::filesystem;
using namespace mixq;

OwnedTensor zeros(std::string name, DType dtype, Shape shape) {
  size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  return {std::move(name), dtype, std::move(shape), std::vector<std::byte>(bytes)};
}

OwnedTensor text(std::string name, const std::string& json) {
  OwnedTensor t{std::move(name), DType::U8, {static_cast<int64_t>(json.size())}, std::vector<std::byte>(json.size())};
  std::memcpy(t.data.data(), json.data(), json.size());
  return t;
}

// 50 blocks x 4 linears. Linears are int8_tensorwise + ConvRot (as in the
// public H3 INT8 files) except every fourth block's MLP, which is NVFP4.
// Logical sizes are small by default (the header, not the data, is what is
// timed); the page-cache check uses n = k = 1024.
std::vector<OwnedTensor> h3_like(int64_t n = 64, int64_t k = 256) {
  std::vector<OwnedTensor> tensors;
  const char* linears[] = {"attn.qkv_proj", "attn.out_proj", "mlp.fc1", "mlp.fc2"};
  for (int b = 0; b < 50; ++b) {
    std::string block = "blocks." + std::to_string(b) + ".";
    for (const char* l : linears) {
      std::string p = block + l;
      bool nvfp4 = (b % 4 == 3) && std::string(l).rfind("mlp", 0) == 0;
      if (nvfp4) {
        tensors.push_back(zeros(p + ".weight", DType::U8, {n, k / 2}));
        tensors.push_back(zeros(p + ".weight_scale", DType::F8_E4M3, {std::max<int64_t>(128, n), k / 16}));
        tensors.push_back(zeros(p + ".weight_scale_2", DType::F32, {}));
        tensors.push_back(text(p + ".comfy_quant", R"({"format": "nvfp4"})"));
      } else {
        tensors.push_back(zeros(p + ".weight", DType::I8, {n, k}));
        tensors.push_back(zeros(p + ".weight_scale", DType::F32, {n, 1}));
        tensors.push_back(text(p + ".comfy_quant",
                               R"({"format": "int8_tensorwise", "convrot": true, "convrot_groupsize": 256})"));
      }
      tensors.push_back(zeros(p + ".bias", DType::BF16, {n}));
    }
    for (const char* norm : {"norm1", "norm2", "attn.q_norm", "attn.k_norm", "norm_out"})
      tensors.push_back(zeros(block + norm + ".weight", DType::BF16, {k}));
    tensors.push_back(zeros(block + "scale_shift_table", DType::F32, {6, k}));
  }
  return tensors;
}

fs::path bench_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("mixq-bench-inspect-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string write_h3_like(const std::string& name, int64_t n, int64_t k) {
  std::string p = (bench_dir() / name).string();
  auto tensors = h3_like(n, k);
  // A model config in the metadata, as many exports carry, brings the
  // header to ~120 KB.
  std::string config = "{\"_class_name\": \"MiniMaxH3Transformer\"";
  for (int i = 0; config.size() < 15000; ++i) config += ", \"option_" + std::to_string(i) + "\": " + std::to_string(i * 7);
  config += "}";
  write_safetensors(p, tensors, {{"format", "pt"}, {"config", config}});
  return p;
}

const std::string& checkpoint_path() {
  static const std::string path = write_h3_like("h3_like.safetensors", 64, 256);
  return path;
}

// ---- page-cache check ----------------------------------------------------

// Resident pages (mincore) among the pages spanned by `data`, each page
// counted once in `seen`.
size_t resident_pages(std::span<const std::byte> data, std::set<uintptr_t>& seen, size_t& pages) {
  if (data.empty()) return 0;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data.data()) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data.data() + data.size());
  std::vector<unsigned char> vec((end - begin + page - 1) / page);
  if (::mincore(reinterpret_cast<void*>(begin), end - begin, vec.data()) != 0) return 0;
  size_t resident = 0;
  for (size_t i = 0; i < vec.size(); ++i) {
    if (!seen.insert(begin + i * page).second) continue;
    ++pages;
    resident += vec[i] & 1;
  }
  return resident;
}

struct Residency {
  size_t marker_pages = 0, marker_resident = 0, data_pages = 0, data_resident = 0;
};

// Pages of marker tensors first (a page shared with a marker counts as a
// marker page), then the pages of every other tensor.
Residency residency(const Checkpoint& c) {
  Residency r;
  std::set<uintptr_t> seen;
  for (const TensorView& t : c.tensors())
    if (t.name.ends_with(".comfy_quant")) r.marker_resident += resident_pages(t.data, seen, r.marker_pages);
  for (const TensorView& t : c.tensors())
    if (!t.name.ends_with(".comfy_quant")) r.data_resident += resident_pages(t.data, seen, r.data_pages);
  return r;
}

bool evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  ::fdatasync(fd);
  const bool ok = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  ::close(fd);
  return ok;
}

// Resident pages of the whole file through a mapping of our own.
size_t file_resident_pages(const std::string& path, size_t& pages) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return 0;
  const size_t size = fs::file_size(path);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return 0;
  std::set<uintptr_t> seen;
  const size_t resident = resident_pages({static_cast<const std::byte*>(map), size}, seen, pages);
  ::munmap(map, size);
  return resident;
}

void page_cache_check() {
  const std::string path = write_h3_like("h3_like_1024.safetensors", 1024, 1024);
  const bool evicted = evict(path);
  size_t file_pages = 0;
  const size_t before = file_resident_pages(path, file_pages);
  const auto t0 = std::chrono::steady_clock::now();
  Checkpoint c = Checkpoint::open(path);
  MarkerSet markers = collect_markers(c);
  LayerSet layers = group_layers(c, markers);
  const std::string json = inspect_report(c, markers, layers).dump(2);
  const double cold_ms = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3;
  const Residency after = residency(c);
  std::printf("# %s\n", mixq::bench::run_header().c_str());
  std::printf("# page-cache check: %zu tensors, header %.1f KB, file %.1f MiB, evicted first: %s\n",
              c.tensors().size(), static_cast<double>(c.files()[0].header_bytes) / 1000.0,
              static_cast<double>(fs::file_size(path)) / (1 << 20), evicted ? "yes" : "NO (posix_fadvise failed)");
  std::printf("# before: %zu of the file's %zu pages resident\n", before, file_pages);
  std::printf("# cold inspect (open + markers + layers + JSON, header from disk): %.1f ms\n", cold_ms);
  std::printf("# after it, resident: marker-tensor pages %zu of %zu, other tensor-data pages %zu of %zu (%.1f MiB)\n",
              after.marker_resident, after.marker_pages, after.data_resident, after.data_pages,
              static_cast<double>(after.data_resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20));
  std::fflush(stdout);
}

void counters(benchmark::State& state, const Checkpoint& c) {
  state.counters["tensors"] = static_cast<double>(c.tensors().size());
  state.counters["header_KB"] = static_cast<double>(c.files()[0].header_bytes) / 1000.0;
}

void BM_Open(benchmark::State& state) {
  const std::string& path = checkpoint_path();
  for (auto _ : state) {
    Checkpoint c = Checkpoint::open(path);
    benchmark::DoNotOptimize(c.tensors().data());
  }
  counters(state, Checkpoint::open(path));
}

void BM_OpenMarkersLayers(benchmark::State& state) {
  const std::string& path = checkpoint_path();
  for (auto _ : state) {
    Checkpoint c = Checkpoint::open(path);
    MarkerSet markers = collect_markers(c);
    LayerSet layers = group_layers(c, markers);
    benchmark::DoNotOptimize(layers.layers.data());
  }
  Checkpoint c = Checkpoint::open(path);
  state.counters["layers"] = static_cast<double>(group_layers(c, collect_markers(c)).layers.size());
  counters(state, c);
}

void BM_InspectJson(benchmark::State& state) {
  const std::string& path = checkpoint_path();
  for (auto _ : state) {
    Checkpoint c = Checkpoint::open(path);
    MarkerSet markers = collect_markers(c);
    LayerSet layers = group_layers(c, markers);
    std::string json = inspect_report(c, markers, layers).dump(2);
    benchmark::DoNotOptimize(json.data());
  }
  counters(state, Checkpoint::open(path));
}

BENCHMARK(BM_Open)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OpenMarkersLayers)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_InspectJson)->Unit(benchmark::kMillisecond);

}  // namespace

// scripts/bench.sh passes its arguments (e.g. --quick) to every benchmark:
// accept --quick (shorter runs) and leave the rest to Google Benchmark.
int main(int argc, char** argv) {
  std::vector<char*> args;
  std::string min_time = "--benchmark_min_time=0.05";
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick")
      args.push_back(min_time.data());
    else
      args.push_back(argv[i]);
  }
  page_cache_check();
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  fs::remove_all(fs::path(checkpoint_path()).parent_path());
  return 0;
}
