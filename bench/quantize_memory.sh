#!/usr/bin/env bash
# Peak resident memory and throughput of `mixq quantize` on a ~2 GB float
# checkpoint (BENCHMARKS.md, "Quantization"). Generates a MiniMax-H3-shaped
# BF16 checkpoint with mixq-gen, then runs each shipped recipe under
# /usr/bin/time -v. Throughput is source bytes / wall time; "CPU s" (user +
# system) is reported too, since wall time means little on a shared machine.
#
#   bench/quantize_memory.sh              # 2GB source, hidden 3072
#   SIZE=4GB HIDDEN=5376 bench/quantize_memory.sh
#   MIXQ_BIN=build/h-x/bin bench/quantize_memory.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${MIXQ_BIN:-$ROOT/build/release/bin}
SIZE=${SIZE:-2GB}
HIDDEN=${HIDDEN:-3072}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mixq-qbench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
for tool in mixq mixq-gen; do
  [ -x "$BIN/$tool" ] || { echo "missing $BIN/$tool (build first: make build)" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }

"$BIN/mixq-gen" "$WORK/source.safetensors" --hidden "$HIDDEN" --target-size "$SIZE" --dtype bf16
SRC_BYTES=$(stat -c %s "$WORK/source.safetensors")
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) threads"
printf '\n| recipe | source | output | wall s | CPU s | GB/s of source (wall) | peak RSS |\n|---|---|---|---|---|---|---|\n'
for recipe in "$ROOT"/recipes/*.json; do
  rm -rf "$WORK/out.safetensors"
  /usr/bin/time -v "$BIN/mixq" quantize "$WORK/source.safetensors" -o "$WORK/out.safetensors" \
    --recipe "$recipe" --quiet 2> "$WORK/time.txt" || { cat "$WORK/time.txt" >&2; exit 1; }
  rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time.txt")
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$WORK/time.txt" |
         awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
  cpu=$(awk -F': ' '/User time|System time/ { t += $2 } END { print t }' "$WORK/time.txt")
  out_bytes=$(stat -c %s "$WORK/out.safetensors")
  awk -v r="$(basename "$recipe" .json)" -v s="$SRC_BYTES" -v o="$out_bytes" -v w="$wall" -v c="$cpu" -v k="$rss_kb" \
    'BEGIN { printf "| %s | %.2f GB | %.2f GB | %.1f | %.1f | %.3f | %.0f MB |\n", r, s/1e9, o/1e9, w, c, s/1e9/w, k*1024/1e6 }'
done
