#!/usr/bin/env bash
# The installed package works for a project outside this tree (called by
# `make test`): installs the release build into build/install, builds
# tests/consumer against it with find_package(mixq CONFIG), quantizes a small
# generated checkpoint with the INSTALLED `mixq` and runs the consumer on it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${MIXQ_BUILD:-$root/build/release}
prefix=$root/build/install
work=$root/build/consumer
rm -rf "$prefix" "$work"
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S tests/consumer -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
"$build/bin/mixq-gen" "$work/float.safetensors" --hidden 384 --blocks 1 --refiner-blocks 0 >/dev/null
"$prefix/bin/mixq" quantize "$work/float.safetensors" -o "$work/mixed.safetensors" \
  --recipe recipes/nvfp4-mlp-int8-convrot-attn.json >/dev/null
"$prefix/bin/mixq" --version
"$work/build/consumer" "$work/mixed.safetensors"
echo "check_install: the installed package builds and runs a consumer"
