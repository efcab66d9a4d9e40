#!/usr/bin/env bash
# Stress, not soak (DEVELOPERS.md): every nondeterministic case at least RUNS times (default 200)
# under load, and the whole suite SUITES times (default 3) in a row under load, meant to take
# under 30 minutes on 2 CPUs once the test programs are built (BUILD/test-cache: scripts/test.sh, or any
# run of the suite, builds them; a first run builds them too, which takes longer). Both at once:
# the suite runs (scripts/soak.sh) while drivers repeat the nondeterministic cases beside it,
# each the others' load (niced, so that the suites keep pace and the drivers fill the CPU to
# the end), with stress-ng (niced further) taking what CPU is left. Prints the counts; a
# non-zero status if anything failed, keeping the logs.
#   usage: scripts/stress.sh            env: RUNS=N SUITES=N BUILD_DIR=DIR, STRESS=0 (no stress-ng)
#
# The nondeterministic cases, and how the drivers make up each one's RUNS:
#   - the stack-switching programs (stacks_tests.py: coroutines migrating between threads,
#     clone() threads, green threads switched in signal handlers, forced unwinding): each suite
#     runs every mode 8 times (4 flag sets, 2 exit modes); two drivers run the rest, half with
#     every return hooked and the TSC, half through with the default clock (FTR_STRESS_DIV=10,
#     as below: 540 coroutines for "many", a tenth of the rounds of clonetls and sigtrap).
#   - the behaviour cases of threads, signals, coroutines, jumps, cancellation, processes and
#     exits (behaviours.py): each suite runs them in 5 configurations, at -O0 and -O2 (-O2 only
#     for some: 5 runs; the costly ones in full in the base configuration, a tenth as long in
#     the others; 9 for the costliest, run in full at -O2 only); two drivers run the rest (-O2,
#     through and hooked). The -O2-only cases and the base-only ones (the tracer's own
#     descriptors: 1 run per suite) get drivers of their own. The drivers
#     set FTR_STRESS_DIV=10: the costly cases loop a tenth as long (progs/behave.h's scaled(),
#     their expectations alike), so that the runs, not the loops, are what is repeated; a
#     repeat leaves out the views beside the graph (behaviours.py run_case).
#   - the end-to-end cases of exits and threads (run_integration.py: 14 configurations and 2
#     levels per suite): one driver runs the rest.
#   - live control (live_tests.py, ctl_tests.py): the cases that send ftrace-ctl requests to a
#     running program count requests (each suite sends 60 of eintr's and sigmask_handlers', 40
#     of dl_loop_refilter's, twice, and 15 and 20 of own_rt_handler's and own_sigtrap's: a
#     driver sends those two the rest, and ctl_tests.py its 300); the one-shot cases are
#     repeated RUNS times, those that sleep in 10 drivers at once, gprof_sleep with one traced
#     run of 0.2 s each time; trap_mask's repeats send one cycle of its 4 requests each (its
#     three threads spin while it runs: 20 requests made it the costliest case of all).
#   - a run's processes (session_tests.py): its cases that fork and exec loop a tenth as long
#     (FTR_STRESS_DIV=10: 24 children of 2000 calls, 10 re-execs).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
runs=${RUNS:-200}
suites=${SUITES:-3}
it=$top/tests/integration
logs=$(mktemp -d /tmp/ftr-stress.XXXXXX)
pids=()
drivers=()
# each background job is a process group of its own (set -m), so that an interrupted run also
# ends what its drivers started: a tracer test left behind would load the next run
set -m
cleanup() { for p in "${pids[@]}" "${drivers[@]}"; do kill -- "-$p" 2>/dev/null || true; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM
# what is stressed is the tree as it is now: a build dir left from an earlier commit would test
# old code with new tests
if ! BUILD_DIR=$build "$top/scripts/build.sh" >"$logs/build.log" 2>&1; then
  echo "== build failed: $logs/build.log"; exit 1
fi
if [[ ${STRESS:-1} != 0 ]] && command -v stress-ng >/dev/null; then
  nice -n 19 stress-ng --cpu "$(nproc)" --quiet & pids+=($!)
fi
modes=migrate,fctx-wide,fctx-deep,sjlj,many,clonetls,clonemany,clonevfork,btalt,altco,sigtrap
modes+=,greenpre,green-many,green-leak,green-ctx,handler-altjmp,handler-nested,copystk
modes+=,boost-callcc,boost-fiber-migrate,boost-unwind
cases='cancel-*,ends-*,hostile-*,limit-cancelclose,proc-*,recur-thread'
cases+=',signal-big-handler*,signals-*,swapcontext,swapcontext-notrace,swapcontext-graph'
cases+=',swapcontext-nest,swapcontext-gen,swapcontext-reuse,swapcontext-firstin'
cases+=',swapcontext-pingpong,threads-*,unwind-backtrace-signal,unwind-libunwind-signal'
cases+=',jmp-siglongjmp,exc-nested'
o2_cases=swapcontext-local,nofp-signals-siglongjmp,nofp-backtrace-signal
base_cases=limit-fdreuse,limit-ctlreuse
it_cases=ends-return,ends-exit,ends-_exit,ends-segv,ends-abort,ends-thread,ends-fpe,ends-texit
it_cases+=,ends-pipe,ends-alarm,ends-usr1,ends-xcpu,ends-rt,threads,ctor-thread
it_cases+=,ends-sandbox-exit,ends-sandbox-usr1,ends-kill,ends-sandbox-kill,ends-sandbox-die
live_long=own_rt_handler,own_sigtrap
live_short=sigblock_dlopen,zombie_main,replaced_exe,gprof_sleep
live_sleep=ctl_sleepers,hung_start
live_masks=sigblock_dlopen_raw,trap_mask
session_cases=daemon,plain,children,reexec,execenv,spawnenv
left() { # what the suites leave of RUNS (the suites run a case $1 times each), over $2 drivers
  local n=$(((runs - $1 * suites + $2 - 1) / $2))
  echo $((n < 1 ? 1 : n))
}
stack_runs=$(left 8 2)
case_runs=$(left 9 2)
o2_runs=$(left 5 1)
base_runs=$(left 1 1)
it_runs=$(left 28 1)
live_runs=$(left 1 1)
sleepers=10
sleep_runs=$(((live_runs + sleepers - 1) / sleepers))
start=$(date +%s)
echo "== $suites suites, and each nondeterministic case $runs times in all, under load; logs in $logs"
drive() { # name command...: runs the driver (niced), says how it ended
  local name=$1
  shift
  if nice -n 5 "$@" >"$logs/$name.log" 2>&1; then
    echo "$name: $(tail -1 "$logs/$name.log") ($(($(date +%s) - start)) s)"
  else
    echo "$name: FAILED: $logs/$name.log"
    grep -E '^FAIL' -A3 "$logs/$name.log" | head -20
    return 1
  fi
}
export FTR_STRESS_DIV=10
drive stacks python3 "$it/stacks_tests.py" --bin "$build" --runs "$stack_runs" --only "$modes" \
  --flagset gcc-pgfentry &
drivers+=($!)
FTRACE_EXIT=hook FTRACE_CLOCK=tsc drive stacks-hook python3 "$it/stacks_tests.py" --bin "$build" \
  --runs "$stack_runs" --only "$modes" --flagset clang-pfe5 &
drivers+=($!)
drive behaviours python3 "$it/behaviours.py" --bin "$build" --flagset gcc-pgfentry --opt O2 \
  --repeat "$case_runs" --only "$cases" &
drivers+=($!)
FTRACE_EXIT=hook drive behaviours-hook python3 "$it/behaviours.py" --bin "$build" \
  --flagset gcc-nop --opt O2 --repeat "$case_runs" --only "$cases" &
drivers+=($!)
drive behaviours-o2 python3 "$it/behaviours.py" --bin "$build" --flagset gcc-pgfentry --opt O2 \
  --repeat "$o2_runs" --only "$o2_cases" &
drivers+=($!)
drive behaviours-base python3 "$it/behaviours.py" --bin "$build" --flagset gcc-pgfentry --opt O2 \
  --repeat "$base_runs" --only "$base_cases" &
drivers+=($!)
unset FTR_STRESS_DIV
drive integration python3 "$it/run_integration.py" --bin "$build" --flagset gcc-pgfentry \
  --opt O2 --repeat "$it_runs" --only "$it_cases" &
drivers+=($!)
drive live-long python3 "$it/live_tests.py" --bin "$build" --quick --commands "$(left 15 1)" \
  --only "$live_long" &
drivers+=($!)
drive live-short python3 "$it/live_tests.py" --bin "$build" --quick --repeat "$live_runs" \
  --only "$live_short" &
drivers+=($!)
drive live-masks python3 "$it/live_tests.py" --bin "$build" --quick --commands 4 \
  --repeat "$live_runs" --only "$live_masks" &
drivers+=($!)
FTR_STRESS_DIV=10 drive session python3 "$it/session_tests.py" --bin "$build" \
  --flagset gcc-pgfentry --repeat "$(left 2 1)" --only "$session_cases" &
drivers+=($!)
for i in $(seq "$sleepers"); do
  drive "live-sleep$i" python3 "$it/live_tests.py" --bin "$build" --quick --repeat "$sleep_runs" \
    --only "$live_sleep" &
  drivers+=($!)
done
drive ctl python3 "$it/ctl_tests.py" --bin "$build" &
drivers+=($!)
status=0
# (the report's fuzzer, which is no nondeterministic case of the tracer's, 10 s of its 30 in each)
FTR_FUZZ_TIME=10 LOAD=0 BUILD_DIR=$build "$top/scripts/soak.sh" "$suites" & # in the background: a signal ends the wait
drivers+=($!)
for p in "${drivers[@]}"; do wait "$p" || status=1; done
echo "== per driver: stacks $stack_runs runs per mode, behaviours $case_runs per case (-O2-only"
echo "   $o2_runs, base-only $base_runs), integration $it_runs, live one-shot $live_runs"
echo "   ($sleepers x $sleep_runs when they sleep), live requests $(left 15 1) more per case,"
echo "   session cases $(left 2 1)"
echo "== all: $(($(date +%s) - start)) s; $( ((status == 0)) && echo passed || echo FAILED)"
exit $status
