// `mixq shard` through the binary: a mixed checkpoint (NVFP4 MLP, INT8 ConvRot
// attention, header and tensor markers, norms) split over 2 ranks gives
// rank0/rank1.safetensors and mixq-shard.json; each rank file inspects,
// verifies and plans, keeps the markers and the other tensors byte for byte,
// and holds exactly the in-memory shard_layer result. Refusals (a degree the
// plan rejects, --tp 0, an existing output) exit with nothing written, and a
// SIGKILL while writing leaves no output folder and no staging folder.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "mixq/checkpoint.hpp"
#include "mixq/format.hpp"
#include "mixq/plan.hpp"
#include "mixq/shard.hpp"
#include "mixq/tp_shards.hpp"
#include "test_plan_fixtures.hpp"

namespace mixq::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Two H3-style blocks: NVFP4 MLP (markers in tensors), INT8 ConvRot attention
// (markers in the header), a plain adaLN projection, norms.
std::string mixed_checkpoint(int64_t hidden = 256) {
  PlanFixture f;
  const json int8 = {{"convrot", true}, {"convrot_groupsize", 64}};
  for (int b = 0; b < 2; ++b) {
    const std::string p = "blocks." + std::to_string(b);
    f.quantized(p + ".attn.qkv_proj", "int8_tensorwise", 3 * hidden, hidden, int8, Dialect::header)
        .quantized(p + ".attn.out_proj", "int8_tensorwise", hidden, hidden, int8, Dialect::header)
        .quantized(p + ".mlp.fc1", "nvfp4", 2 * 2 * hidden, hidden)
        .quantized(p + ".mlp.fc2", "nvfp4", hidden, 2 * hidden)
        .dense(p + ".adaln_proj.linear", 6 * hidden, 64, DType::BF16, true)
        .f32(p + ".norm1.weight", {hidden}, 1.0f);
  }
  f.metadata("modelspec.title", "tp test");
  return f.write("mixed");
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(CliShard, TwoRanksAreValidCheckpointsHoldingTheirShards) {
  const std::string source = mixed_checkpoint();
  const fs::path out = temp_dir("cli_shard_ok") / "tp2";
  const CliResult r = run_cli({"shard", source, "--tp", "2", "--profile", "sglang-minimax-h3", "-o", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rank0.safetensors"), std::string::npos) << r.out;
  EXPECT_EQ(entries(out), (std::vector<std::string>{"mixq-shard.json", "rank0.safetensors", "rank1.safetensors"}));

  std::ifstream in(out / kShardIndexName);
  const json index = json::parse(in);
  EXPECT_EQ(index["format"], "mixq-shard");
  EXPECT_EQ(index["version"], 1);
  EXPECT_EQ(index["degree"], 2);
  EXPECT_EQ(index["profile"], "sglang-minimax-h3");
  ASSERT_EQ(index["ranks"].size(), 2u);
  EXPECT_EQ(index["ranks"][1]["file"], "rank1.safetensors");
  EXPECT_EQ(index["layers"].size(), 10u);
  EXPECT_EQ(index["replicated_tensors"], 2 + 4);  // norms + the 4 NVFP4 marker tensors
  for (const auto& l : index["layers"]) {
    if (l["prefix"] == "blocks.0.mlp.fc1") {
      EXPECT_EQ(l["parallel"], "column");
      EXPECT_EQ(l["parts"], 2);
      EXPECT_EQ(l["rank_out_features"], 512);
      EXPECT_EQ(l["rank_in_features"], 256);
    }
    if (l["prefix"] == "blocks.1.attn.out_proj") {
      EXPECT_EQ(l["parallel"], "row");
      EXPECT_EQ(l["rank_in_features"], 128);
    }
  }

  const Checkpoint src = Checkpoint::open(source);
  const Plan plan = Plan::build(src, {.profile = "sglang-minimax-h3", .tp = 2});
  ASSERT_TRUE(plan.accepted()) << plan.error();
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string file = (out / ("rank" + std::to_string(rank) + ".safetensors")).string();
    const CliResult inspect = run_cli({"inspect", file, "--json"});
    ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
    EXPECT_EQ(json::parse(inspect.out)["formats"]["nvfp4"]["layers"], 4);
    EXPECT_EQ(json::parse(inspect.out)["formats"]["int8_tensorwise"]["layers"], 4);
    const CliResult verify = run_cli({"verify", file});
    EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
    // Each rank loads under the same profile at tp 1 (it is one rank's model).
    const CliResult planned = run_cli({"plan", file, "--profile", "sglang-minimax-h3"});
    EXPECT_EQ(planned.exit_code, 0) << planned.out << planned.err;

    const Checkpoint ck = Checkpoint::open(file);
    EXPECT_EQ(ck.files()[0].metadata.at("modelspec.title"), "tp test");
    EXPECT_EQ(json::parse(ck.files()[0].metadata.at("mixq_tp")), (json{{"rank", rank}, {"degree", 2}, {"profile", "sglang-minimax-h3"}}));
    const json markers = json::parse(ck.files()[0].metadata.at("_quantization_metadata"));
    EXPECT_EQ(markers["layers"].size(), 4u);  // the INT8 header markers, intact
    for (const char* name : {"blocks.0.norm1.weight", "blocks.1.mlp.fc1.comfy_quant"}) {
      const TensorView* a = ck.find(name);
      const TensorView* b = src.find(name);
      ASSERT_TRUE(a && b) << name;
      EXPECT_TRUE(a->shape == b->shape && std::memcmp(a->data.data(), b->data.data(), a->data.size()) == 0) << name;
    }
    // The file holds exactly the in-memory shards: same tensors, same bytes.
    size_t layer_tensors = 0;
    for (const LayerPlan& lp : plan.layers()) {
      const LayerShard s = shard_layer(plan, lp, rank, 2);
      for (const auto& [role, view] : s.layer().tensors) {
        const TensorView* t = ck.find(view.name);
        ASSERT_NE(t, nullptr) << view.name;
        EXPECT_EQ(t->dtype, view.dtype) << view.name;
        EXPECT_EQ(t->shape, view.shape) << view.name;
        EXPECT_TRUE(t->data.size() == view.data.size() &&
                    std::memcmp(t->data.data(), view.data.data(), t->data.size()) == 0)
            << view.name;
        ++layer_tensors;
      }
    }
    EXPECT_EQ(ck.tensors().size(), layer_tensors + 6);
    EXPECT_EQ(ck.find("blocks.0.attn.out_proj.bias") != nullptr, false);  // no bias in the source
  }
}

TEST(CliShard, RefusesWhatThePlanRejectsAndWritesNothing) {
  const std::string source = mixed_checkpoint();
  const fs::path dir = temp_dir("cli_shard_refused");
  // 3 does not divide the 256 input features of out_proj (nor the parts).
  const CliResult plan3 = run_cli({"plan", source, "--tp", "3"});
  const CliResult shard3 = run_cli({"shard", source, "--tp", "3", "-o", (dir / "tp3").string()});
  EXPECT_EQ(shard3.exit_code, 1);
  EXPECT_EQ(plan3.exit_code, 1);
  EXPECT_NE(shard3.err.find("--tp 3: "), std::string::npos) << shard3.err;
  EXPECT_NE(shard3.err.find("first: blocks.0."), std::string::npos) << shard3.err;
  EXPECT_EQ(shard3.err, plan3.err.substr(plan3.err.rfind("mixq: error:")));  // the same line
  // 8 ranks: 32 features of attn.out_proj, less than the ConvRot group of 64.
  const CliResult shard8 = run_cli({"shard", source, "--tp", "8", "-o", (dir / "tp8").string()});
  EXPECT_EQ(shard8.exit_code, 1);
  EXPECT_NE(shard8.err.find("blocks.0.attn.out_proj"), std::string::npos) << shard8.err;
  EXPECT_NE(shard8.err.find("64"), std::string::npos) << shard8.err;
  // Usage errors.
  EXPECT_EQ(run_cli({"shard", source, "--tp", "0", "-o", (dir / "tp0").string()}).exit_code, 2);
  EXPECT_EQ(run_cli({"shard", source, "-o", (dir / "none").string()}).exit_code, 2);
  EXPECT_TRUE(entries(dir).empty()) << "something was written";
  // An existing, non-empty output folder is never touched.
  fs::create_directories(dir / "busy");
  std::ofstream(dir / "busy" / "keep.txt") << "mine";
  const CliResult busy = run_cli({"shard", source, "--tp", "2", "-o", (dir / "busy").string()});
  EXPECT_EQ(busy.exit_code, 1);
  EXPECT_NE(busy.err.find("not empty"), std::string::npos) << busy.err;
  EXPECT_EQ(entries(dir / "busy"), std::vector<std::string>{"keep.txt"});
  EXPECT_EQ(entries(dir), std::vector<std::string>{"busy"});
}

// Forks `mixq shard`, SIGKILLs it while a rank file is being written, and
// checks that neither the output folder nor the staging folder remains.
TEST(CliShard, SigkillMidWriteLeavesNothing) {
  const char* cli = std::getenv("MIXQ_CLI");
  ASSERT_NE(cli, nullptr);
  const std::string source = mixed_checkpoint(1024);
  const fs::path dir = temp_dir("cli_shard_kill");
  bool killed_mid_write = false;
  for (int attempt = 0; attempt < 5 && !killed_mid_write; ++attempt) {
    const fs::path out = dir / "tp2";
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int null_fd = ::open("/dev/null", O_WRONLY);
      dup2(null_fd, 1);
      dup2(null_fd, 2);
      execl(cli, cli, "shard", source.c_str(), "--tp", "2", "-o", out.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int status = 0;
    bool exited = false;
    while (!killed_mid_write && std::chrono::steady_clock::now() < deadline) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(dir, ec)) {
        if (e.path().filename().string().find(".mixq-tmp-") == std::string::npos) continue;
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
    if (!killed_mid_write) {
      fs::remove_all(out);
      continue;
    }
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    std::vector<std::string> left;
    for (int i = 0; i < 500; ++i) {  // the staging folder's watchdog cleans up asynchronously
      left = entries(dir);
      if (left.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(left.empty()) << left.front();
  }
  EXPECT_TRUE(killed_mid_write) << "shard finished before it could be killed mid-write";
}

}  // namespace
}  // namespace mixq::testing
