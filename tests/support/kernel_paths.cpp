#include "support/kernel_paths.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>

#include <fmt/format.h>

namespace mixq::testing {
namespace {

bool avx512_skips_forbidden() {
  const char* env = std::getenv("MIXQ_REQUIRE_ISA");
  const std::string mode = env ? env : "";
  if (mode == "avx512") return true;
  if (mode == "auto") {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
  }
  return false;
}

// One line per (test, path): "<ran|skipped>\t<path>\t<isa>\t<test>\t<missing>".
void log_line(const std::string& line) {
  static std::mutex mutex;
  static std::set<std::string> written;
  std::lock_guard lock(mutex);
  if (!written.insert(line).second) return;
  const char* root = std::getenv("MIXQ_TEST_TMP");
  if (root == nullptr) return;
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  const std::string path = std::string(root) + "/kernel-paths.log";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const std::string text = line + "\n";
  // One write() with O_APPEND: lines of parallel test processes never interleave.
  ssize_t ignored = ::write(fd, text.data(), text.size());
  (void)ignored;
  ::close(fd);
}

}  // namespace

std::string missing_isa(kernels::Isa isa) {
  if (kernels::best_isa() >= isa) return {};
  return isa == kernels::Isa::avx512 ? "AVX-512 F/BW/VL/DQ/VNNI/BF16" : "AVX2/FMA/F16C";
}

bool skip_forbidden(kernels::Isa isa) { return isa == kernels::Isa::avx512 && avx512_skips_forbidden(); }

bool log_kernel_path(std::string_view path, kernels::Isa isa, std::string_view missing) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string test = info ? fmt::format("{}.{}", info->test_suite_name(), info->name()) : "?";
  const bool runs = missing.empty();
  log_line(fmt::format("{}\t{}\t{}\t{}\t{}", runs ? "ran" : "skipped", path, kernels::isa_name(isa), test,
                       missing));
  return runs;
}

bool kernel_path(std::string_view path, kernels::Isa isa, std::string_view missing) {
  const bool runs = log_kernel_path(path, isa, missing);
  if (!runs && skip_forbidden(isa))
    ADD_FAILURE() << "kernel path " << path << " was skipped (the CPU lacks " << missing
                  << ") but MIXQ_REQUIRE_ISA requires every AVX-512 path to run";
  return runs;
}

}  // namespace mixq::testing
