// Time of `mixq inspect --json`'s work on a MiniMax-H3-like checkpoint header:
// ~1100 tensors, ~120 KB of header JSON (200 quantized linears with weight,
// weight_scale, comfy_quant and bias, plus norms). Target: well under 50 ms.
//
//   build/bench/bench/bench_inspect [--quick] [Google Benchmark flags]
//
// The checkpoint is written once to a temporary folder (tensor data is tiny;
// opening never reads it). Rows: open only; open + markers + layers; the whole
// inspect JSON (open, markers, layers, report, dump).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

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
// Logical sizes are small (the header, not the data, is what is timed).
std::vector<OwnedTensor> h3_like() {
  std::vector<OwnedTensor> tensors;
  const char* linears[] = {"attn.qkv_proj", "attn.out_proj", "mlp.fc1", "mlp.fc2"};
  const int64_t n = 64, k = 256;
  for (int b = 0; b < 50; ++b) {
    std::string block = "blocks." + std::to_string(b) + ".";
    for (const char* l : linears) {
      std::string p = block + l;
      bool nvfp4 = (b % 4 == 3) && std::string(l).rfind("mlp", 0) == 0;
      if (nvfp4) {
        tensors.push_back(zeros(p + ".weight", DType::U8, {n, k / 2}));
        tensors.push_back(zeros(p + ".weight_scale", DType::F8_E4M3, {128, k / 16}));
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

const std::string& checkpoint_path() {
  static const std::string path = [] {
    fs::path dir = fs::temp_directory_path() / ("mixq-bench-inspect-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::string p = (dir / "h3_like.safetensors").string();
    auto tensors = h3_like();
    // A model config in the metadata, as many exports carry, brings the
    // header to ~120 KB.
    std::string config = "{\"_class_name\": \"MiniMaxH3Transformer\"";
    for (int i = 0; config.size() < 15000; ++i) config += ", \"option_" + std::to_string(i) + "\": " + std::to_string(i * 7);
    config += "}";
    write_safetensors(p, tensors, {{"format", "pt"}, {"config", config}});
    return p;
  }();
  return path;
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
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  fs::remove_all(fs::path(checkpoint_path()).parent_path());
  return 0;
}
