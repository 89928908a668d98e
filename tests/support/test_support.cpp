#include "support/test_support.hpp"

#include <sys/wait.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/safetensors_writer.hpp"

namespace mixq::testing {
namespace fs = std::filesystem;

fs::path temp_dir(std::string_view name) {
  static std::atomic<int> counter{0};
  const char* root = std::getenv("MIXQ_TEST_TMP");
  fs::path base = root ? fs::path(root) : fs::temp_directory_path() / "mixq-test";
  fs::path dir = base / fmt::format("{}-{}-{}", name, ::getpid(), counter++);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<float> random_floats(size_t count, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (auto& v : values) v = normal(rng) * scale;
  return values;
}

CheckpointBuilder& CheckpointBuilder::add(const std::string& name, DType dtype, const Shape& shape,
                                          std::vector<std::byte> bytes) {
  tensors_.push_back(OwnedTensor{name, dtype, shape, std::move(bytes)});
  return *this;
}

CheckpointBuilder& CheckpointBuilder::add(OwnedTensor tensor) {
  tensors_.push_back(std::move(tensor));
  return *this;
}

CheckpointBuilder& CheckpointBuilder::add_float(const std::string& name, DType dtype,
                                                const Shape& shape,
                                                const std::vector<float>& values) {
  return add(name, dtype, shape, from_f32(dtype, values));
}

CheckpointBuilder& CheckpointBuilder::add_marker(const std::string& prefix, const std::string& json) {
  std::vector<std::byte> bytes(json.size());
  std::memcpy(bytes.data(), json.data(), json.size());
  return add(prefix + ".comfy_quant", DType::U8, {static_cast<int64_t>(json.size())}, std::move(bytes));
}

CheckpointBuilder& CheckpointBuilder::metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
  return *this;
}

void CheckpointBuilder::write(const fs::path& path) const {
  write_safetensors(path.string(), tensors_, metadata_);
}

namespace {
std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
std::string quote(const std::string& arg) {
  std::string q = "'";
  for (char c : arg) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace

CliResult run_cli(const std::vector<std::string>& args) {
  const char* cli = std::getenv("MIXQ_CLI");
  if (!cli) throw Error("MIXQ_CLI is not set (run the tests through ctest)");
  fs::path dir = temp_dir("cli");
  std::string command = quote(cli);
  // Appended piece by piece: `" " + std::string` trips g++ 12's false
  // -Wrestrict on the inlined insert (GCC bug 105329).
  for (const auto& a : args) {
    command += ' ';
    command += quote(a);
  }
  command += " >";
  command += quote((dir / "out").string());
  command += " 2>";
  command += quote((dir / "err").string());
  int status = std::system(command.c_str());
  CliResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = slurp(dir / "out");
  result.err = slurp(dir / "err");
  fs::remove_all(dir);
  return result;
}

}  // namespace mixq::testing
