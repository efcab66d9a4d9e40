#!/usr/bin/env bash
# Installs what ftrace-run needs to build and test on Debian 12 (run as root; skips what is
# already there).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libelf-dev libdw-dev libzstd-dev zlib1g-dev libcriterion-dev
      python3 clang clang-format libclang-rt-14-dev gdb libunwind-dev
      libboost-context-dev)
# CI (CI=true) or FTR_WITH_CHROMIUM=1 also installs Debian's Chromium, with which the flame
# graph test renders the SVG headless; without it that test checks the SVG as XML only.
if [[ ${CI:-} == true || ${FTR_WITH_CHROMIUM:-0} == 1 ]]; then
  pkgs+=(chromium)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
