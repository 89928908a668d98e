#!/usr/bin/env bash
# Which kernel paths the test suite ran (called by `make test` after ctest).
# Reads the log the tests append to (tests/support/kernel_paths.hpp), by
# default build/release/test-tmp/kernel-paths.log, and prints one line per
# path: "ran", or "SKIPPED" with what the CPU lacks. Exits 1 when an AVX-512
# path never ran and MIXQ_REQUIRE_ISA asks for them (avx512; or auto on a CPU
# with AVX-512F), or an AMX path never ran (amx; or auto on a CPU reporting
# AMX-INT8), so CI fails even if a test skipped without failing.
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-build/release/test-tmp/kernel-paths.log}
if [ ! -s "$log" ]; then
  echo "kernel paths: no log at $log (run the tests first)" >&2
  exit 1
fi

require=${MIXQ_REQUIRE_ISA:-none}
# AMX paths must run where the CPU reports AMX-INT8 (auto) or always (amx);
# the tests themselves also check that the OS enabled it (kernel_paths.cpp).
require_amx=0
if [ "$require" = auto ]; then
  if grep -qw amx_int8 /proc/cpuinfo; then require_amx=1; fi
  if grep -qw avx512f /proc/cpuinfo; then require=avx512; else require=none; fi
fi
if [ "$require" = amx ]; then require=avx512; require_amx=1; fi

# Fields: status, path, isa, test, missing. A path ran if any test ran it.
echo "kernel paths covered by the tests:"
bad=0
while IFS=$'\t' read -r path isa; do
  if awk -F'\t' -v p="$path" '$1 == "ran" && $2 == p { found = 1 } END { exit !found }' "$log"; then
    printf '  %-32s %-7s ran\n' "$path" "$isa"
  else
    why=$(awk -F'\t' -v p="$path" '$2 == p { print $5; exit }' "$log")
    printf '  %-32s %-7s SKIPPED (this CPU lacks %s)\n' "$path" "$isa" "$why"
    if [ "$require" = avx512 ] && [ "$isa" = avx512 ]; then bad=1; fi
    if [ "$require_amx" = 1 ] && [ "$isa" = amx ]; then bad=1; fi
  fi
done < <(cut -f2,3 "$log" | sort -u)
if [ "$bad" = 1 ]; then
  echo "kernel paths: an AVX-512 path was skipped on a machine that must run them (MIXQ_REQUIRE_ISA=${MIXQ_REQUIRE_ISA})" >&2
  exit 1
fi
