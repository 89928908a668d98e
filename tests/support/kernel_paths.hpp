#pragma once
// Kernel paths in tests. A test that covers an instruction-set path (e.g.
// "int_gemm:avx512_vnni") declares it through kernel_path(): the path runs,
// or it is reported as skipped with what the CPU lacks. Every declaration is
// appended to $MIXQ_TEST_TMP/kernel-paths.log, which scripts/kernel_paths.sh
// summarises after ctest (`make test` prints which paths ran).
//
// MIXQ_REQUIRE_ISA turns skips of AVX-512 paths into test failures:
//   avx512  always (a CI machine that must run the AVX-512 kernels);
//   auto    when the CPU reports AVX-512F, i.e. on any AVX-512 machine, even
//           one lacking a feature mixq's AVX-512 kernels need (VNNI, BF16,
//           VBMI): those kernels would then go untested; and AMX paths
//           when CPUID reports AMX-INT8;
//   amx     every AVX-512 and AMX path;
//   unset / none: skips are only reported.
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "kernels/cpu.hpp"

namespace mixq::testing {

// Empty when this CPU runs kernels of `isa`, else what it lacks.
std::string missing_isa(kernels::Isa isa);

// Declares that the current test runs `path`, which needs `isa` and, when
// `missing` is not empty, cannot run here for lack of it. Logs the outcome;
// returns whether the path may run. A skip of an AVX-512 path that
// MIXQ_REQUIRE_ISA forbids adds a test failure naming the path.
bool kernel_path(std::string_view path, kernels::Isa isa, std::string_view missing);

// Logs like kernel_path() and returns whether the path may run, without
// adding a failure (for MIXQ_KERNEL_PATH_OR_SKIP, which fails fatally).
bool log_kernel_path(std::string_view path, kernels::Isa isa, std::string_view missing);
// Whether MIXQ_REQUIRE_ISA forbids skipping a path that needs `isa`.
bool skip_forbidden(kernels::Isa isa);

// kernel_path() with the CPU's ISA level as the only requirement.
inline bool kernel_path(std::string_view path, kernels::Isa isa) {
  return kernel_path(path, isa, missing_isa(isa));
}

}  // namespace mixq::testing

// In a test body or SetUp(): runs on, or skips the test naming the path (a
// fatal failure instead when MIXQ_REQUIRE_ISA forbids the skip: after a mere
// failure, a skip in SetUp() would still run the body on a CPU without the ISA).
#define MIXQ_KERNEL_PATH_OR_SKIP(path, isa, missing)                                                    \
  do {                                                                                                  \
    const std::string mixq_path_(path), mixq_missing_(missing);                                         \
    if (!::mixq::testing::log_kernel_path(mixq_path_, isa, mixq_missing_)) {                            \
      if (::mixq::testing::skip_forbidden(isa))                                                         \
        GTEST_FAIL() << "kernel path " << mixq_path_ << " was skipped (the CPU lacks " << mixq_missing_ \
                     << ") but MIXQ_REQUIRE_ISA requires every AVX-512 path to run";                    \
      GTEST_SKIP() << "kernel path " << mixq_path_ << " needs " << mixq_missing_ << ", absent on this CPU"; \
    }                                                                                                   \
  } while (0)
