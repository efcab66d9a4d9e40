#!/usr/bin/env bash
# Stress, not soak (DEVELOPERS.md): every nondeterministic case at least RUNS times (default 200)
# under load, and the whole suite SUITES times (default 3) in a row under load; meant to take
# under 30 minutes on 2 CPUs, which it does not yet: on a 2-CPU host whose hooks read the clock
# with a system call (kvm-clock), 14 minutes ran 88 of 88 runs of each stack mode per driver
# and a sixth of the behaviour drivers' runs (their reports' parsing is most of it). Both at once: the suite runs (scripts/soak.sh) while four drivers
# repeat the nondeterministic cases beside it, each the other's load, with stress-ng (niced)
# taking what CPU is left. Each suite already runs every stack-switching mode 8 times (4 flag
# sets, 2 exit modes) and every behaviour case 10 times (5 configurations, -O0 and -O2): the
# drivers run the rest, half in each of two configurations. Prints the counts; a non-zero
# status if anything failed, keeping the logs.
#   usage: scripts/stress.sh            env: RUNS=N SUITES=N BUILD_DIR=DIR, STRESS=0 (no stress-ng)
#   the nondeterministic cases: the stack-switching programs (stacks_tests.py: coroutines that
#   migrate between threads, clone() threads, green threads switched in signal handlers, forced
#   unwinding) in both exit modes, and the behaviour cases of threads, signals, coroutines,
#   jumps, exceptions, cancellation and exits.
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
  nice -n 10 stress-ng --cpu "$(nproc)" --quiet & pids+=($!)
fi
modes=migrate,fctx-wide,fctx-deep,sjlj,many,clonetls,clonemany,clonevfork,btalt,altco,sigtrap
modes+=,greenpre,green-many,green-leak,green-ctx,handler-altjmp,handler-nested,copystk
modes+=,boost-callcc,boost-fiber-migrate,boost-unwind
cases='swapcontext*,hostile-migrate,hostile-migback,hostile-coro300,hostile-altjmp,hostile-jmpprof*'
cases+=',hostile-jmpfill-mono,hostile-sigswitch'
cases+=',threads-many,threads-exit,threads-detached,signals-usr1,signals-altstack,signals-siglongjmp'
cases+=',cancel-deferred,exc-nested,jmp-siglongjmp,unwind-backtrace-signal,unwind-libunwind-signal'
# what the suites do not run already, in two halves
stack_runs=$(((runs - 8 * suites + 1) / 2))
case_runs=$(((runs - 10 * suites + 1) / 2))
((stack_runs < 1)) && stack_runs=1
((case_runs < 1)) && case_runs=1
start=$(date +%s)
echo "== $suites suites, and each nondeterministic case $runs times in all, under load; logs in $logs"
drive() { # name command...: runs the driver, says how it ended
  local name=$1
  shift
  if "$@" >"$logs/$name.log" 2>&1; then
    echo "$name: $(tail -1 "$logs/$name.log") ($(($(date +%s) - start)) s)"
  else
    echo "$name: FAILED: $logs/$name.log"
    grep -E '^FAIL' -A3 "$logs/$name.log" | head -20
    return 1
  fi
}
# the stack-switching modes: through with the system clock, and every return hooked with the TSC
drive stacks python3 "$it/stacks_tests.py" --bin "$build" --runs "$stack_runs" --only "$modes" \
  --flagset gcc-pgfentry &
a=$!
FTRACE_EXIT=hook FTRACE_CLOCK=tsc drive stacks-hook python3 "$it/stacks_tests.py" --bin "$build" \
  --runs "$stack_runs" --only "$modes" --flagset clang-pfe5 &
b=$!
drive behaviours python3 "$it/behaviours.py" --bin "$build" --flagset gcc-pgfentry --opt O2 \
  --repeat "$case_runs" --only "$cases" &
c=$!
FTRACE_EXIT=hook drive behaviours-hook python3 "$it/behaviours.py" --bin "$build" \
  --flagset gcc-nop --opt O2 --repeat "$case_runs" --only "$cases" &
d=$!
status=0
LOAD=0 BUILD_DIR=$build "$top/scripts/soak.sh" "$suites" || status=1
for p in $a $b $c $d; do wait "$p" || status=1; done
echo "== stacks: $stack_runs runs per mode per driver, behaviours: $case_runs per case per driver"
echo "== all: $(($(date +%s) - start)) s; $( ((status == 0)) && echo passed || echo FAILED)"
exit $status
