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
