#!/usr/bin/env bash
# Installs the Debian packages Trident needs, only those that are missing.
# Safe to run again: it does nothing when everything is present.
set -euo pipefail
packages=(
  cmake g++ make pkg-config ccache
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libfmt-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libopenmpi-dev openmpi-bin
  libpcre2-dev python3-regex
  fortunes
  python3-torch python3-numpy
  libjemalloc2
  chromium imagemagick fonts-dejavu-core
  pybind11-dev python3-dev python3-pytest
  slurm-wlm munge
  clang libclang-rt-14-dev libomp-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing missing Debian packages: ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
