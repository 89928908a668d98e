#!/usr/bin/env bash
# Runs every side-by-side benchmark (build/bench/bench/bench_*), one after the
# other, so each has the machine to itself. `make bench` builds and calls this.
# Extra arguments are passed to every benchmark (e.g. --quick).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${MIXQ_BENCH_DIR:-$root/build/bench/bench}"
shopt -s nullglob
benches=("$dir"/bench_*)
if [ ${#benches[@]} -eq 0 ]; then
  echo "bench.sh: no benchmarks in $dir (build with: cmake --preset bench && cmake --build --preset bench)" >&2
  exit 1
fi
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) ($(nproc) cpus), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for b in "${benches[@]}"; do
  [ -x "$b" ] || continue
  echo "## $(basename "$b")"
  "$b" "$@"
  echo
done
