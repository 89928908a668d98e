# Sourced by python_test.sh and torch_test.sh: ensure_venv VENV creates the
# one virtual environment of the Python tests when it is missing (installing
# Debian's python3-venv first if this python has no ensurepip), with the build
# requirements and pytest. The caller sets $python.
sudo_cmd() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

ensure_venv() {
  local venv=$1
  [ -x "$venv/bin/python" ] && return 0
  echo "venv: creating $venv"
  if ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    echo "venv: $python has no venv/ensurepip; installing python3-venv"
    sudo_cmd apt-get update -qq
    sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
  fi
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q scikit-build-core nanobind pytest numpy
}

# install_mixq VENV LOG [PIP_ARGS...]: pip install . into VENV (no build
# isolation, no deps; CMake build folder build/python/<wheel tag>, kept, so a
# rebuild is incremental). When build/release is configured, its library is
# brought up to date, installed into build/python/prefix, and the extension
# links that one (MIXQ_LIBRARY_PREFIX in CMakeLists.txt) instead of compiling
# the library a second time. The caller sets $root.
install_mixq() {
  local venv=$1 log=$2; shift 2
  local release=$root/build/release prefix=""
  if [ -f "$release/CMakeCache.txt" ]; then
    prefix=$root/build/python/prefix
    cmake --build "$release" --target mixq mixq-cli >/dev/null
    cmake --install "$release" --component dev --prefix "$prefix" >/dev/null
  fi
  echo "install_mixq: pip install . ${prefix:+(library from $prefix) }(log: $log)"
  if ! "$venv/bin/python" -m pip install --no-build-isolation --no-deps -v \
      --config-settings=cmake.define.MIXQ_LIBRARY_PREFIX="$prefix" "$@" . >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "install_mixq: pip install failed (full log: $log)" >&2
    return 1
  fi
}
