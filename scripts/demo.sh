#!/usr/bin/env bash
# Quick start: set up, build, trace the bundled example, print its call tree.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/setup.sh"
"$top/scripts/build.sh"
build=${BUILD_DIR:-$top/build}
cd "$build"
gcc -O2 -g -pg -mfentry -o demo "$top/examples/demo.c" -pthread
./ftrace-run -o demo.ftr ./demo
./ftrace-report demo.ftr
