// mixq-bench-memory: resident memory and load time of a FLUX.1-dev-sized
// checkpoint (`make bench-memory`; issue 14 §1 targets, BENCHMARKS.md).
//
//   mixq-bench-memory [--dir DIR] [--variant nvfp4-int8|fp8|mxfp8]... [--threads N]
//                     [--double 19] [--single 38] [--m 1024]
//
// Per variant, DIR/flux-<variant>.safetensors is written once (kept for later
// runs): the FluxTransformer2DModel linears of FLUX.1-dev (hidden 3072, MLP
// 12288, 19 double + 38 single blocks; names and shapes as diffusers gives
// them), block linears quantized, the embedders and the final projection
// BF16. Each distinct (format, shape) is quantized once from random weights
// (valid codes from the format's own quantizer) and that layer's bytes are
// streamed to every layer of its shape: the model is never in memory whole.
//   nvfp4-int8: attention projections int8_tensorwise + ConvRot 256, MLPs and
//               AdaLN modulations nvfp4                          (~8.1 GB)
//   fp8:        every block linear float8_e4m3fn                 (~12 GB)
//   mxfp8:      every block linear mxfp8 (E8M0 per 32 k)         (~12.4 GB)
// Then: the file is read twice with pread (the second pass, from the page
// cache, is the warm read bandwidth of this run), and mixq-memory-probe loads
// it in a fresh process (every Linear, one M = 1 forward through all layers,
// one M = --m forward through double block 0 and single block 0), and last
// 1 GiB of never-touched memory is written, then written again: the first is
// the rate at which any loader that copies weights can fill memory on this
// machine. Prints a Markdown
// table with the targets, met or not.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/calibrate.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/numeric.hpp"
#include "mixq/safetensors_writer.hpp"
#include "mixq/threads.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

enum class Role { attention, mlp, modulation, outer };

struct LinearShape {
  std::string name;  // module path
  int64_t out, in;
  Role role;
};

// The linears of diffusers' FluxTransformer2DModel with the FLUX.1-dev config
// (patch_size 1, in_channels 64, 24 heads x 128, joint_attention_dim 4096,
// pooled_projection_dim 768, guidance_embeds true).
std::vector<LinearShape> flux_linears(int doubles, int singles) {
  const int64_t d = 3072, mlp = 4 * d;
  std::vector<LinearShape> out = {
      {"x_embedder", d, 64, Role::outer},
      {"context_embedder", d, 4096, Role::outer},
      {"time_text_embed.timestep_embedder.linear_1", d, 256, Role::outer},
      {"time_text_embed.timestep_embedder.linear_2", d, d, Role::outer},
      {"time_text_embed.guidance_embedder.linear_1", d, 256, Role::outer},
      {"time_text_embed.guidance_embedder.linear_2", d, d, Role::outer},
      {"time_text_embed.text_embedder.linear_1", d, 768, Role::outer},
      {"time_text_embed.text_embedder.linear_2", d, d, Role::outer},
      {"norm_out.linear", 2 * d, d, Role::outer},
      {"proj_out", 64, d, Role::outer},
  };
  for (int b = 0; b < doubles; ++b) {
    const std::string p = "transformer_blocks." + std::to_string(b) + ".";
    out.push_back({p + "norm1.linear", 6 * d, d, Role::modulation});
    out.push_back({p + "norm1_context.linear", 6 * d, d, Role::modulation});
    for (const char* a : {"to_q", "to_k", "to_v", "add_q_proj", "add_k_proj", "add_v_proj", "to_out.0", "to_add_out"})
      out.push_back({p + "attn." + a, d, d, Role::attention});
    for (const char* ff : {"ff", "ff_context"}) {
      out.push_back({p + ff + ".net.0.proj", mlp, d, Role::mlp});
      out.push_back({p + ff + ".net.2", d, mlp, Role::mlp});
    }
  }
  for (int b = 0; b < singles; ++b) {
    const std::string p = "single_transformer_blocks." + std::to_string(b) + ".";
    out.push_back({p + "norm.linear", 3 * d, d, Role::modulation});
    out.push_back({p + "proj_mlp", mlp, d, Role::mlp});
    for (const char* a : {"to_q", "to_k", "to_v"}) out.push_back({p + "attn." + a, d, d, Role::attention});
    out.push_back({p + "proj_out", d, d + mlp, Role::mlp});
  }
  return out;
}

struct Choice {
  std::string format;  // "" = BF16, no marker
  nlohmann::json params = nlohmann::json::object();
};

Choice choose(const std::string& variant, Role role) {
  if (role == Role::outer) return {};
  if (variant == "fp8") return {"float8_e4m3fn"};
  if (variant == "mxfp8") return {"mxfp8"};
  if (variant == "nvfp4-int8") {
    if (role == Role::attention) return {"int8_tensorwise", {{"convrot", true}, {"convrot_groupsize", 256}}};
    return {"nvfp4"};
  }
  mixq::fail("unknown variant '{}' (nvfp4-int8, fp8, mxfp8)", variant);
}

// One quantized layer per (format, shape): tensors by role, and the marker.
struct Template {
  std::vector<mixq::OwnedTensor> tensors;
  std::string marker;
};

Template make_template(const Choice& c, int64_t n, int64_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(n * k));
  for (float& v : w) v = normal(rng);
  Template t;
  if (c.format.empty()) {
    t.tensors.push_back({"weight", mixq::DType::BF16, {n, k}, mixq::from_f32(mixq::DType::BF16, w)});
  } else {
    const mixq::FormatTraits* f = mixq::find_format(c.format);
    if (!f) mixq::fail("no format '{}'", c.format);
    mixq::QuantizedLayer q = f->quantize(w.data(), n, k, mixq::apply_defaults(*f, c.params));
    t.tensors = std::move(q.tensors);
    t.marker = q.marker.dump();
  }
  std::vector<float> bias(static_cast<size_t>(n));
  for (float& v : bias) v = normal(rng);
  t.tensors.push_back({"bias", mixq::DType::BF16, {n}, mixq::from_f32(mixq::DType::BF16, bias)});
  return t;
}

void generate(const fs::path& path, const std::string& variant, int doubles, int singles) {
  const std::vector<LinearShape> linears = flux_linears(doubles, singles);
  std::map<std::string, Template> templates;  // key: format/params/n/k
  std::vector<const Template*> per_linear;
  for (const LinearShape& l : linears) {
    const Choice c = choose(variant, l.role);
    const std::string key = fmt::format("{}/{}/{}/{}", c.format, c.params.dump(), l.out, l.in);
    auto it = templates.find(key);
    if (it == templates.end()) {
      std::fprintf(stderr, "  quantizing a [%ld, %ld] %s template\n", static_cast<long>(l.out),
                   static_cast<long>(l.in), c.format.empty() ? "bf16" : c.format.c_str());
      it = templates.emplace(key, make_template(c, l.out, l.in, templates.size() + 1)).first;
    }
    per_linear.push_back(&it->second);
  }
  mixq::SafetensorsWriter writer(path.string(), {{"mixq.bench", "FLUX.1-dev-shaped " + variant}});
  for (size_t i = 0; i < linears.size(); ++i) {
    for (const mixq::OwnedTensor& t : per_linear[i]->tensors)
      writer.declare(linears[i].name + "." + t.name, t.dtype, t.shape);
    if (!per_linear[i]->marker.empty())
      writer.declare(linears[i].name + ".comfy_quant", mixq::DType::U8,
                     {static_cast<int64_t>(per_linear[i]->marker.size())});
  }
  std::fprintf(stderr, "  writing %s (%.2f GB)\n", path.c_str(), static_cast<double>(writer.data_bytes()) / 1e9);
  for (size_t i = 0; i < linears.size(); ++i) {
    for (const mixq::OwnedTensor& t : per_linear[i]->tensors) writer.write(t.data);
    const std::string& m = per_linear[i]->marker;
    if (!m.empty()) writer.write(std::as_bytes(std::span(m.data(), m.size())));
  }
  writer.commit();
}

// Seconds to read the whole file with pread in 1 MiB pieces (the piece size
// `cat` and `dd bs=1M` use: it stays in the cache, and reading the page cache
// this way was ~1.7x faster than in 64 MiB pieces on the development VM).
double read_seconds(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) mixq::fail("{}: cannot open", path.string());
  std::vector<char> buffer(1 << 20);
  const Clock::time_point t = Clock::now();
  off_t offset = 0;
  for (;;) {
    const ssize_t got = ::pread(fd, buffer.data(), buffer.size(), offset);
    if (got <= 0) break;
    offset += got;
  }
  ::close(fd);
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Bytes per second of writing memory the process has never touched (a fresh
// anonymous mapping of `bytes`: every page faults and is zeroed first), and
// of writing the same memory again. A loader that makes any copy of the
// weights pays the first per byte of the copy.
struct WriteRates {
  double fresh = 0, again = 0;
};

WriteRates write_rates(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) mixq::fail("cannot map {} bytes", bytes);
  auto rate = [&](int value) {
    const Clock::time_point t = Clock::now();
    std::memset(p, value, bytes);
    return static_cast<double>(bytes) / std::chrono::duration<double>(Clock::now() - t).count();
  };
  WriteRates r;
  r.fresh = rate(1);
  r.again = rate(2);
  ::munmap(p, bytes);
  return r;
}

nlohmann::json run_probe(const fs::path& probe, const std::vector<std::string>& args) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) mixq::fail("pipe failed");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], 1);
    ::close(pipe_fds[0]);
    std::vector<char*> argv{const_cast<char*>(probe.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(probe.c_str(), argv.data());
    _exit(127);
  }
  ::close(pipe_fds[1]);
  std::string text;
  char chunk[4096];
  for (ssize_t got; (got = ::read(pipe_fds[0], chunk, sizeof chunk)) > 0;) text.append(chunk, static_cast<size_t>(got));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) mixq::fail("{} failed (status {})", probe.string(), status);
  return nlohmann::json::parse(text);
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

int run(int argc, char** argv) {
  fs::path dir = "build/bench-memory";
  std::vector<std::string> variants;
  int threads = 0, doubles = 19, singles = 38;
  int64_t big_m = 1024;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) mixq::fail("{} needs a value", arg);
      return argv[++i];
    };
    if (arg == "--dir") dir = value();
    else if (arg == "--variant") variants.push_back(value());
    else if (arg == "--threads") threads = std::stoi(value());
    else if (arg == "--double") doubles = std::stoi(value());
    else if (arg == "--single") singles = std::stoi(value());
    else if (arg == "--m") big_m = std::stoll(value());
    else mixq::fail("unknown argument '{}'", arg);
  }
  if (variants.empty()) variants = {"nvfp4-int8"};
  if (threads > 0) mixq::set_num_threads(threads);
  fs::create_directories(dir);
  const fs::path probe = fs::canonical("/proc/self/exe").parent_path() / "mixq-memory-probe";

  std::vector<std::string> rows;
  for (const std::string& variant : variants) {
    const fs::path path = dir / fmt::format("flux-{}-{}d{}s.safetensors", variant, doubles, singles);
    if (!fs::exists(path)) {
      std::fprintf(stderr, "generating %s\n", path.c_str());
      generate(path, variant, doubles, singles);
    }
    const double cold_or_warm = read_seconds(path);
    const double warm = read_seconds(path);
    std::vector<std::string> args = {path.string(), "--forward", "1", "--forward", std::to_string(big_m),
                                     "--forward-prefix", "transformer_blocks.0.", "--forward-prefix",
                                     "single_transformer_blocks.0."};
    if (threads > 0) args.insert(args.end(), {"--threads", std::to_string(threads)});
    std::fprintf(stderr, "loading %s\n", path.c_str());
    const nlohmann::json r = run_probe(probe, args);
    const double file = r["file_bytes"].get<double>(), weights = r["weight_bytes"].get<double>();
    const double anon = r["forward"]["anon"].get<double>() - r["base"]["anon"].get<double>();
    const double rss = r["forward"]["rss"].get<double>() - r["base"]["rss"].get<double>();
    // The load's peak over the RSS the load ends with (the forward after it
    // allocates and frees its own buffers).
    const double peak_over = r["loaded"]["hwm"].get<double>() - r["loaded"]["rss"].get<double>();
    const double layer = r["max_layer_bytes"].get<double>();
    const double load = r["load_s"].get<double>(), m1 = r["forward_s"]["1"].get<double>();
    const double mbig = r["forward_s"][std::to_string(big_m)].get<double>();
    const double bandwidth = file / warm;
    const double ratio = (load + m1) / warm;
    // After the probe, whose memory is free again: the rate of filling fresh
    // memory, and the streaming read the M = 1 kernels are measured against
    // (calibrate.hpp: the kernels' prefetch distance, median of 7 passes).
    const WriteRates writes = write_rates(size_t{1} << 30);
    const mixq::kernels::Rate read = mixq::kernels::read_bandwidth_gbs(mixq::num_threads());
    const double m1_gbs = weights / m1 / 1e9;
    auto met = [](bool ok) { return ok ? "met" : "**not met**"; };
    rows.push_back(fmt::format(
        "| {} | {:.2f} | {:.1f} | {:.2f} ({:.3f}x tensors, ≤1.05: {}) | {:.2f} ({:.3f}x file, ≤1.15: {}) | "
        "{:.2f} (largest layer {:.2f}: {}) | {:.2f} ({:.1f} GB/s: {:.0f} % of the median read {:.1f} GB/s, {:.0f} % of the "
        "best {:.1f}) | {:.2f} | {:.2f} GB/s ({:.2f} s; first pass {:.2f} s) | "
        "{:.2f}x (≤1.5: {}) | {:.2f} GB/s (file ÷ it = {:.2f}x file ÷ warm read; written again {:.1f} GB/s) |",
        variant, file / 1e9, load, anon / 1e9, anon / weights, met(anon <= 1.05 * weights), rss / 1e9, rss / file,
        met(rss <= 1.15 * file), peak_over / 1e9, layer / 1e9, met(peak_over <= layer), m1, m1_gbs,
        100 * m1_gbs / read.median, read.median, 100 * m1_gbs / read.best, read.best, mbig, bandwidth / 1e9,
        warm, cold_or_warm, ratio, met(ratio <= 1.5), writes.fresh / 1e9, bandwidth / writes.fresh,
        writes.again / 1e9));
    std::fprintf(stderr, "%s\n", r.dump().c_str());
  }
  std::printf("load average %s, %d threads\n\n", load_average().c_str(), mixq::num_threads());
  std::printf(
      "| variant | file GB | load s | anonymous GB after load + M=1 | RSS GB after load + M=1 | peak during load − "
      "RSS at its end, GB | M=1 forward, all layers, s (tensor bytes per second) | M=%ld forward, double + single block 0, s | warm read | load + "
      "M=1 vs file ÷ warm read | fresh-memory write (a copying loader's floor) |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n",
      static_cast<long>(big_m));
  for (const std::string& row : rows) std::printf("%s\n", row.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mixq-bench-memory: error: %s\n", e.what());
    return 1;
  }
}
