#!/usr/bin/env bash
# The PyTorch tests (called by `make test-torch`; `make conformance` uses the
# same environment):
#   1. adds to build/venv (the one venv of `make test`'s Python suite, created
#      here when missing) torch, comfy-kitchen,
#      diffusers, transformers, safetensors, packaging, numpy, pytest,
#      nanobind and scikit-build-core from PyPI. PyPI's Linux torch wheel is
#      the CUDA build: ~4.5 GB to download, ~5.6 GB installed (see
#      conformance/CONFORMANCE.md for why the CPU wheel index is not used);
#   2. installs mixq from this tree into it (install_mixq in scripts/venv.sh,
#      the same CMake build folder as scripts/python_test.sh, so after
#      `make test` this is a no-op rebuild);
#   3. runs pytest on python/tests_torch against the `mixq` binary in
#      $MIXQ_CLI (default build/release/bin/mixq).
# MIXQ_TORCH_VENV overrides the environment; extra arguments go to pytest.
# With --install-only it stops after step 2 (conformance/run.sh uses that).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=${MIXQ_TORCH_VENV:-$root/build/venv}
export MIXQ_CLI=${MIXQ_CLI:-$root/build/release/bin/mixq}
python=${PYTHON:-python3}

. scripts/venv.sh

install_only=0
if [ "${1:-}" = "--install-only" ]; then
  install_only=1
  shift
fi

modules="torch comfy_kitchen diffusers transformers safetensors packaging numpy pytest nanobind scikit_build_core"
if ! "$venv/bin/python" -c "import ${modules// /, }" >/dev/null 2>&1; then
  ensure_venv "$venv"
  echo "torch_test: installing torch (CUDA wheel and its dependencies, ~4.5 GB), comfy-kitchen, diffusers, ..."
  "$venv/bin/python" -m pip install -q torch comfy-kitchen diffusers transformers safetensors packaging \
    numpy pytest nanobind scikit-build-core
fi

if [ ! -x "$MIXQ_CLI" ]; then
  echo "torch_test: no mixq binary at $MIXQ_CLI (run 'make build' or set MIXQ_CLI)" >&2
  exit 1
fi

install_mixq "$venv" "$root/build/torch-mixq-install.log"
[ "$install_only" = 1 ] && exit 0

# Run from python/tests_torch so `import mixq` is the installed package, not the source folder.
cd "$root/python/tests_torch"
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" .
