#!/usr/bin/env bash
# Installs leanseq's build and run dependencies from Debian 12 (bookworm) apt, only those missing.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config ccache
  libtorch-dev libopenblas0-pthread libgloo-dev
  libsentencepiece-dev libcli11-dev libyaml-cpp-dev nlohmann-json3-dev
  libicu-dev libcairo2-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  sword-text-sparv sword-text-web libsword-utils
  python3-dev pybind11-dev python3-pytest python3-venv python3-pip python3-setuptools python3-wheel
  libcpp-httplib-dev chromium libdnnl-dev libjemalloc-dev dpkg-dev
  libcld2-dev libgumbo-dev
  clang-14 libclang-rt-14-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to apt-get install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
