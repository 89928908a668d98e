#!/usr/bin/env bash
# `make demo [CHECKPOINT=path]`: the whole job end to end, in seconds.
#
# Without an argument: generate a small float checkpoint with MiniMax-H3 layer
# names and structure (mixq-gen: hidden 768 = 5376/7, 2 blocks + 1 token
# refiner block, H3's ratios of attention, FFN and AdaLN sizes), quantize it
# with the mixed NVFP4-MLP + INT8-ConvRot-attention recipe, then inspect, plan
# for SGLang's MiniMax-H3 loader, verify against the float source, and run
# block 0's quantized linears on random activations against the float layers.
#
# With CHECKPOINT: a float checkpoint is quantized the same way; an already
# quantized one is inspected, planned, verified and run as it is.
#
# Env: MIXQ_BIN (default build/release/bin), RECIPE (default
# recipes/nvfp4-mlp-int8-convrot-attn.json), M (activation rows, default 64).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${MIXQ_BIN:-$ROOT/build/release/bin}
MIXQ="$BIN/mixq"
GEN="$BIN/mixq-gen"
RECIPE=${RECIPE:-$ROOT/recipes/nvfp4-mlp-int8-convrot-attn.json}
M=${M:-64}
for tool in "$MIXQ" "$GEN"; do
  [ -x "$tool" ] || { echo "demo: missing $tool (run 'make build' first)" >&2; exit 1; }
done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mixq-demo.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

section() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
size_of() { du -sb "$1" | awk '{ printf "%.1f MB", $1 / 1e6 }'; }
# "prefix format in_features" for every layer, from inspect --json (one key per line).
layers_of() {
  "$MIXQ" inspect "$1" --json | awk '
    /^  "layers": \[/ { in_layers = 1 }
    /^  "other_tensors"/ { in_layers = 0 }
    in_layers && /^      "format":/ { f = $2; gsub(/[",]/, "", f) }
    in_layers && /^      "in_features":/ { k = $2; gsub(/,/, "", k) }
    in_layers && /^      "prefix":/ { p = $2; gsub(/[",]/, "", p); print p, (f == "null" ? "-" : f), k }'
}

SOURCE=""
QUANT=""
if [ $# -eq 0 ] || [ -z "${1:-}" ]; then
  section "1. A float checkpoint with MiniMax-H3 structure (scaled 1/7)"
  SOURCE="$WORK/h3-demo-bf16.safetensors"
  "$GEN" "$SOURCE" --hidden 768 --blocks 2 --refiner-blocks 1 --dtype bf16
else
  section "1. Your checkpoint: $1"
  if layers_of "$1" | awk '$2 != "-" { found = 1 } END { exit !found }'; then
    QUANT="$1"
    echo "already quantized: skipping quantization and the float comparison"
  else
    SOURCE="$1"
    echo "float checkpoint: it will be quantized with $(basename "$RECIPE")"
  fi
fi

if [ -n "$SOURCE" ]; then
  section "2. Quantize with $(basename "$RECIPE")"
  sed -n 's/.*"description": "\(.*\)",/\1/p' "$RECIPE" | fold -s -w 100
  QUANT="$WORK/h3-demo-mixed.safetensors"
  "$MIXQ" quantize "$SOURCE" -o "$QUANT" --recipe "$RECIPE"
  echo "size: $(size_of "$SOURCE") -> $(size_of "$QUANT")"
fi

section "3. mixq inspect"
# The layer table and the per-format summary; warnings are counted, not listed.
"$MIXQ" inspect "$QUANT" | awk '/^warnings:/ { w = 1; next } w && /^  - / { n++; next } { print }
  END { if (n) printf "(%d warnings: see mixq inspect)\n", n }' | head -n 70

section "4. mixq plan --profile sglang-minimax-h3 --max-tp"
# Verdict and runtime configuration, the quantized layers' methods, admitted TP.
"$MIXQ" plan "$QUANT" --profile sglang-minimax-h3 --max-tp | awk '
  /^warnings:/ { exit }
  NR <= 3 || /^layer / || /^admitted/ || ($2 != "-" && NF >= 6) { print }' || true

section "5. mixq verify${SOURCE:+ --against the float source}"
if [ -n "$SOURCE" ]; then
  "$MIXQ" verify "$QUANT" --against "$SOURCE" || true
else
  "$MIXQ" verify "$QUANT" || true
fi

section "6. Block 0's quantized linears on random activations (M=$M)"
BLOCK=$(layers_of "$QUANT" | awk '$2 != "-" { print $1 }' | grep -m1 -o '^\(.*\.\)\?blocks\.0\.' || true)
if [ -z "$BLOCK" ]; then
  BLOCK=$(layers_of "$QUANT" | awk '$2 != "-" { print $1; exit }')
fi
printf '%-34s %-16s %10s %12s\n' "layer" "format" "time" "${SOURCE:+rel.err vs float}"
layers_of "$QUANT" | awk -v b="$BLOCK" '$2 != "-" && index($1, b) == 1' | while read -r prefix format k; do
  "$GEN" npy "$WORK/x.npy" "$M" "$k" 42
  start=$(date +%s%N)
  "$MIXQ" linear "$QUANT" --layer "$prefix" -i "$WORK/x.npy" -o "$WORK/yq.npy" --quiet
  took="$(ms_since "$start") ms"
  err=""
  if [ -n "$SOURCE" ]; then
    "$MIXQ" linear "$SOURCE" --layer "$prefix" -i "$WORK/x.npy" -o "$WORK/yf.npy" --quiet
    err=$("$GEN" compare "$WORK/yq.npy" "$WORK/yf.npy" | awk '{ printf "%.4f", $1 }')
  fi
  printf '%-34s %-16s %10s %12s\n' "$prefix" "$format" "$took" "$err"
done
echo "(time: one 'mixq linear' process: load, prepare weights, one forward, write Y)"
