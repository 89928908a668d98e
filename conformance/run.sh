#!/usr/bin/env bash
# `make conformance`: cross-checks mixq against comfy-kitchen (see
# conformance/CONFORMANCE.md). Not part of `make test`: it downloads PyTorch.
#
#   1. build/conformance-venv (created when missing) gets torch, comfy-kitchen,
#      safetensors and packaging from PyPI. PyPI's Linux torch wheel is the
#      CUDA build: with its nvidia-* dependencies it is ~4.5 GB to download and
#      ~5.6 GB installed. `pip install torch --no-deps` does not work: the
#      wheel's libtorch_cuda.so links cudart, cublas, cudnn, nccl, cufile,
#      cusparse(Lt), cufft, nvrtc, nvshmem and cupti, so `import torch` fails
#      without them, even on a machine without a GPU (comfy-kitchen then runs
#      its eager PyTorch backend on the CPU, which is what we compare with).
#      comfy-kitchen imports `packaging` without declaring it.
#   2. installs mixq from this tree into it (its own CMake build folder,
#      build/python-conformance: scikit-build-core starts a folder afresh when
#      another interpreter uses it, so sharing test's would rebuild both);
#   3. runs conformance/conformance.py, which writes its table into
#      conformance/CONFORMANCE.md and exits 1 on any disagreement.
# Extra arguments go to conformance.py (e.g. --seed 3 --rows 1,16).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=${MIXQ_CONFORMANCE_VENV:-$root/build/conformance-venv}
python=${PYTHON:-python3}

sudo_cmd() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

needed="torch comfy_kitchen safetensors packaging numpy nanobind scikit_build_core"
if ! "$venv/bin/python" -c "import ${needed// /, }" >/dev/null 2>&1; then
  if [ ! -x "$venv/bin/python" ]; then
    echo "conformance: creating $venv"
    if ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
      sudo_cmd apt-get update -qq
      sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
    fi
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
  fi
  echo "conformance: installing torch (CUDA wheel and its dependencies, ~4.5 GB), comfy-kitchen, safetensors"
  "$venv/bin/python" -m pip install -q torch comfy-kitchen safetensors packaging numpy \
    scikit-build-core nanobind
fi

log=$root/build/conformance-install.log
echo "conformance: pip install . (log: $log)"
if ! "$venv/bin/python" -m pip install --no-build-isolation --no-deps -v \
    -Cbuild-dir="build/python-conformance/{wheel_tag}" . >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "conformance: pip install failed (full log: $log)" >&2
  exit 1
fi

cd "$root/conformance"
exec "$venv/bin/python" conformance.py --write "$@"
