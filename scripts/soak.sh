#!/usr/bin/env bash
# Runs the test suite (ctest in build/, or $BUILD_DIR) RUNS times in a row on a loaded machine:
# LOAD busy processes (default: one per CPU) compete with the tests for every run. Stops at
# the first failing run and keeps its log. A flaky test is a defect: this is how to find one.
#   usage: scripts/soak.sh [RUNS] [ctest args...]     (RUNS default 20)
#   env:   LOAD=N busy processes; stress-ng is used instead when installed (STRESS=0: never).
#          LOAD=0: no busy process; then load the machine otherwise, e.g. a second soak.sh on
#          another clone, each suite the other's load (twice the runs in the same time).
#          The test programs are built once, into $BUILD_DIR/test-cache (tests/integration/
#          buildcache.py): the runs after the first compile nothing. FTR_BUILD_CACHE=0: no cache.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
runs=${1:-20}
shift || true
load=${LOAD:-$(nproc)}
logs=$(mktemp -d /tmp/ftr-soak.XXXXXX)
export FTR_KEEP_FAILED=$logs/kept # a failing behaviour case leaves its trace and program there
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
if ((load == 0)); then
  : # stress-ng --cpu 0 would mean one per CPU
elif [[ ${STRESS:-1} != 0 ]] && command -v stress-ng >/dev/null; then
  stress-ng --cpu "$load" --quiet & pids+=($!)
else
  for _ in $(seq "$load"); do (while :; do :; done) & pids+=($!); done
fi
echo "== $runs runs of ctest $* beside $load busy processes; logs in $logs"
for i in $(seq "$runs"); do
  start=$(date +%s)
  if (cd "$build" && ctest --output-on-failure -j2 "$@") >"$logs/run$i.log" 2>&1; then
    echo "run $i: passed ($(( $(date +%s) - start )) s)"
  else
    echo "run $i: FAILED ($(( $(date +%s) - start )) s): $logs/run$i.log"
    grep -E "\(Failed\)|\(Timeout\)|\(SEGFAULT\)|FAIL " "$logs/run$i.log" | head -20
    exit 1
  fi
done
echo "== $runs of $runs runs passed"
