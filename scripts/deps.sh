#!/usr/bin/env bash
# Installs kiln's build dependencies from Debian when missing (idempotent).
set -euo pipefail
pkgs=(cmake ninja-build g++ ccache libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev liblapacke-dev libdnnl-dev nlohmann-json3-dev libcli11-dev clang libclang-rt-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "kiln: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
