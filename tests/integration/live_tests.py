#!/usr/bin/env python3
"""Live patching and control that never disturb the traced program (issue 8): hostile programs
run untraced, then under ftrace-run (tracing from the start, or --disabled and switched by
ftrace-ctl). Each case checks that the program's stdout, exit status and stderr are those of
the untraced run, that the counts the program reports itself are exact (EINTR, early returns,
signal deliveries), that ftrace-ctl's requests succeed, and that the trace holds the calls made
while tracing was on (marker calls the program makes when the test asks, through files).

  eintr             threads blocking over and over in nanosleep, epoll_wait, poll, read,
                    pthread_cond_timedwait, sigtimedwait (every signal blocked), plus two busy
                    threads: (a) traced from the start, (b) --disabled under hundreds of
                    ftrace-ctl on/off/filter/status requests: no EINTR, no early return
  ctl_sleepers      every thread asleep (nanosleep 3 s, epoll_wait, poll): ftrace-ctl status,
                    off, on wake none of them
  sigblock_dlopen   dlopen while a thread blocks every signal: the library is traced
  zombie_main       main thread gone (pthread_exit); the worker dlopens and calls: traced
  hung_start        the program's calloc blocks for good (also in the tracer's start-up):
                    SIGTERM ends it, as untraced
  replaced_exe      the executable's file replaced (an upgrade), then dlopen/dlclose: the
                    executable is traced before and after
  gprof_sleep       gcc -pg (ITIMER_PROF armed): main's sleeps are not cut short
  dl_loop_refilter  dlopen/dlclose in a loop while ftrace-ctl re-filters and switches
  own_rt_handler    the program handles SIGRTMIN+7 itself: exactly its own signals reach its
                    handler, and ftrace-ctl still switches tracing
  own_sigtrap       the program's own SIGTRAP handler, int3 and raise(SIGTRAP): exact counts
  sigmask_handlers  threads blocking most signals, handlers with sa_mask = all signals
                    running traced code, hundreds of on/off: exact counts
  sigblock_dlopen_raw  the same with the worker blocking every signal by a raw system call
                    (SIGTRAP too): the library, just loaded, is written alone and traced
  trap_mask         started with SIGTRAP blocked: the program's mask reads as it set it, a
                    SIGTRAP it blocks waits until it unblocks it, then is handled once;
                    traced from the start (exact call counts) and under ftrace-ctl rewrites

The programs are tests/integration/progs/live_*.c and liblive_dl.c; each says what it prints.
No timed assertion: a hang (every run has a timeout) or a count the program reports is what
fails a case.

usage: live_tests.py --bin DIR [--flagset NAME] [--opt O0|O2] [--quick] [--commands N]
                     [--only NAME,...] [--repeat N] [--keep]
  --flagset      instrumentation of the programs (run_integration.FLAGSETS; default
                 gcc-pgfentry); gprof_sleep is always built with plain gcc -pg
  --quick        fewer ftrace-ctl requests and shorter runs (what ctest runs)
  --commands N   ftrace-ctl requests of the long cases (default: hundreds; --quick: tens)
  --repeat N     each case N times (scripts/stress.sh)
"""
import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_integration import FLAGSETS, compare_runs, parse_graph  # noqa: E402
from behaviours import Case, build  # noqa: E402
import buildcache  # noqa: E402
from ctl_tests import Env, report, wait_file  # noqa: E402

LIB = (("liblive_dl.c", "live_dl", ""),)
RUN_TIMEOUT = 60  # seconds a program may take once told to stop (or to end on its own)
CTL_TIMEOUT = 60  # seconds one ftrace-ctl may take
MAX_CTL_FAILURES = 3  # then stop sending: each failure may cost a handshake timeout


class Live:
    """What every case needs: the tools, the options, the work directory."""

    def __init__(self, a, work):
        self.a, self.work = a, work
        self.e = Env(a.bin, work)
        self.quick = a.quick

    def build(self, src, flagset=None, cflags="", variant=""):
        """Builds progs/SRC (and liblive_dl.so next to it); returns the executable."""
        fs = flagset or self.a.flagset
        case = Case(src, [], None, cflags=cflags, variant=variant, dlopen=LIB)
        return build(fs, self.a.opt, case, os.path.join(self.work, "build-" + fs))

    def commands(self, full, quick):
        return self.a.commands or (quick if self.quick else full)


Result = collections.namedtuple("Result", "stdout stderr returncode")


class Run:
    """One run of a program, untraced or under ftrace-run (trace given), in a directory of its
    own that is also its first argument (files: ready, markN/ackN, stop; stdout, stderr)."""

    def __init__(self, lv, exe, args, tag, trace=None, opts=(), env=None, blocked=()):
        self.dir = tempfile.mkdtemp(prefix=tag + "-", dir=lv.work)
        cmd = [exe, self.dir] + list(args)
        if trace:
            cmd = [lv.e.run_bin, "-q", "-o", trace] + list(opts) + cmd
        self.out = open(os.path.join(self.dir, "stdout"), "w+")
        self.err = open(os.path.join(self.dir, "stderr"), "w+")
        # signals blocked in the child before it execs (kept across exec, as a launcher's
        # posix_spawn with a mask leaves them)
        pre = (lambda: signal.pthread_sigmask(signal.SIG_BLOCK, blocked)) if blocked else None
        self.p = subprocess.Popen(cmd, cwd=self.dir, env=dict(lv.e.env, **(env or {})),
                                  stdout=self.out, stderr=self.err, preexec_fn=pre)
        self.pid = self.p.pid  # ftrace-run execs the program
        self.marks = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.out.close()
        self.err.close()

    @staticmethod
    def tail(out):
        with open(out.name, errors="replace") as f:
            return f.read()[-600:]

    def wait(self, name, secs=30):
        try:
            wait_file(os.path.join(self.dir, name), self.p, secs)
        except AssertionError as ex:
            raise AssertionError("%s; program's stdout: %r, stderr: %r" % (
                ex, self.tail(self.out), self.tail(self.err)))

    def mark(self):
        """Asks for one marker call and waits until it returned."""
        self.marks += 1
        open(os.path.join(self.dir, "mark%d" % self.marks), "w").close()
        self.wait("ack%d" % self.marks)

    def finish(self, stop=True, secs=RUN_TIMEOUT):
        """Tells the program to stop (unless it ends by itself) and collects what it did."""
        if stop:
            open(os.path.join(self.dir, "stop"), "w").close()
        try:
            self.p.wait(timeout=secs)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise AssertionError("the program hung: killed after %d s; stderr: %r" % (
                secs, self.tail(self.err)))
        self.out.flush()
        self.err.flush()
        with open(self.out.name, errors="replace") as o, open(self.err.name,
                                                                errors="replace") as e:
            return Result(o.read(), e.read(), self.p.returncode)


class Ctl:
    """ftrace-ctl requests to one process. Failures are remembered, not raised; after
    MAX_CTL_FAILURES of them nothing more is sent."""

    def __init__(self, lv, pid):
        self.lv, self.pid = lv, pid
        self.sent, self.failures = 0, []

    def __call__(self, *cmd):
        if len(self.failures) >= MAX_CTL_FAILURES:
            return False
        self.sent += 1
        what = "ftrace-ctl %s" % " ".join(repr(c) if c == "" else c for c in cmd)
        try:
            r = self.lv.e.ctl(self.pid, *cmd, timeout=CTL_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.failures.append("%s hung (killed after %d s)" % (what, CTL_TIMEOUT))
            return False
        if r.returncode:
            self.failures.append("%s: exit %d: %s" % (what, r.returncode,
                                                      (r.stdout + r.stderr).strip()[-300:]))
            return False
        return True

    def window(self, run):
        """An on-window: tracing on, everything selected, one marker call."""
        self("on")
        self("filter", "")
        try:
            run.mark()
        except AssertionError as ex:
            raise AssertionError("%s (after %d ftrace-ctl requests%s)" % (
                ex, self.sent, "; failed: " + "; ".join(self.failures) if self.failures else ""))

    def cycle(self, run, commands, n, mark_every=20):
        """Sends n requests, commands' in turn, with an on-window every mark_every of them
        and one at the end (so tracing ends on). @return the marker calls the trace must hold:
        all of them, or None when a request failed (then it is not known)."""
        for i in range(n):
            if len(self.failures) >= MAX_CTL_FAILURES:
                break
            self(*commands[i % len(commands)])
            if i % mark_every == mark_every - 1:
                self.window(run)
        self.window(run)
        return None if self.failures else run.marks


class Problems(list):
    """What went wrong in a case; reported together at its end."""

    def check(self, cond, msg):
        if not cond:
            self.append(msg)
        return cond

    def same_run(self, base, traced):
        try:
            compare_runs(base, traced)
        except AssertionError as ex:
            self.append(str(ex))

    def ctl(self, ctl):
        if ctl.failures:
            self.append("%d of %d ftrace-ctl requests failed: %s" % (
                len(ctl.failures), ctl.sent, "; ".join(ctl.failures)))

    def markers(self, trace, marks, what="trace"):
        """The trace holds one marker call per on-window (unknown when a request failed)."""
        if marks is not None:
            self.check(trace.calls("marker") == marks, "%s: %d marker() calls, want %d" % (
                what, trace.calls("marker"), marks))

    def done(self):
        if self:
            raise AssertionError("\n     ".join(self))


class Trace:
    """The report of a trace: every thread's folded tree (parse_graph checks the nesting)."""

    def __init__(self, lv, path, problems):
        self.folded, self.open = {}, {}
        try:
            self.folded, self.open = parse_graph(report(lv.e, path))
        except (AssertionError, subprocess.TimeoutExpired) as ex:
            problems.append("trace: %s" % ex)

    def calls(self, name):
        """calls of function name, anywhere in any thread"""
        return sum(n for t in self.folded.values() for p, n in t.items()
                   if p.split(";")[-1] == name)

    def path(self, suffix):
        """calls whose folded stack ends with suffix ("a;b"), in any thread"""
        return sum(n for t in self.folded.values() for p, n in t.items()
                   if p == suffix or p.endswith(";" + suffix))


def untraced(lv, exe, args, tag, secs=0.5, marks=1, stop=True, blocked=()):
    """The reference run: ready, secs of running, a few marker calls, stop."""
    with Run(lv, exe, args, tag + "-untraced", blocked=blocked) as r:
        if stop:
            r.wait("ready")
            time.sleep(secs)
            for _ in range(marks):
                r.mark()
        return r.finish(stop)


# counts a program prints that must be 0: "N EINTR", "N early", "N wrong results", "N failures",
# "wrong results: N", "handlers on a wrong thread: N", "other SIGTRAPs: N"
ZERO = re.compile(r"(\d+) (?:EINTR|early|wrong results|failures)\b|"
                  r"(?:wrong results|on a wrong thread|other SIGTRAPs): (\d+)")


def zero_counts(problems, out, what):
    """Every count of out that must be 0 is."""
    for line in out.splitlines():
        if any(int(n) for m in ZERO.finditer(line) for n in m.groups() if n):
            problems.append("%s: %s" % (what, line))


def exact_counts(problems, out, what, n):
    """n 'X: every signal sent was handled exactly once' lines in out, and no other count."""
    good = re.findall(r"(?m)^.*: every signal sent was handled exactly once$", out)
    bad = re.findall(r"(?m)^.*: \d+ sent, \d+ handled$", out)
    problems.check(len(good) == n and not bad, "%s: %s" % (
        what, "; ".join(bad) or "%d lines of exact counts, want %d" % (len(good), n)))


# ---- the cases ----

EINTR_COMMANDS = [["on"], ["status"], ["filter", "busy_*,marker"], ["off"], ["status"],
                  ["filter", ""], ["on"], ["filter", "-busy_leaf"], ["off"], ["filter", "exe:*"]]


def case_eintr(lv):
    exe = lv.build("live_eintr.c")
    pb = Problems()
    base = untraced(lv, exe, [], "eintr", secs=1.0)
    zero_counts(pb, base.stdout, "untraced (the test is not valid)")

    # (a) traced from the start
    trace = os.path.join(lv.work, "eintr-a.ftr")
    with Run(lv, exe, [], "eintr-a", trace) as r:
        r.wait("ready")
        time.sleep(1.0 if lv.quick else 3.0)
        r.mark()
        a = r.finish()
    zero_counts(pb, a.stdout, "(a) traced from the start")
    pb.same_run(base, a)
    t = Trace(lv, trace, pb)
    pb.check(t.calls("busy_leaf") > 0 and t.calls("marker") == 1,
             "(a) trace: %d busy_leaf(), %d marker(), want >0 and 1" % (
                 t.calls("busy_leaf"), t.calls("marker")))

    # (b) --disabled, switched by ftrace-ctl
    trace = os.path.join(lv.work, "eintr-b.ftr")
    with Run(lv, exe, [], "eintr-b", trace, ["--disabled"]) as r:
        r.wait("ready")
        ctl = Ctl(lv, r.pid)
        marks = ctl.cycle(r, EINTR_COMMANDS, lv.commands(300, 60))
        b = r.finish()
    zero_counts(pb, b.stdout, "(b) --disabled + %d ftrace-ctl requests" % ctl.sent)
    pb.same_run(base, b)
    pb.ctl(ctl)
    t = Trace(lv, trace, pb)
    pb.check(t.calls("busy_leaf") > 0, "(b) trace: no busy_leaf()")
    pb.markers(t, marks, "(b) trace")
    pb.done()


SLEEPERS_OUT = ("main: nanosleep slept 3 s\nepoll_wait: woken by the stop\n"
                "poll: woken by the stop\n")


def case_ctl_sleepers(lv):
    exe = lv.build("live_sleepers.c")
    pb = Problems()
    base = untraced(lv, exe, [], "sleepers", stop=False)
    pb.check(base.stdout == SLEEPERS_OUT, "untraced (the test is not valid): %r" % base.stdout)
    trace = os.path.join(lv.work, "sleepers.ftr")
    with Run(lv, exe, [], "sleepers", trace) as r:
        r.wait("ready")
        time.sleep(0.3)  # every thread is in its call by now
        ctl = Ctl(lv, r.pid)
        for cmd in (["status"], ["off"], ["on"]):
            ctl(*cmd)
        traced = r.finish(stop=False)
    pb.check(traced.stdout == SLEEPERS_OUT, "traced, after ftrace-ctl status/off/on: %r" %
             traced.stdout)
    pb.same_run(base, traced)
    pb.ctl(ctl)
    Trace(lv, trace, pb)
    pb.done()


def lib_of(exe):
    return os.path.join(os.path.dirname(exe), "liblive_dl.so")


BLOCKED = re.compile(r"did not stop|not traced|is signal \d+ blocked")


def case_sigblock_dlopen(lv, raw=False):
    exe = lv.build("live_sigblock.c", cflags="-DLIVE_RAW_BLOCK" if raw else "",
                   variant="raw" if raw else "")
    args = [lib_of(exe)]
    pb = Problems()
    base = untraced(lv, exe, args, "sigblock", stop=False)
    trace = os.path.join(lv.work, "sigblock%s.ftr" % ("-raw" if raw else ""))
    with Run(lv, exe, args, "sigblock", trace) as r:
        traced = r.finish(stop=False)
    pb.check(not BLOCKED.search(traced.stderr), "stderr: %r" % traced.stderr.strip())
    pb.same_run(base, traced)
    zero_counts(pb, traced.stdout, "traced")
    t = Trace(lv, trace, pb)
    got = {f: t.calls(f) for f in ("dl_outer", "dl_inner", "after_dlopen")}
    pb.check(got == {"dl_outer": 5, "dl_inner": 5, "after_dlopen": 1},
             "trace: %s, want dl_outer 5, dl_inner 5, after_dlopen 1" % got)
    pb.check(t.calls("w_outer") > 0, "trace: no w_outer() of the worker")
    pb.done()


def case_sigblock_dlopen_raw(lv):
    """The worker blocks every signal with a raw system call, SIGTRAP too: no live rewrite may
    run while it does, but the library just loaded is one no other thread can run yet (it was
    mapped during the dlopen, which made no thread): it is written alone, and traced."""
    case_sigblock_dlopen(lv, raw=True)


def case_trap_mask(lv):
    """A program started with SIGTRAP blocked (its parent blocked it before starting it, as a
    launcher that posix_spawns with a mask does): its mask reads as it set it, a SIGTRAP it
    blocks waits (pending) until it unblocks it, then reaches its handler once; kill(),
    sigsuspend(), sigwaitinfo(), a fork child. (a) traced from the start: every call of its
    handler and of t_work() in the trace; (b) while ftrace-ctl rewrites its text (off, on,
    filter), so that its threads, SIGTRAP blocked, meet breakpoints: exact counts again."""
    exe = lv.build("live_trapmask.c")
    trap = (signal.SIGTRAP,)
    pb = Problems()
    base = untraced(lv, exe, [], "trapmask", blocked=trap)
    pb.check("start: SIGTRAP blocked 1" in base.stdout, "untraced (the test is not valid): %r"
             % base.stdout[:300])
    exact_counts(pb, base.stdout, "untraced (the test is not valid)", 1)
    zero_counts(pb, base.stdout, "untraced (the test is not valid)")
    for tag, commands in (("a", None), ("b", [["off"], ["on"], ["filter", "t_*,marker"],
                                              ["filter", ""]])):
        trace = os.path.join(lv.work, "trapmask-%s.ftr" % tag)
        with Run(lv, exe, [], "trapmask-" + tag, trace, blocked=trap) as r:
            r.wait("ready")
            if commands:
                ctl = Ctl(lv, r.pid)
                marks = ctl.cycle(r, commands, lv.commands(100, 20), mark_every=4)
            else:
                time.sleep(0.1 if lv.quick else 0.5)
                r.mark()
            traced = r.finish()
            with open(os.path.join(r.dir, "counts")) as f:
                counts = dict((k, int(v)) for k, v in (ln.split() for ln in f))
        what = "(%s) traced" % tag
        exact_counts(pb, traced.stdout, what, 1)
        zero_counts(pb, traced.stdout, what)
        pb.same_run(base, traced)
        t = Trace(lv, trace, pb)
        if commands:
            pb.ctl(ctl)
            pb.markers(t, marks, "(b) trace")
        else:
            got = {f: t.calls(f) for f in ("on_trap", "t_work")}
            pb.check(got == counts, "(a) trace: %s, the program counted %s" % (got, counts))
            pb.check(t.path("on_trap;h_work") == counts["on_trap"],
                     "(a) trace: %d on_trap;h_work, want %d" % (t.path("on_trap;h_work"),
                                                              counts["on_trap"]))
    pb.done()


def case_zombie_main(lv):
    exe = lv.build("live_zombie.c")
    args = [lib_of(exe)]
    pb = Problems()
    base = untraced(lv, exe, args, "zombie", stop=False)
    pb.check(base.returncode == 0, "untraced: exit %d" % base.returncode)
    trace = os.path.join(lv.work, "zombie.ftr")
    with Run(lv, exe, args, "zombie", trace) as r:
        traced = r.finish(stop=False)
    pb.check(traced.returncode == 0, "traced: exit status %d, stderr %r" % (
        traced.returncode, traced.stderr.strip()))
    pb.same_run(base, traced)
    t = Trace(lv, trace, pb)
    got = {p: t.path(p) for p in ("zombie_worker;dl_outer", "zombie_worker;dl_outer;dl_inner",
                                  "zombie_worker;z_work", "zombie_worker;z_work;z_leaf")}
    pb.check(all(n == 5 for n in got.values()),
             "trace, calls after main ended: %s, want 5 each" % got)
    pb.done()


def case_hung_start(lv):
    """The program's calloc() blocks for good: SIGTERM ends it, untraced and traced alike (the
    tracer's start-up, which makes its writer thread with that calloc, must not block it)."""
    exe = lv.build("live_hungstart.c")
    pb = Problems()
    for tag, trace in (("untraced", None), ("traced", os.path.join(lv.work, "hung.ftr"))):
        with Run(lv, exe, [], "hung-" + tag, trace, env={"LIVE_HANG_CALLOC": "1"}) as r:
            time.sleep(1.0)
            pb.check(r.p.poll() is None, "%s: ended before SIGTERM (%s)" % (tag, r.p.poll()))
            r.p.terminate()
            res = r.finish(stop=False, secs=10)
            pb.check(res.returncode == -15, "%s: exit status %d after SIGTERM, want -15" % (
                tag, res.returncode))
    with Run(lv, exe, [], "hung-plain", os.path.join(lv.work, "plain.ftr")) as r:
        res = r.finish(stop=False)
        pb.check(res.returncode == 0 and res.stdout == "start\ndone\n",
                 "without the hang: exit %d, stdout %r" % (res.returncode, res.stdout))
    pb.done()


def case_replaced_exe(lv):
    exe = lv.build("live_replaced.c")
    upgrade = lv.build("live_replaced.c", cflags="-DLIVE_UPGRADE", variant="upgrade")
    pb = Problems()
    results = []
    for tag, trace in (("replaced-untraced", None),
                       ("replaced", os.path.join(lv.work, "replaced.ftr"))):
        # a copy per run: the program replaces it
        d = tempfile.mkdtemp(prefix=tag + "-exe-", dir=lv.work)
        copy = os.path.join(d, "live_replaced")
        shutil.copy2(exe, copy)
        with Run(lv, copy, [lib_of(exe), upgrade], tag, trace) as r:
            r.wait("replaced")
            r.mark()  # after the dlclose
            ctl = Ctl(lv, r.pid)
            if trace:  # re-patch the executable now its file is another one
                ctl("off")
                ctl("on")
            r.mark()
            results.append(r.finish())
    base, traced = results
    pb.same_run(base, traced)
    pb.ctl(ctl)
    t = Trace(lv, trace, pb)
    got = {p: t.path(p) for p in ("main;before;r_work", "main;after;r_work",
                                  "main;marker;r_work", "main;dl_outer;dl_inner")}
    want = {"main;before;r_work": 5, "main;after;r_work": 5, "main;marker;r_work": 2,
            "main;dl_outer;dl_inner": 1}
    pb.check(got == want, "trace: %s, want %s" % (got, want))
    pb.done()


def case_gprof_sleep(lv):
    """Its EINTR is a matter of chance (a SIGPROF every 10 ms of the worker's CPU time, ~200
    per run of 2 s of sleeps): several runs, or with --repeat one run of 0.2 s each time."""
    exe = lv.build("live_gprof.c", flagset="gcc-pg")
    ms = 200 if lv.a.repeat > 1 else 2000
    want = "nanosleep %g s: slept\nusleep %g s: slept\nworker: 0 wrong results\n" % (
        ms * 0.00075, ms * 0.00025)
    pb = Problems()
    base = untraced(lv, exe, [str(ms)], "gprof", stop=False)
    pb.check(base.stdout == want, "untraced (the test is not valid): %r" % base.stdout)
    for i in range(1 if lv.a.repeat > 1 else 2 if lv.quick else 4):
        trace = os.path.join(lv.work, "gprof%d.ftr" % i)
        with Run(lv, exe, [str(ms)], "gprof", trace) as r:
            traced = r.finish(stop=False)
        pb.check(traced.stdout == want, "traced run %d: %r" % (i + 1, traced.stdout))
        pb.same_run(base, traced)
        t = Trace(lv, trace, pb)
        pb.check(t.calls("g_work") > 0, "trace %d: no g_work()" % (i + 1))
    pb.done()


DLLOOP_COMMANDS = [["filter", "dl_*,l_*,marker"], ["on"], ["off"],
                   ["filter", "liblive_dl.so:*,marker"], ["on"], ["status"],
                   ["filter", "-dl_inner"], ["off"], ["filter", ""], ["on"],
                   ["filter", "l_work"], ["filter", "-liblive_dl.so:*"]]


def case_dl_loop_refilter(lv):
    exe = lv.build("live_dlloop.c")
    args = [lib_of(exe)]
    pb = Problems()
    base = untraced(lv, exe, args, "dlloop", secs=1.0)
    trace = os.path.join(lv.work, "dlloop.ftr")
    with Run(lv, exe, args, "dlloop", trace) as r:
        r.wait("ready")
        ctl = Ctl(lv, r.pid)
        marks = ctl.cycle(r, DLLOOP_COMMANDS, lv.commands(200, 40))
        traced = r.finish()
    pb.same_run(base, traced)
    zero_counts(pb, traced.stdout, "traced")
    pb.ctl(ctl)
    t = Trace(lv, trace, pb)
    pb.check(t.path("dl_outer;dl_inner") > 0, "trace: no dl_outer;dl_inner")
    pb.markers(t, marks)
    pb.done()


def toggle_case(lv, src, tag, commands, n, nexact):
    """A program that counts its own signals, traced from the start while ftrace-ctl sends
    n requests of commands with on-windows: same output, exact counts, marker calls traced."""
    exe = lv.build(src)
    pb = Problems()
    base = untraced(lv, exe, [], tag, secs=0.5)
    exact_counts(pb, base.stdout, "untraced (the test is not valid)", nexact)
    trace = os.path.join(lv.work, tag + ".ftr")
    with Run(lv, exe, [], tag, trace) as r:
        r.wait("ready")
        ctl = Ctl(lv, r.pid)
        marks = ctl.cycle(r, commands, n, mark_every=4)
        traced = r.finish()
    exact_counts(pb, traced.stdout, "traced", nexact)
    zero_counts(pb, traced.stdout, "traced")
    pb.same_run(base, traced)
    pb.ctl(ctl)
    t = Trace(lv, trace, pb)
    pb.markers(t, marks)
    return pb, t, traced


def case_own_rt_handler(lv):
    pb, t, _out = toggle_case(lv, "live_rthandler.c", "rthandler",
                              [["off"], ["on"], ["status"]], lv.commands(60, 15), 1)
    pb.check(t.calls("rt_work") > 0, "trace: no rt_work()")
    pb.done()


def case_own_sigtrap(lv):
    pb, t, _out = toggle_case(lv, "live_sigtrap.c", "sigtrap",
                              [["off"], ["on"], ["filter", "t_*"]], lv.commands(100, 20), 2)
    pb.check(t.calls("t_trapping") > 0, "trace: no t_trapping()")
    pb.done()


def case_sigmask_handlers(lv):
    pb, t, _out = toggle_case(lv, "live_sigmask.c", "sigmask", [["off"], ["on"]],
                              lv.commands(300, 60), 3)
    pb.check(t.path("on_signal;h_work;h_leaf") > 0, "trace: no on_signal;h_work;h_leaf")
    pb.done()


CASES = [("eintr", case_eintr), ("ctl_sleepers", case_ctl_sleepers),
         ("sigblock_dlopen", case_sigblock_dlopen), ("zombie_main", case_zombie_main),
         ("replaced_exe", case_replaced_exe), ("gprof_sleep", case_gprof_sleep),
         ("hung_start", case_hung_start),
         ("dl_loop_refilter", case_dl_loop_refilter), ("own_rt_handler", case_own_rt_handler),
         ("own_sigtrap", case_own_sigtrap), ("sigmask_handlers", case_sigmask_handlers),
         ("sigblock_dlopen_raw", case_sigblock_dlopen_raw), ("trap_mask", case_trap_mask)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="directory with ftrace-run, ftrace-ctl, ...")
    ap.add_argument("--flagset", default="gcc-pgfentry", choices=sorted(FLAGSETS))
    ap.add_argument("--opt", default="O2", choices=["O0", "O2"])
    ap.add_argument("--quick", action="store_true", help="fewer requests, shorter runs (ctest)")
    ap.add_argument("--commands", type=int, default=0, help="ftrace-ctl requests per long case")
    ap.add_argument("--only", default="", help="comma-separated case names: %s" % ", ".join(
        n for n, _ in CASES))
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each case this many times (stops at a case's first failure)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    only = [n for n in a.only.split(",") if n]
    for n in only:
        if n not in dict(CASES):
            ap.error("no case %s (cases: %s)" % (n, ", ".join(n for n, _ in CASES)))
    for cc in {FLAGSETS[a.flagset][0], "gcc"}:
        if not shutil.which(cc):
            print("SKIP: %s not installed" % cc)
            return 0
    a.bin = os.path.abspath(a.bin)
    buildcache.use(a.bin)
    work = tempfile.mkdtemp(prefix="ftr-live-")
    lv = Live(a, work)
    passed = failed = 0
    for name, fn in CASES:
        if only and name not in only:
            continue
        t0 = time.time()
        try:
            for _ in range(a.repeat):
                fn(lv)
            print("PASS live/%s (%s%.1f s)" % (name, "%d runs, " % a.repeat if a.repeat > 1
                                                else "", time.time() - t0))
            passed += 1
        except (AssertionError, subprocess.TimeoutExpired, OSError) as ex:
            print("FAIL live/%s: %s" % (name, ex))
            failed += 1
        sys.stdout.flush()
    if a.keep:
        print("work directory kept: %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
