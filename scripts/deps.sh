#!/usr/bin/env bash
# Installs what kiln's scripts need from Debian when missing (idempotent): the compilers and
# libraries of the build, and the tools the scripts themselves run (python3 for
# scripts/check-layers, pkg-config for scripts/test_install, clang for scripts/fuzz). Runs
# first in every script the README names, so a bare Debian 12 (a minbase root, a debian:12
# container) needs nothing else. Needs root or sudo when something is missing.
set -euo pipefail
pkgs=(cmake ninja-build g++ ccache pkg-config python3 libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
  liblapacke-dev libdnnl-dev nlohmann-json3-dev libcli11-dev clang libclang-rt-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "kiln: installing ${missing[*]}"
if ! command -v apt-get >/dev/null; then
  echo "kiln: apt-get not found: install these packages (Debian 12 names) by hand: ${missing[*]}" >&2
  exit 1
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "kiln: these packages are missing and installing them needs root, but sudo is not installed." >&2
    echo "kiln: as root run:  apt-get update && apt-get install -y ${missing[*]}" >&2
    echo "kiln: then run this script again." >&2
    exit 1
  fi
  SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
# Keep the log short, but show apt's own error when it fails.
if ! out=$("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" 2>&1); then
  echo "$out" | tail -n 20 >&2
  echo "kiln: apt-get install failed (see above)" >&2
  exit 1
fi
