#!/usr/bin/env bash
# Stress, not soak (DEVELOPERS.md): every nondeterministic case RUNS times (default 200) beside
# a loaded machine, two drivers at a time, then the whole suite SUITES times (default 3) in a
# row under load (scripts/soak.sh). Prints the counts; stops with a non-zero status at the first
# failing driver, keeping its log. Meant to take under 30 minutes on 2 CPUs; it does not yet:
# under load, 200 runs of `many` or `clonetls` take ~7 minutes per flag set, and one suite ~20.
#   usage: scripts/stress.sh            env: RUNS=N SUITES=N BUILD_DIR=DIR, STRESS=0 (no stress-ng)
#   the nondeterministic cases: the stack-switching programs (stacks_tests.py: coroutines that
#   migrate between threads, clone() threads, forced unwinding) in both exit modes, and the
#   behaviour cases of threads, signals, coroutines, jumps, exceptions, cancellation and exits.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
runs=${RUNS:-200}
suites=${SUITES:-3}
it=$top/tests/integration
logs=$(mktemp -d /tmp/ftr-stress.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
if [[ ${STRESS:-1} != 0 ]] && command -v stress-ng >/dev/null; then
  stress-ng --cpu "$(nproc)" --quiet & pids+=($!)
else
  for _ in $(seq "$(nproc)"); do (while :; do :; done) & pids+=($!); done
fi
modes=migrate,fctx-wide,fctx-deep,sjlj,many,clonetls,clonemany,clonevfork,btalt,altco,sigtrap,greenpre,green-many,green-leak,green-ctx,handler-altjmp,handler-nested,copystk,boost-callcc,boost-fiber-migrate,boost-unwind
cases='swapcontext*,hostile-migrate,hostile-migback,hostile-coro300,hostile-altjmp,hostile-jmpprof*'
cases+=',hostile-jmpfill-mono,hostile-sigswitch'
cases+=',threads-many,threads-exit,threads-detached,signals-usr1,signals-altstack,signals-siglongjmp'
cases+=',cancel-deferred,exc-nested,jmp-siglongjmp,unwind-backtrace-signal,unwind-libunwind-signal'
start=$(date +%s)
echo "== $runs runs of each nondeterministic case beside a loaded machine; logs in $logs"
drive() { # name command...: runs the driver, says how it ended
  local name=$1
  shift
  if "$@" >"$logs/$name.log" 2>&1; then
    echo "$name: $(tail -1 "$logs/$name.log")"
  else
    echo "$name: FAILED: $logs/$name.log"
    grep -E '^FAIL' "$logs/$name.log" | head -10
    return 1
  fi
}
status=0
drive stacks python3 "$it/stacks_tests.py" --bin "$build" --runs "$runs" --only "$modes" \
  --flagset gcc-pgfentry --flagset gcc-pg & a=$!
FTRACE_EXIT=hook drive stacks-hook python3 "$it/stacks_tests.py" --bin "$build" --runs "$runs" \
  --only "$modes" --flagset gcc-nop --flagset clang-pfe5 & b=$!
wait $a || status=1
wait $b || status=1
drive behaviours python3 "$it/behaviours.py" --bin "$build" --flagset gcc-pgfentry --opt O2 \
  --repeat "$runs" --only "$cases" & a=$!
FTRACE_EXIT=hook drive behaviours-hook python3 "$it/behaviours.py" --bin "$build" \
  --flagset gcc-nop --opt O2 --repeat "$runs" --only "$cases" & b=$!
wait $a || status=1
wait $b || status=1
echo "== cases: $(( $(date +%s) - start )) s"
((status == 0)) || exit 1
cleanup
pids=()
BUILD_DIR=$build "$top/scripts/soak.sh" "$suites"
echo "== all: $(( $(date +%s) - start )) s"
