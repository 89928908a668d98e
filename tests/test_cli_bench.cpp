// `mixq bench`: one row per format and shape with the timing identities
// (GOPS = 2·M·N·K / time, fractions = rate / limit measured in the same run),
// every quantizable format of the table by default, usage errors exit 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kernels/calibrate.hpp"
#include "kernels/cpu.hpp"
#include "mixq/format.hpp"
#include "support/test_support.hpp"

namespace {

using mixq::testing::run_cli;

TEST(CliBench, JsonRowsHoldTheTimingIdentities) {
  const auto r = run_cli({"bench", "--format", "int8_tensorwise:convrot=true,convrot_groupsize=64", "--shape",
                          "3x128x40", "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out.at("threads"), 1);
  const auto& limits = out.at("limits");
  ASSERT_EQ(out.at("results").size(), 1u);
  const auto& row = out.at("results")[0];
  EXPECT_TRUE(row.at("error").is_null());
  EXPECT_EQ(row.at("format"), "int8_tensorwise");
  EXPECT_EQ(row.at("params").at("convrot_groupsize"), 64);
  EXPECT_EQ(row.at("m"), 3);
  EXPECT_EQ(row.at("k"), 128);
  EXPECT_EQ(row.at("n"), 40);
  EXPECT_FALSE(row.at("kernel").get<std::string>().empty());
  // Built from a mapped file, as from a checkpoint: INT8 reads it in place on
  // the AVX2 / AVX-512 paths.
  const auto best = mixq::kernels::best_isa();
  EXPECT_EQ(row.at("in_place").get<bool>(), best >= mixq::kernels::Isa::avx2);
  const double seconds = row.at("seconds"), gops = row.at("gops");
  ASSERT_GT(seconds, 0.0);
  EXPECT_NEAR(gops, 2.0 * 3 * 128 * 40 / seconds / 1e9, 1e-9 * gops);
  EXPECT_NEAR(row.at("weight_gbs").get<double>(), row.at("weight_bytes").get<double>() / seconds / 1e9, 1e-9);
  // The int8 dot peak on every AVX2 CPU (vpmaddubsw without VNNI), the bf16
  // dot peak only with AVX-512 BF16.
  if (best >= mixq::kernels::Isa::avx2) {
    const double peak = limits.at("int8_peak_gops");
    EXPECT_GT(peak, 1.0);
    EXPECT_NEAR(row.at("fraction_int8_peak").get<double>(), gops / peak, 1e-9);
  } else {
    EXPECT_TRUE(limits.at("int8_peak_gops").is_null());
    EXPECT_TRUE(row.at("fraction_int8_peak").is_null());
  }
  if (mixq::kernels::has_avx512_vnni_bf16()) EXPECT_GT(limits.at("bf16_peak_gflops").get<double>(), 1.0);
  else EXPECT_TRUE(limits.at("bf16_peak_gflops").is_null());
  // The AMX peak is calibrated only where the AMX kernels can run.
  if (mixq::kernels::best_isa() >= mixq::kernels::Isa::amx) {
    const double amx = limits.at("amx_int8_peak_gops");
    EXPECT_GT(amx, limits.at("int8_peak_gops").get<double>());  // 10x the VNNI loop on Sapphire Rapids
    EXPECT_NEAR(row.at("fraction_amx_peak").get<double>(), gops / amx, 1e-9);
  } else {
    EXPECT_TRUE(limits.at("amx_int8_peak_gops").is_null());
    EXPECT_TRUE(row.at("fraction_amx_peak").is_null());
  }
  // The read bandwidth is calibrated on AVX2 and AVX-512 machines (ymm or zmm
  // loads): median and best pass, each with its fraction.
  const auto isa = mixq::kernels::best_isa();
  if (isa >= mixq::kernels::Isa::avx2) {
    const double bw = limits.at("read_bandwidth_gbs"), best = limits.at("read_bandwidth_best_gbs");
    EXPECT_GT(bw, 0.1);
    EXPECT_GE(best, bw);
    const double wgbs = row.at("weight_gbs");
    EXPECT_NEAR(row.at("fraction_read_bandwidth").get<double>(), wgbs / bw, 1e-9);
    EXPECT_NEAR(row.at("fraction_read_bandwidth_best").get<double>(), wgbs / best, 1e-9);
  }
  EXPECT_FALSE(out.at("load_average").get<std::string>().empty());
}

TEST(CliBench, DefaultRunsEveryFormatThatQuantizes) {
  const auto r = run_cli({"bench", "--shape", "2x256x32", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const mixq::FormatTraits* f : mixq::all_formats()) {
    if (!f->quantize) continue;
    const std::string name(f->name);
    const auto at = r.out.find("\n" + name + " ");
    ASSERT_NE(at, std::string::npos) << name << " missing from:\n" << r.out;
    const auto line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    EXPECT_EQ(line.find("not run"), std::string::npos) << line;
    EXPECT_NE(line.find("2x256x32"), std::string::npos) << line;
  }
  EXPECT_NE(r.out.find("limits"), std::string::npos);
}

TEST(CliBench, BadArgumentsExitTwo) {
  auto shape = run_cli({"bench", "--shape", "0x64x32"});
  EXPECT_EQ(shape.exit_code, 2);
  EXPECT_NE(shape.err.find("--shape '0x64x32'"), std::string::npos) << shape.err;
  auto format = run_cli({"bench", "--format", "nvfp5"});
  EXPECT_EQ(format.exit_code, 2);
  EXPECT_NE(format.err.find("unknown format"), std::string::npos) << format.err;
  auto param = run_cli({"bench", "--format", "int8_tensorwise:convrot"});
  EXPECT_EQ(param.exit_code, 2);
  EXPECT_NE(param.err.find("key=value"), std::string::npos) << param.err;
}

}  // namespace
