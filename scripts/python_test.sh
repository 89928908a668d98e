#!/usr/bin/env bash
# The Python package's tests (called by `make test`):
#   1. creates build/venv when missing (python3 -m venv; installs Debian's
#      python3-venv first if this python has no ensurepip) with
#      scikit-build-core, nanobind, pytest and numpy from PyPI;
#   2. installs the package from this tree into it (install_mixq in
#      scripts/venv.sh: the extension links build/release's library), built
#      with nanobind's GIL and reference-count assertions (MIXQ_PYTHON_CHECKS,
#      python/CMakeLists.txt): a binding that touches a Python object without
#      the GIL aborts the suite. MIXQ_PYTHON_CHECKS=OFF builds the release
#      module instead. The setting stays in that build folder, so
#      scripts/torch_test.sh (same folder) then runs against the same module;
#   3. runs pytest on python/tests against the `mixq` binary in $MIXQ_CLI
#      (default build/release/bin/mixq, which `make build` produces).
# Extra arguments go to pytest, e.g. scripts/python_test.sh -k forward -x
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=${MIXQ_VENV:-$root/build/venv}
export MIXQ_CLI=${MIXQ_CLI:-$root/build/release/bin/mixq}
python=${PYTHON:-python3}

. scripts/venv.sh
ensure_venv "$venv"

if [ ! -x "$MIXQ_CLI" ]; then
  echo "python_test: no mixq binary at $MIXQ_CLI (run 'make build' or set MIXQ_CLI)" >&2
  exit 1
fi

checks=${MIXQ_PYTHON_CHECKS:-ON}
case $checks in ON|OFF) ;; *) echo "python_test: MIXQ_PYTHON_CHECKS must be ON or OFF" >&2; exit 2;; esac
export MIXQ_EXPECT_CHECKS=$checks  # test_package.py checks the module it got

echo "python_test: nanobind checks $checks"
install_mixq "$venv" "$root/build/python-install.log" \
  --config-settings=cmake.define.MIXQ_PYTHON_CHECKS=$checks

# Run from python/tests so `import mixq` is the installed package, not the source folder.
cd "$root/python/tests"
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" .
