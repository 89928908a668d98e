#!/usr/bin/env bash
# `make conformance`: cross-checks mixq against comfy-kitchen (see
# conformance/CONFORMANCE.md). Not part of `make test`: it downloads PyTorch.
#
#   1. scripts/torch_test.sh --install-only prepares build/venv, the
#      environment `make test-torch` uses (created when missing: torch,
#      comfy-kitchen, diffusers, safetensors, ... from PyPI). PyPI's Linux torch
#      wheel is the CUDA build: with its nvidia-* dependencies it is ~4.5 GB to
#      download and ~5.6 GB installed. `pip install torch --no-deps` does not
#      work: the wheel's libtorch_cuda.so links cudart, cublas, cudnn, nccl,
#      cufile, cusparse(Lt), cufft, nvrtc, nvshmem and cupti, so `import torch`
#      fails without them, even on a machine without a GPU (comfy-kitchen then
#      runs its eager PyTorch backend on the CPU, which is what we compare
#      with). comfy-kitchen imports `packaging` without declaring it. It also
#      installs mixq from this tree into that environment;
#   2. runs conformance/conformance.py, which writes its table into
#      conformance/CONFORMANCE.md and exits 1 on any disagreement.
# Extra arguments go to conformance.py (e.g. --seed 3 --rows 1,16).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=${MIXQ_TORCH_VENV:-$root/build/venv}
MIXQ_TORCH_VENV=$venv ./scripts/torch_test.sh --install-only
cd "$root/conformance"
exec "$venv/bin/python" conformance.py --write "$@"
