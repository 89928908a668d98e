// Resident memory of a loaded checkpoint, per format (issue 14 §1): a
// checkpoint of kLayers layers [kN, kK] is loaded in a fresh process
// (mixq-memory-probe: every layer's Linear, then one M = 1 forward through
// all of them), and its memory growth over the process' own start must be
//   anonymous   <= 1.05 x the file's tensor bytes   (each weight held once)
//   total RSS   <= 1.15 x the file size             (consumed file pages released)
//   peak during the load <= final RSS + the largest layer
// each plus kAllowance for what the process allocates besides weights.
// Formats that do not meet the bounds yet are listed with the reason in the
// one table below; the test then checks that they still fail (so that a
// change that makes them pass flips the entry).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "mixq/format.hpp"
#include "support/kernel_paths.hpp"
#include "support/sanitizers.hpp"
#include "support/test_support.hpp"
#include "test_format_svdquant_helpers.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;

constexpr int kLayers = 8;
constexpr int64_t kN = 3072, kK = 3072;  // the issue's measurement: 8 x 3072 x 3072
// What the probe process allocates besides the weights (thread pool, header
// and layer tables, the Linear objects, the M = 1 activations): the formats
// that meet the bounds measured 0.1 MiB of anonymous growth over the tensor
// bytes and 1.5 MiB of RSS over the file (int8 ConvRot: 72.3 MiB anonymous
// for 72.2 MiB of tensors, RSS 73.8 MiB); the allowance is 2x the latter.
constexpr int64_t kAllowance = 3 << 20;

struct Case {
  const char* name;    // test name
  const char* format;  // "unquantized": a BF16 weight with no marker
  nlohmann::json params;
  // False: the format does not meet the bounds yet, for the reason given;
  // the test fails when it starts meeting them, so the entry gets flipped.
  bool meets;
  const char* why = "";
  // The fast kernels read the weight in place from the mapped file: no
  // anonymous copy at all (Linear::reads_file_in_place).
  bool in_place = false;
};

const Case kCases[] = {
    // FP8 and MXFP8 codes are read in place too (MXFP8's exponents, 1/32
    // of the codes, are re-laid per panel).
    {"fp8_e4m3", "float8_e4m3fn", nlohmann::json::object(), true, "", true},
    {"fp8_e5m2", "float8_e5m2", nlohmann::json::object(), true, "", true},
    {"mxfp8", "mxfp8", nlohmann::json::object(), true, "", true},
    {"unquantized_bf16", "unquantized", nlohmann::json::object(), true},
    // Codes and swizzled scales read in place too (avx2): see the int8 rows.
    {"nvfp4", "nvfp4", nlohmann::json::object(), true, "", true},
    // Measured (avx2): anon 0.3 MiB for 72.2 MiB of tensors, RSS 1.026x file
    // (packed before: anon 72.3 MiB).
    {"int8_convrot", "int8_tensorwise", {{"convrot", true}, {"convrot_groupsize", 256}}, true, "", true},
    // Read in place too: anon 0.3 MiB for 36.2 MiB of tensors (avx2).
    {"convrot_w4a4", "convrot_w4a4", nlohmann::json::object(), true, "", true},
    // The kernels keep the 4-bit codes and s_rel as stored and decode in the
    // GEMM; measured (avx2): anon 1.008x tensors, RSS 1.044x file, peak -
    // final 4.7 MiB (layer 5.1). Decoded to int8 before: 2.10x.
    {"asym_w4a8_int8", "asym_w4a8_int8", nlohmann::json::object(), true},
    // Scales, zeros, low-rank factors and smooth factor held at the stored
    // width (BF16 here) and widened in the kernels; SVDQuant stores no
    // per-column term. Measured (8 x 3072 x 3072, AVX2): awq_w4a16 anon
    // 1.004x tensors, RSS 1.038x file (1.14x / 1.18x before); svdquant_w4a4
    // 1.005x / 1.037x (1.38x / 1.41x before).
    {"awq_w4a16", "awq_w4a16", nlohmann::json::object(), true},
    {"svdquant_w4a4", "svdquant_w4a4", nlohmann::json::object(), true},
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// kLayers copies of one quantized layer (the quantizer's output for random
// weights; svdquant_w4a4 has no quantizer: random valid codes) under
// blocks.<i>.linear, each with an F32 bias.
fs::path write_checkpoint(const Case& c) {
  const fs::path path = testing::temp_dir(std::string("residency-") + c.name) / "model.safetensors";
  std::vector<OwnedTensor> tensors;
  std::string marker;
  const std::string format = c.format;
  if (format == "svdquant_w4a4") {
    tensors = testing::svd_tensors(testing::random_svd(kN, kK, 32, 7, false), false);
    marker = R"({"format": "svdquant_w4a4", "act_unsigned": false})";
  } else if (format == "unquantized") {
    const std::vector<float> w = testing::random_floats(kN * kK, 7, 0.05f);
    tensors.push_back(OwnedTensor{"weight", DType::BF16, {kN, kK}, from_f32(DType::BF16, w)});
  } else {
    const FormatTraits* f = find_format(format);
    if (!f) throw std::runtime_error("no format " + format);
    const std::vector<float> w = testing::random_floats(kN * kK, 7, 0.05f);
    QuantizedLayer q = f->quantize(w.data(), kN, kK, apply_defaults(*f, c.params));
    tensors = std::move(q.tensors);
    marker = q.marker.dump();
  }
  testing::CheckpointBuilder b;
  for (int i = 0; i < kLayers; ++i) {
    const std::string prefix = "blocks." + std::to_string(i) + ".linear";
    for (const OwnedTensor& t : tensors) b.add(OwnedTensor{prefix + "." + t.name, t.dtype, t.shape, t.data});
    if (!marker.empty()) b.add_marker(prefix, marker);
    b.add_float(prefix + ".bias", DType::F32, {kN}, testing::random_floats(kN, 100 + i, 0.1f));
  }
  b.write(path);
  return path;
}

nlohmann::json probe(const fs::path& checkpoint) {
  const char* probe = std::getenv("MIXQ_MEMORY_PROBE");
  if (!probe) throw std::runtime_error("MIXQ_MEMORY_PROBE is not set (run the tests through ctest)");
  const fs::path out = checkpoint.parent_path() / "probe.json";
  const std::string command = std::string("'") + probe + "' '" + checkpoint.string() + "' --forward 1 >'" +
                              out.string() + "'";
  if (std::system(command.c_str()) != 0) throw std::runtime_error("probe failed: " + command);
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

class Residency : public ::testing::TestWithParam<Case> {};

TEST_P(Residency, LoadedModelHoldsEachWeightOnce) {
#if MIXQ_UNDER_ASAN
  // ASan's shadow memory and quarantine change RSS by more than the bounds.
  GTEST_SKIP() << "RSS is not meaningful under AddressSanitizer";
#endif
  const Case& c = GetParam();
  const fs::path path = write_checkpoint(c);
  const nlohmann::json r = probe(path);
  fs::remove_all(path.parent_path());
  const int64_t weights = r["weight_bytes"], file = r["file_bytes"], layer = r["max_layer_bytes"];
  const int64_t anon = r["forward"]["anon"].get<int64_t>() - r["base"]["anon"].get<int64_t>();
  const int64_t rss = r["forward"]["rss"].get<int64_t>() - r["base"]["rss"].get<int64_t>();
  const int64_t peak = r["loaded"]["hwm"].get<int64_t>() - r["forward"]["rss"].get<int64_t>();
  const auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  std::printf("%-16s file %6.1f MiB  anon %6.1f MiB (%.3fx tensors)  rss %6.1f MiB (%.3fx file)  "
              "peak - final %5.1f MiB (layer %.1f)  kernels %s\n",
              c.name, mib(file), mib(anon), static_cast<double>(anon) / weights, mib(rss),
              static_cast<double>(rss) / file, mib(peak), mib(layer), r["kernels"].dump().c_str());
  const bool anon_ok = anon <= weights * 105 / 100 + kAllowance;
  const bool rss_ok = rss <= file * 115 / 100 + kAllowance;
  const bool peak_ok = peak <= layer + kAllowance;
  if (c.meets) {
    EXPECT_TRUE(anon_ok) << "anonymous growth " << anon << " > 1.05 x " << weights << " + allowance";
    EXPECT_TRUE(rss_ok) << "RSS growth " << rss << " > 1.15 x " << file << " + allowance";
    EXPECT_TRUE(peak_ok) << "peak during load exceeds final RSS by " << peak << " > layer " << layer;
    if (c.in_place && testing::kernel_path(std::string("in_place:") + c.name, kernels::Isa::avx2)) {
      EXPECT_LE(anon, weights / 20 + kAllowance) << "an in-place layer copies nothing";
    }
  } else {
    EXPECT_FALSE(anon_ok && rss_ok && peak_ok)
        << c.name << " now meets every bound: set `meets` in the table (it was listed because: " << c.why << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Residency, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace mixq
