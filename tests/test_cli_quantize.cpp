// `mixq quantize` and `mixq verify` through the binary: quantize -> inspect ->
// plan -> dequantize -> verify, usage errors, and a SIGKILL in the middle of
// writing that must leave neither output nor temporary files nor a changed source.
#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "mixq/npy.hpp"
#include "mixq/numeric.hpp"
#include "support/test_support.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_cli;

fs::path make_source(const fs::path& dir, int blocks, int64_t hidden, DType dtype) {
  testing::CheckpointBuilder b;
  uint64_t seed = 7;
  for (int i = 0; i < blocks; ++i) {
    std::string p = "blocks." + std::to_string(i);
    auto add = [&](const std::string& name, int64_t n, int64_t k) {
      b.add_float(p + name, dtype, {n, k}, testing::random_floats(n * k, seed++, 0.05f));
    };
    add(".attn.qkv_proj.weight", 3 * hidden, hidden);
    add(".attn.out_proj.weight", hidden, hidden);
    add(".mlp.fc1.weight", 4 * hidden, hidden);
    add(".mlp.fc2.weight", hidden, 2 * hidden);
    b.add_float(p + ".mlp.fc2.bias", DType::F32, {hidden}, testing::random_floats(hidden, seed++, 0.01f));
    b.add_float(p + ".norm1.weight", DType::F32, {hidden}, testing::random_floats(hidden, seed++, 1.0f));
  }
  fs::path path = dir / "source.safetensors";
  b.write(path);
  return path;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(CliQuantize, QuantizeInspectPlanDequantizeVerify) {
  fs::path dir = testing::temp_dir("cli_quantize_chain");
  fs::path source = make_source(dir, 1, 256, DType::BF16);
  fs::path out = dir / "mixed.safetensors";
  auto q = run_cli({"quantize", source.string(), "-o", out.string(), "--rule", "*.mlp.*=nvfp4",
                    "--rule", "*.attn.*=int8_tensorwise:convrot=true,convrot_groupsize=256", "--quiet"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_TRUE(q.out.empty()) << q.out;  // --quiet

  auto inspect = run_cli({"inspect", out.string(), "--json"});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  json report = json::parse(inspect.out);
  std::map<std::string, std::string> formats;
  for (const auto& l : report["layers"])
    formats[l["prefix"]] = l["format"].is_null() ? "-" : l["format"].get<std::string>();
  EXPECT_EQ(formats["blocks.0.mlp.fc1"], "nvfp4");
  EXPECT_EQ(formats["blocks.0.mlp.fc2"], "nvfp4");
  EXPECT_EQ(formats["blocks.0.attn.qkv_proj"], "int8_tensorwise");
  EXPECT_EQ(formats["blocks.0.attn.out_proj"], "int8_tensorwise");

  // NVFP4 + INT8 ConvRot is what SGLang's H3 resolver accepts (docs/DISPATCH.md §3.3).
  auto plan = run_cli({"plan", out.string(), "--profile", "sglang-minimax-h3", "--json"});
  EXPECT_EQ(plan.exit_code, 0) << plan.out << plan.err;
  EXPECT_EQ(json::parse(plan.out)["accepted"], true);

  fs::path npy = dir / "fc1.npy";
  auto deq = run_cli({"dequantize", out.string(), "--layer", "blocks.0.mlp.fc1", "-o", npy.string()});
  ASSERT_EQ(deq.exit_code, 0) << deq.err;
  NpyArray w = read_npy(npy.string());
  ASSERT_EQ(w.shape, (Shape{1024, 256}));
  auto regenerated = testing::random_floats(1024 * 256, 9, 0.05f);  // fc1's seed in make_source
  double err = 0, ref = 0;
  for (size_t i = 0; i < w.values.size(); ++i) {
    float src = round_to(DType::BF16, regenerated[i]);
    err += std::pow(w.values[i] - src, 2.0);
    ref += std::pow(src, 2.0);
  }
  EXPECT_LT(std::sqrt(err / ref), 0.15);

  auto verify = run_cli({"verify", out.string(), "--against", source.string(), "--json"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  json v = json::parse(verify.out);
  EXPECT_EQ(v["summary"]["quantized_layers"], 4);
  for (const auto& l : v["layers"]) {
    EXPECT_TRUE(l["ok"].get<bool>()) << l.dump();
    EXPECT_LT(l["rel_error"].get<double>(), 0.15) << l.dump();
  }
  fs::remove_all(dir);
}

TEST(CliQuantize, RecipeFileHeaderMarkersAndErrors) {
  fs::path dir = testing::temp_dir("cli_quantize_errors");
  fs::path source = make_source(dir, 1, 256, DType::F32);
  fs::path recipe = dir / "r.json";
  std::ofstream(recipe) << R"({"rules": [{"match": "*", "format": "float8_e4m3fn"}]})";
  auto ok = run_cli({"quantize", source.string(), "-o", (dir / "o").string(), "--recipe", recipe.string(),
                     "--markers", "header"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("4 float8_e4m3fn"), std::string::npos) << ok.out;
  EXPECT_TRUE(fs::exists(dir / "o" / "model.safetensors"));
  auto inspect = run_cli({"inspect", (dir / "o").string(), "--json"});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  const json report = json::parse(inspect.out);  // a named object: the loop must not outlive it
  for (const auto& l : report["layers"]) EXPECT_EQ(l["format"], "float8_e4m3fn");

  auto none = run_cli({"quantize", source.string(), "-o", (dir / "x.safetensors").string()});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.err.rfind("mixq: error: ", 0), 0u) << none.err;
  auto bad_rule = run_cli({"quantize", source.string(), "-o", (dir / "x.safetensors").string(), "--rule", "*=int3"});
  EXPECT_EQ(bad_rule.exit_code, 2);
  EXPECT_NE(bad_rule.err.find("unknown format 'int3'"), std::string::npos) << bad_rule.err;
  std::ofstream(recipe) << R"({"rules": [{"match": "*", "format": "nvfp4", "group_size": 32}]})";
  auto bad_file = run_cli({"quantize", source.string(), "-o", (dir / "x.safetensors").string(), "--recipe", recipe.string()});
  EXPECT_EQ(bad_file.exit_code, 1);
  EXPECT_NE(bad_file.err.find("group_size"), std::string::npos) << bad_file.err;
  auto refuse = run_cli({"quantize", source.string(), "-o", (dir / "x.safetensors").string(), "--rule",
                         "*.fc2=int8_tensorwise:convrot=true,convrot_groupsize=1024"});
  EXPECT_EQ(refuse.exit_code, 1);
  EXPECT_NE(refuse.err.find("blocks.0.mlp.fc2"), std::string::npos) << refuse.err;
  EXPECT_FALSE(fs::exists(dir / "x.safetensors"));
  fs::remove_all(dir);
}

// Forks `mixq quantize`, SIGKILLs it as soon as the writer's temporary file
// exists (mid-write), and checks that nothing is left but the untouched source.
TEST(CliQuantize, SigkillMidWriteLeavesNothing) {
  const char* cli = std::getenv("MIXQ_CLI");
  ASSERT_NE(cli, nullptr);
  fs::path dir = testing::temp_dir("cli_quantize_kill");
  bool killed_mid_write = false;
  for (int blocks = 4; blocks <= 32 && !killed_mid_write; blocks *= 2) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::path source = make_source(dir, blocks, 512, DType::F32);
    const std::string before = slurp(source);
    fs::path out = dir / "out.safetensors";
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int null_fd = ::open("/dev/null", O_WRONLY);
      dup2(null_fd, 1);
      dup2(null_fd, 2);
      execl(cli, cli, "quantize", source.c_str(), "-o", out.c_str(), "--rule", "*=nvfp4", "--quiet",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    // The writer's temp file lives in the staging folder: ".out.safetensors.mixq-tmp-*/.<name>.tmp-*".
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int status = 0;
    bool exited = false;
    while (!killed_mid_write && std::chrono::steady_clock::now() < deadline) {
      for (const auto& e : fs::directory_iterator(dir)) {
        if (e.path().filename().string().find(".mixq-tmp-") == std::string::npos) continue;
        std::error_code ec;
        for (const auto& inner : fs::directory_iterator(e.path(), ec))
          if (inner.path().filename().string().find(".tmp-") != std::string::npos) killed_mid_write = true;
      }
      if (killed_mid_write) {
        kill(pid, SIGKILL);
        break;
      }
      if (waitpid(pid, &status, WNOHANG) == pid) {
        exited = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (!exited) {
      if (!killed_mid_write) kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    if (!killed_mid_write) continue;  // too fast to catch: try a bigger source
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    // The watchdog cleans up asynchronously once the pipe closes.
    std::vector<std::string> left;
    for (int i = 0; i < 500; ++i) {
      left = entries(dir);
      if (left.size() == 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(left, std::vector<std::string>{"source.safetensors"});
    EXPECT_TRUE(slurp(source) == before) << "source changed";
  }
  EXPECT_TRUE(killed_mid_write) << "quantize finished before it could be killed mid-write";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mixq
