#pragma once
// Helpers shared by the test suites: fresh temporary folders, a builder for
// small checkpoints, and running the `mixq` binary.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "mixq/tensor.hpp"

namespace mixq::testing {

// A fresh, empty folder for one test (under $MIXQ_TEST_TMP or the system temp).
std::filesystem::path temp_dir(std::string_view name);

// Deterministic pseudo-random floats (normal-ish, scaled) for property tests.
std::vector<float> random_floats(size_t count, uint64_t seed, float scale = 1.0f);

// Builds a checkpoint in memory and writes it with SafetensorsWriter.
class CheckpointBuilder {
 public:
  CheckpointBuilder& add(const std::string& name, DType dtype, const Shape& shape,
                         std::vector<std::byte> bytes);
  CheckpointBuilder& add(OwnedTensor tensor);
  // Stores values converted to F32, F16 or BF16.
  CheckpointBuilder& add_float(const std::string& name, DType dtype, const Shape& shape,
                               const std::vector<float>& values);
  // `<prefix>.comfy_quant` U8 tensor holding `json` verbatim.
  CheckpointBuilder& add_marker(const std::string& prefix, const std::string& json);
  CheckpointBuilder& metadata(const std::string& key, const std::string& value);
  void write(const std::filesystem::path& path) const;

 private:
  std::vector<OwnedTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs the mixq binary ($MIXQ_CLI) with the given arguments.
CliResult run_cli(const std::vector<std::string>& args);

}  // namespace mixq::testing
