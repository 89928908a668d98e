#include "support/kernel_paths.hpp"

#include <cpuid.h>
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
  if (mode == "avx512" || mode == "amx") return true;
  if (mode == "auto") {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
  }
  return false;
}

// AMX paths: MIXQ_REQUIRE_ISA=amx, or auto on a CPU whose CPUID reports
// AMX-INT8 (leaf 7, EDX bit 25) and whose OS enabled the tile state (XCR0
// bits 17-18): there mixq must have found and used it.
bool amx_skips_forbidden() {
  const char* env = std::getenv("MIXQ_REQUIRE_ISA");
  const std::string mode = env ? env : "";
  if (mode == "amx") return true;
  if (mode != "auto") return false;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 25))) return false;
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 0x60000u) == 0x60000u;
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
  if (isa == kernels::Isa::amx) return "AMX-TILE/AMX-INT8";
  return isa == kernels::Isa::avx512 ? "AVX-512 F/BW/VL/DQ/VNNI/BF16" : "AVX2/FMA/F16C";
}

bool skip_forbidden(kernels::Isa isa) {
  if (isa == kernels::Isa::amx) return amx_skips_forbidden();
  return isa == kernels::Isa::avx512 && avx512_skips_forbidden();
}

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
