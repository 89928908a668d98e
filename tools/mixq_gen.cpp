// mixq-gen: writes a float checkpoint with MiniMax-H3 layer names and
// structure (docs/DISPATCH.md §8.1), scaled down by choosing the hidden size;
// every other size keeps H3's ratio to it: attention inner = 4/3 h (heads of
// 128), FFN = 8/3 h (SwiGLU fc1 = 2 x FFN), time embedding = h/2, AdaLN = 18 h
// per block and 2 h for the final layer. Used by `make demo` and by
// bench/quantize_memory.sh. Streams tensor by tensor (memory = one tensor).
//
//   mixq-gen OUT.safetensors [--hidden H] [--blocks B] [--refiner-blocks R]
//            [--dtype bf16|f16|f32] [--seed S] [--target-size SIZE]
//   mixq-gen npy OUT.npy ROWS COLS [SEED]     random N(0,1) activations
//   mixq-gen compare A.npy B.npy              prints "rel_error max_abs_error"
//
// --target-size picks the number of main blocks so the file reaches SIZE.
// Weights are N(0, 1/K) with a few input channels scaled up 8x (the outliers
// ConvRot exists for); patch, time and output projections are F32 as in H3.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "mixq/error.hpp"
#include "mixq/npy.hpp"
#include "mixq/numeric.hpp"
#include "mixq/quantize.hpp"
#include "mixq/safetensors_writer.hpp"

namespace {

using mixq::DType;
using mixq::Shape;

enum class Kind { linear, bias, norm };

struct Spec {
  std::string name;
  DType dtype;
  Shape shape;
  Kind kind;
};

uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float normal(uint64_t& state) {
  // Box-Muller on two 24-bit uniforms in (0, 1].
  float u1 = (static_cast<float>(splitmix(state) >> 40) + 1.0f) / 16777216.0f;
  float u2 = static_cast<float>(splitmix(state) >> 40) / 16777216.0f;
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
}

// Fills values of one tensor; rows are split over threads, each row seeded
// from (seed, tensor index, row) so output does not depend on thread count.
std::vector<float> generate(const Spec& spec, uint64_t seed, size_t index) {
  const int64_t rows = spec.shape.size() == 2 ? spec.shape[0] : 1;
  const int64_t cols = spec.shape.size() == 2 ? spec.shape[1] : spec.shape[0];
  std::vector<float> values(static_cast<size_t>(rows * cols));
  const float sigma = 1.0f / std::sqrt(static_cast<float>(cols));
  auto fill = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      uint64_t state = seed * 0x100000001B3ull ^ (index << 32) ^ static_cast<uint64_t>(r);
      float* row = values.data() + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        float z = normal(state);
        switch (spec.kind) {
          case Kind::linear: row[c] = z * sigma * (c % 61 == 7 ? 8.0f : 1.0f); break;
          case Kind::bias: row[c] = 0.02f * z; break;
          case Kind::norm: row[c] = 1.0f + 0.05f * z; break;
        }
      }
    }
  };
  unsigned threads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  if (rows < 64) threads = 1;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back(fill, rows * t / threads, rows * (t + 1) / threads);
  for (auto& th : pool) th.join();
  return values;
}

struct Dims {
  int64_t hidden, inner, ffn, time_embed;
};

void add_linear(std::vector<Spec>& specs, const std::string& prefix, int64_t out, int64_t in,
                DType dtype, bool bias) {
  specs.push_back({prefix + ".weight", dtype, {out, in}, Kind::linear});
  if (bias) specs.push_back({prefix + ".bias", dtype, {out}, Kind::bias});
}

void add_block(std::vector<Spec>& specs, const std::string& p, const Dims& d, DType dtype,
               bool adaln) {
  specs.push_back({p + ".norm1.weight", dtype, {d.hidden}, Kind::norm});
  specs.push_back({p + ".norm2.weight", dtype, {d.hidden}, Kind::norm});
  specs.push_back({p + ".attn.q_norm.weight", dtype, {128}, Kind::norm});
  specs.push_back({p + ".attn.k_norm.weight", dtype, {128}, Kind::norm});
  add_linear(specs, p + ".attn.qkv_proj", 3 * d.inner, d.hidden, dtype, false);
  add_linear(specs, p + ".attn.out_proj", d.hidden, d.inner, dtype, true);
  add_linear(specs, p + ".mlp.fc1", 2 * d.ffn, d.hidden, dtype, false);
  add_linear(specs, p + ".mlp.fc2", d.hidden, d.ffn, dtype, true);
  if (adaln) add_linear(specs, p + ".adaln_proj.linear", 18 * d.hidden, d.time_embed, dtype, true);
}

std::vector<Spec> model(const Dims& d, int blocks, int refiner, DType dtype) {
  std::vector<Spec> specs;
  const DType f32 = DType::F32;
  add_linear(specs, "video_patch_proj", d.hidden, 96, f32, true);
  add_linear(specs, "audio_patch_proj", d.hidden, 64, f32, true);
  add_linear(specs, "condition_proj", d.hidden, d.hidden, dtype, true);
  add_linear(specs, "time_embedder.proj_in", d.hidden, 256, f32, true);
  add_linear(specs, "time_embedder.proj_out", d.time_embed, d.hidden, f32, true);
  for (int r = 0; r < refiner; ++r)
    add_block(specs, fmt::format("token_refiner.blocks.{}", r), d, dtype, false);
  for (int b = 0; b < blocks; ++b) add_block(specs, fmt::format("blocks.{}", b), d, dtype, true);
  add_linear(specs, "final_layer.adaln_proj.linear", 2 * d.hidden, d.time_embed, dtype, true);
  add_linear(specs, "final_layer.video_out", 96, d.hidden, f32, true);
  add_linear(specs, "final_layer.audio_out", 64, d.hidden, f32, true);
  return specs;
}

uint64_t total_bytes(const std::vector<Spec>& specs) {
  uint64_t total = 0;
  for (const Spec& s : specs) total += mixq::shape_numel(s.shape) * mixq::dtype_size(s.dtype);
  return total;
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "mixq-gen: error: %s\nusage: mixq-gen OUT.safetensors [--hidden H] [--blocks B] "
               "[--refiner-blocks R] [--dtype bf16|f16|f32] [--seed S] [--target-size SIZE]\n",
               why.c_str());
  std::exit(2);
}

// The demo's helpers around `mixq linear`: random inputs and a comparison.
int npy_mode(int argc, char** argv) {
  std::string mode = argv[1];
  if (mode == "npy") {
    if (argc < 5) usage("npy OUT.npy ROWS COLS [SEED]");
    int64_t rows = std::stoll(argv[3]), cols = std::stoll(argv[4]);
    uint64_t state = argc > 5 ? std::stoull(argv[5]) : 1;
    if (rows <= 0 || cols <= 0) usage("ROWS and COLS must be positive");
    std::vector<float> x(static_cast<size_t>(rows * cols));
    for (float& v : x) v = normal(state);
    mixq::write_npy(argv[2], {rows, cols}, x.data());
    return 0;
  }
  if (argc < 4) usage("compare A.npy B.npy");
  mixq::NpyArray a = mixq::read_npy(argv[2]), b = mixq::read_npy(argv[3]);
  if (a.shape != b.shape)
    throw mixq::Error(fmt::format("shapes differ: {} vs {}", mixq::shape_str(a.shape), mixq::shape_str(b.shape)));
  double err = 0, ref = 0, worst = 0;
  for (size_t i = 0; i < a.values.size(); ++i) {
    double d = static_cast<double>(a.values[i]) - b.values[i];
    err += d * d;
    ref += static_cast<double>(b.values[i]) * b.values[i];
    worst = std::max(worst, std::fabs(d));
  }
  std::printf("%.6f %.6g\n", ref > 0 ? std::sqrt(err / ref) : std::sqrt(err), worst);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::string(argv[1]) == "npy" || std::string(argv[1]) == "compare")) {
    try {
      return npy_mode(argc, argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mixq-gen: error: %s\n", e.what());
      return 1;
    }
  }
  std::string out;
  int64_t hidden = 768;
  int blocks = 2, refiner = 1;
  uint64_t seed = 1, target = 0;
  DType dtype = DType::BF16;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) usage(a + " needs a value");
        return argv[++i];
      };
      if (a == "--hidden") hidden = std::stoll(value());
      else if (a == "--blocks") blocks = std::stoi(value());
      else if (a == "--refiner-blocks") refiner = std::stoi(value());
      else if (a == "--seed") seed = std::stoull(value());
      else if (a == "--target-size") target = mixq::parse_byte_size(value());
      else if (a == "--dtype") {
        std::string d = value();
        if (d == "bf16") dtype = DType::BF16;
        else if (d == "f16") dtype = DType::F16;
        else if (d == "f32") dtype = DType::F32;
        else usage("--dtype must be bf16, f16 or f32");
      } else if (!a.empty() && a[0] == '-') usage("unknown option " + a);
      else if (out.empty()) out = a;
      else usage("one output path only");
    }
    if (out.empty()) usage("missing OUT.safetensors");
    if (hidden <= 0 || hidden % 96 != 0) usage("--hidden must be a positive multiple of 96");
    if (blocks < 0 || refiner < 0) usage("block counts must be >= 0");
    Dims d{hidden, hidden * 4 / 3, hidden * 8 / 3, hidden / 2};
    if (target > 0) {
      uint64_t base = total_bytes(model(d, 0, refiner, dtype));
      uint64_t per = total_bytes(model(d, 1, refiner, dtype)) - base;
      blocks = static_cast<int>(target > base ? (target - base + per - 1) / per : 1);
    }
    std::vector<Spec> specs = model(d, blocks, refiner, dtype);
    mixq::SafetensorsWriter writer(out, {{"generator", "mixq-gen"},
                                         {"architecture", "MiniMax-H3 (scaled)"},
                                         {"hidden_size", std::to_string(hidden)}});
    for (const Spec& s : specs) writer.declare(s.name, s.dtype, s.shape);
    for (size_t i = 0; i < specs.size(); ++i) {
      std::vector<float> values = generate(specs[i], seed, i);
      writer.write(mixq::from_f32(specs[i].dtype, values));
    }
    writer.commit();
    std::printf("%s: %zu tensors, %.1f MB (hidden %lld, %d blocks + %d refiner blocks, %s)\n",
                out.c_str(), specs.size(), static_cast<double>(total_bytes(specs)) / 1e6,
                static_cast<long long>(hidden), blocks, refiner,
                std::string(mixq::dtype_name(dtype)).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mixq-gen: error: %s\n", e.what());
    return 1;
  }
}
