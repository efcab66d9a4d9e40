#!/usr/bin/env python3
"""End-to-end tests: build test programs with one instrumentation flag set, run them untraced
and under ftrace-run, and check that

  * stdout, stderr and the exit status are unchanged (ftrace-run -q adds nothing to stderr),
  * the call tree printed by ftrace-report is exactly what the program does: for every thread,
    the number of calls of each call path (folded stack), the nesting, the thread count,
  * ftrace-report --chrome emits valid JSON with balanced B/E events per thread.

usage: run_integration.py --bin DIR --flagset NAME [--opt O0|O2|both] [--keep]
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import buildcache  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROGS = os.path.join(HERE, "progs")

# name -> (compiler, flags, link flags, flags for a shared library). gcc rejects -mnop-mcount
# with PIE and with -fPIC, so those sets build their libraries with -pg -mfentry.
FLAGSETS = {
    "gcc-pgfentry": ("gcc", "-pg -mfentry", "", "-pg -mfentry"),
    "gcc-pg": ("gcc", "-pg", "", "-pg"),
    "gcc-pgfentry-nopie": ("gcc", "-pg -mfentry -fno-pie", "-no-pie", "-pg -mfentry"),
    "gcc-nop": ("gcc", "-pg -mfentry -mnop-mcount -mrecord-mcount -fno-pie", "-no-pie",
                "-pg -mfentry"),
    "gcc-pfe5": ("gcc", "-fpatchable-function-entry=5", "", "-fpatchable-function-entry=5"),
    "clang-pg": ("clang", "-pg", "", "-pg"),
    "clang-pgfentry": ("clang", "-pg -mfentry", "", "-pg -mfentry"),
    "clang-pfe5": ("clang", "-fpatchable-function-entry=5", "", "-fpatchable-function-entry=5"),
}


def case_args():
    """--bin DIR, --flagset NAME (repeatable), --keep: the arguments of the case scripts"""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--flagset", action="append", choices=sorted(FLAGSETS))
    ap.add_argument("--keep", action="store_true")
    return ap.parse_args()


class Cases:
    """Named checks, each printed as "ok   NAME" or "FAIL NAME: why", in a scratch directory
    (work) that finish() removes unless keep; finish() returns the exit status."""

    def __init__(self, prefix, keep=False):
        self.work, self.keep, self.passed, self.failed = tempfile.mkdtemp(prefix=prefix), keep, 0, 0

    def __call__(self, name, fn):
        try:
            fn()
            print("ok   %s" % name)
            self.passed += 1
        except (AssertionError, subprocess.TimeoutExpired) as e:
            print("FAIL %s: %s" % (name, e))
            self.failed += 1

    def finish(self):
        if self.keep:
            print("kept %s" % self.work)
        else:
            shutil.rmtree(self.work, ignore_errors=True)
        print("%d passed, %d failed" % (self.passed, self.failed))
        return 1 if self.failed or not self.passed else 0


def expect_tree(n):
    # one thread: folded stack -> calls
    return [{"main": 1, "main;top": 1, "main;top;mid": n, "main;top;mid;leaf": 2 * n,
             "main;leaf": 1}]


def expect_threads():
    trees = [{"main": 1}]
    for i in range(4):
        trees.append({"worker": 1, "worker;work": 1, "worker;work;leaf": 1000 * (i + 1)})
    return trees



LINE = re.compile(r"^\s*(\d+)\) ([^|]*)\|  ( *)(.*)$")
# FTR_STRESS_DIV=N (scripts/stress.sh's repeats): the costly cases' loops run n / N times, at
# least once (progs/behave.h's scaled(), which reads the same variable), and so do their counts
STRESS_DIV = max(1, int(os.environ.get("FTR_STRESS_DIV", "1") or 1))


def scaled(n):
    return max(1, n // STRESS_DIV) if STRESS_DIV > 1 else n


def graph_fold(text, *args):
    """The output lines of graph-fold (tests/tools/graph_fold.c, built into the build directory;
    buildcache.use names it in FTR_GRAPH_FOLD) run on text; its error -> AssertionError."""
    exe = os.environ.get("FTR_GRAPH_FOLD")
    if not exe or not os.access(exe, os.X_OK):
        raise RuntimeError("graph-fold not found (%s): build the tree (scripts/build.sh), and call "
                           "buildcache.use(bindir) first" % (exe or "FTR_GRAPH_FOLD unset"))
    r = subprocess.run([exe] + list(args), input=text.encode("utf-8", "surrogateescape"),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = r.stdout.decode("utf-8", "surrogateescape").split("\n")
    if r.returncode == 1 and len(lines) >= 2 and lines[-2].startswith("E "):
        raise AssertionError(lines[-2][2:])
    if r.returncode != 0 or lines[-1]:
        raise RuntimeError("%s: exit status %d: %s" % (exe, r.returncode,
                                                       r.stderr.decode(errors="replace")))
    return lines


def fold_threads(lines, i):
    """graph-fold's threads from lines[i] on: (folded, open frames, where they end)"""
    folded = collections.defaultdict(collections.Counter)
    open_calls = {}
    while lines[i].startswith("T "):
        _, tid, n, m = lines[i].split(" ")
        tid, i, n, m = int(tid), i + 1, int(n), int(m)
        dict.update(folded[tid], zip(lines[i:i + n], map(int, lines[i + n].split())))
        i += n + 1
        if m:
            open_calls[tid] = lines[i:i + m]
            i += m
    return folded, open_calls, i


def parse_graph(text):
    """Graph text -> {tid: Counter(folded stack -> calls)}, {tid: frames left open}; checks the
    nesting as it goes (a depth that is not the number of open frames, a closing name that is not
    the open frame's: AssertionError). graph-fold does the work: the tests parse millions of
    lines; its comment says what it reads."""
    lines = graph_fold(text)
    folded, open_calls, i = fold_threads(lines, 0)
    assert i == len(lines) - 1, "graph-fold: unexpected line %r" % lines[i]
    return folded, open_calls


def parse_graph_sections(text):
    """A report of processes, each section starting with its '# ftrace-run: ... pid N' header
    line (a graph line before the first: AssertionError), parsed as parse_graph does: a list of
    (header, pid, own: a line of the section is a call, folded, open frames)."""
    lines = graph_fold(text, "--sections")
    out, i = [], 0
    while lines[i].startswith("S "):
        _, pid, header = lines[i].split(" ", 2)
        own = lines[i + 1] == "C"
        folded, open_calls, i = fold_threads(lines, i + 1 + own)
        out.append((header, int(pid), own, folded, open_calls))
    assert i == len(lines) - 1, "graph-fold: unexpected line %r" % lines[i]
    return out


def same_trees(got, want):
    got = sorted((sorted(c.items()) for c in got.values()))
    want = sorted((sorted(c.items()) for c in want))
    return got == want


def check_trees(want, want_open):
    """A checker comparing every thread's folded tree, and the calls left open at the end."""
    def check(got, open_calls):
        assert same_trees(got, want), "call trees differ:\n got %s\nwant %s" % (dict(got), want)
        got_open = sorted(open_calls.values())
        assert got_open == sorted(want_open), "open at the end: %s, want %s" % (got_open,
                                                                               want_open)
    return check


def check_ctor_thread(got, open_calls):
    """The spinner thread, started by a library constructor before ours, was running while
    the sites were patched: main's tree is exact, the spinner recorded only spin_leaf."""
    trees = list(got.values())
    assert {"main": 1, "main;spin_join": 1} in trees, "main thread's tree: %s" % trees
    others = [t for t in trees if t != {"main": 1, "main;spin_join": 1}]
    assert len(others) == 1 and set(others[0]) == {"spin_leaf"}, "spinner: %s" % others
    assert not open_calls, "open: %s" % open_calls


def check_ends_thread(got, open_calls):
    """main's tree is exact; the spinner thread, still running at exit, has some spin() calls
    recorded and no other function."""
    main_tree = {"main": 1, "main;work": 1, "main;work;leaf": 3, "main;work;deep": 1}
    trees = list(got.values())
    assert main_tree in trees, "main thread's tree missing: %s" % trees
    others = [t for t in trees if t != main_tree]
    assert len(others) == 1, "expected one more thread: %s" % others
    spin = others[0]
    assert set(spin) <= {"spinner", "spinner;spin", "spin"} and spin.get("spinner;spin", 0) > 100, \
        "spinner thread: %s" % spin
    assert list(open_calls.values()) in ([["spinner"]], [["spinner", "spin"]]), \
        "open: %s" % open_calls


def run(cmd, cwd, **kw):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, **kw)


def check_chrome(text, skip_pids=()):
    """Parses the JSON; returns {tid: B events left open}, after checking no E lacks its B.
    Events of skip_pids are left out."""
    doc = json.loads(text)
    doc["traceEvents"] = [ev for ev in doc["traceEvents"] if ev.get("pid") not in skip_pids]
    # every thread is named by a THREAD chunk (not the report's "main N"/"thread N" fallback)
    named = {ev["tid"] for ev in doc["traceEvents"]
             if ev["ph"] == "M" and ev["name"] == "thread_name"
             and not re.match(r"^(main|thread) \d+$", ev["args"]["name"])}
    busy = {ev["tid"] for ev in doc["traceEvents"] if ev["ph"] == "B"}
    assert busy <= named, "threads without a name: %s" % (busy - named)
    depth = collections.Counter()
    for ev in doc["traceEvents"]:
        if ev["ph"] == "B":
            depth[(ev["pid"], ev["tid"])] += 1
        elif ev["ph"] == "E":
            depth[(ev["pid"], ev["tid"])] -= 1
            assert depth[(ev["pid"], ev["tid"])] >= 0, "E without B"
    return {tid: n for (_pid, tid), n in depth.items() if n}


ENDS_OPEN = [["main", "work", "deep"]]
ENDS_TREE = [{"main": 1, "main;work": 1, "main;work;leaf": 3, "main;work;deep": 1}]

# case -> (source, args, checker(folded per tid, open calls per tid), extra link flags)
CASES = {
    "tree": ("tree.c", ["7"], check_trees(expect_tree(7), []), ""),
    "threads": ("threads.c", [], check_trees(expect_threads(), []), "-pthread"),
    "ends-return": ("ends.c", ["return"], check_trees(ENDS_TREE, []), "-pthread"),
    "ends-exit": ("ends.c", ["exit"], check_trees(ENDS_TREE, ENDS_OPEN), "-pthread"),
    "ends-_exit": ("ends.c", ["_exit"], check_trees(ENDS_TREE, ENDS_OPEN), "-pthread"),
    "ends-segv": ("ends.c", ["segv"], check_trees(ENDS_TREE, ENDS_OPEN), "-pthread"),
    "ends-abort": ("ends.c", ["abort"], check_trees(ENDS_TREE, ENDS_OPEN), "-pthread"),
    "ends-thread": ("ends.c", ["thread"], check_ends_thread, "-pthread"),
    "ends-fpe": ("ends.c", ["fpe"], check_trees(ENDS_TREE, ENDS_OPEN), "-pthread"),
    **{"ends-" + m: ("ends.c", [m], check_trees(ENDS_TREE, ENDS_OPEN), "-pthread")
       for m in ("pipe", "usr1", "xcpu", "rt", "sandbox-exit", "sandbox-usr1", "kill",
                 "sandbox-kill", "sandbox-die")},
    "ends-alarm": ("ends.c", ["alarm"], check_trees(
        [dict(ENDS_TREE[0], **{"main;work;deep;waiter": 1})],
        [["main", "work", "deep", "waiter"]]), "-pthread"),
    "ends-texit": ("ends.c", ["texit"], check_trees(
        [{"main": 1, "main;work": 1, "main;work;leaf": 3, "main;work;deep": 1,
          "main;work;deep;waiter": 1}, {"exiter": 1}],
        [["main", "work", "deep", "waiter"], ["exiter"]]), "-pthread"),
    "ctor-thread": ("ctor_thread.c", [], check_ctor_thread, "-pthread", "libspin.c"),
}


class BuildError(Exception):
    pass


def build(cc, opt, cflags, ldflags, libflags, work, src, libs, lib=None):
    """Builds progs/SRC (with progs/LIB as a shared library it links, if given) into WORK unless
    it is there already; returns the executable. Raises BuildError(command, compiler output)."""
    exe = os.path.join(work, "%s-%s" % (src[:-2], opt))
    if os.path.exists(exe):
        return exe
    if lib:
        so = os.path.join(work, "lib%s-%s.so" % (lib[3:-2], opt))
        cmd = ("%s -%s -g -fPIC -shared %s -I%s -o %s %s -pthread"
               % (cc, opt, libflags, PROGS, so, os.path.join(PROGS, lib)))
        r = buildcache.run(cmd, so, shell=True)
        if r.returncode:
            raise BuildError(cmd, r.stderr)
        libs += " %s -Wl,-rpath,%s" % (so, work)
    cmd = ("%s -%s -g -fno-omit-frame-pointer %s -I%s -o %s %s %s %s"
           % (cc, opt, cflags, PROGS, exe, os.path.join(PROGS, src), ldflags, libs))
    r = buildcache.run(cmd, exe, shell=True)
    if r.returncode:
        raise BuildError(cmd, r.stderr)
    return exe


def compare_runs(base, traced, compare_stderr=True):
    """Checks that the traced run's stdout, exit status and (unless told not to) stderr are
    those of the untraced run."""
    assert traced.stdout == base.stdout, "stdout differs: %r vs %r" % (
        traced.stdout, base.stdout)
    assert traced.returncode == base.returncode, "exit status %d, untraced %d" % (
        traced.returncode, base.returncode)
    if compare_stderr:
        # glibc's gprof (linked by -pg) complains on stderr when its arc table
        # overflows; under ftrace-run its mcount is never called.
        base_err = "".join(l for l in base.stderr.splitlines(True)
                           if not l.startswith("mcount: "))
        assert traced.stderr == base_err, "stderr differs: %r vs %r" % (
            traced.stderr, base_err)


def run_traced(exe, args, work, run_bin, trace):
    """Runs exe untraced, then under ftrace-run -q -o TRACE, and compares the two runs."""
    base = run([exe] + args, work)
    traced = run([run_bin, "-q", "-o", trace, exe] + args, work)
    compare_runs(base, traced)
    return base, traced


def check_report(report_bin, trace, work, checker):
    """ftrace-report TRACE: parses the graph, runs checker(folded per tid, open calls per tid),
    checks the header, and that --chrome leaves the same calls open."""
    # library calls are traced (the default) but left out here: the trees are the program's
    # own functions; libcall_tests.py checks the library calls themselves
    rep = run([report_bin, "--no-libcall", trace], work)
    assert rep.returncode == 0, "ftrace-report failed: %s" % rep.stderr
    got, open_calls = parse_graph(rep.stdout)
    checker(got, open_calls)
    hdr = rep.stdout.splitlines()[0]
    assert "pid" in hdr and "calls" in hdr, "header line: %r" % hdr
    ch = run([report_bin, "--no-libcall", "--chrome", trace], work)
    assert ch.returncode == 0, "ftrace-report --chrome failed: %s" % ch.stderr
    chrome_open = check_chrome(ch.stdout)
    graph_open = {tid: len(st) for tid, st in open_calls.items()}
    assert chrome_open == graph_open, "open calls: chrome %s, graph %s" % (
        chrome_open, graph_open)
    return rep.stdout


# How the graph's header says each process ended (nothing: a plain exit(0) or return 0).
UNSEEN = "ended unseen: SIGKILL, a seccomp kill or a raw exit"
HOW_ENDED = {"tree": "exit status 3", "ends-exit": "exit status 5", "ends-_exit": "exit status 6",
             "ends-segv": "killed by SIGSEGV", "ends-abort": "killed by SIGABRT",
             "ends-fpe": "killed by SIGFPE", "ends-texit": "exit status 7",
             "ends-pipe": "killed by SIGPIPE", "ends-alarm": "killed by SIGALRM",
             "ends-usr1": "killed by SIGUSR1", "ends-xcpu": "killed by SIGXCPU",
             "ends-rt": "killed by SIGRTMIN+2", "ends-sandbox-exit": "exit status 8",
             "ends-sandbox-usr1": "killed by SIGUSR1", "ends-sandbox-kill": "exit status 8",
             # a death no handler sees: its status while it is a zombie, if the recorder reads it
             # before the parent reaps it
             "ends-kill": ("killed by SIGKILL", UNSEEN),
             "ends-sandbox-die": ("killed by SIGSYS", UNSEEN)}


def run_case(flagset, opt, name, case, work, run_bin, report_bin):
    """Builds and checks one entry of CASES; prints ok/FAIL; returns True when it passed."""
    cc, cflags, ldflags, libflags = FLAGSETS[flagset]
    src, args, checker, libs, *lib = case
    tag = "%s/%s/%s" % (flagset, opt, name)
    try:
        exe = build(cc, opt, cflags, ldflags, libflags, work, src, libs,
                    lib[0] if lib else None)
    except BuildError as e:
        print("FAIL %s: build: %s\n%s" % (tag, e.args[0], e.args[1]))
        return False
    try:
        trace = os.path.join(work, "%s-%s.ftr" % (name, opt))
        run_traced(exe, args, work, run_bin, trace)
        if isinstance(HOW_ENDED.get(name), tuple):
            # a death nothing of the process sees: the recorder may still be writing when the
            # parent learns of it (the report would say so): wait for it first
            w = run([report_bin, "--wait", "--summary", trace], work)
            assert w.returncode == 0, "ftrace-report --wait failed: %s" % w.stderr
        text = check_report(report_bin, trace, work, checker)
        hdr = text.splitlines()[0]
        want_end = HOW_ENDED.get(name)
        if want_end:
            wants = want_end if isinstance(want_end, tuple) else (want_end,)
            assert any(hdr.endswith(w) for w in wants), \
                "header %r does not say %r" % (hdr, want_end)
        else:
            assert hdr.endswith("calls") or hdr.endswith("call"), "header: %r" % hdr
        print("ok   %s" % tag)
        return True
    except (AssertionError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
        print("FAIL %s: %s" % (tag, e))
        return False


def arg_parser():
    """The command line every matrix script shares."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory with ftrace-run and ftrace-report")
    ap.add_argument("--flagset", required=True, choices=sorted(FLAGSETS))
    ap.add_argument("--opt", default="both", choices=["O0", "O2", "both"])
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    return ap


def run_matrix(a, cases, run_one, prefix, wanted=lambda name, case, opt: True):
    """Runs run_one(flagset, opt, name, case, work, run_bin, report_bin) for every wanted case
    at every optimisation level; prints 'N passed, N failed'; returns the exit status."""
    cc = FLAGSETS[a.flagset][0]
    if not shutil.which(cc):
        print("SKIP: %s not installed" % cc)
        return 0
    a.bin = os.path.abspath(a.bin)
    run_bin = os.path.join(a.bin, "ftrace-run")
    report_bin = os.path.join(a.bin, "ftrace-report")
    buildcache.use(a.bin)
    work = tempfile.mkdtemp(prefix=prefix)
    opts = ["O0", "O2"] if a.opt == "both" else [a.opt]
    passed = failed = 0
    for opt in opts:
        for name, case in sorted(cases.items()):
            if not wanted(name, case, opt):
                continue
            if run_one(a.flagset, opt, name, case, work, run_bin, report_bin):
                passed += 1
            else:
                failed += 1
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("work directory kept: %s" % work)
    print(buildcache.summary())
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def main():
    ap = arg_parser()
    ap.add_argument("--only", default="", help="comma-separated cases: %s" % ", ".join(CASES))
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each case this many times (stops at a case's first failure): "
                         "scripts/stress.sh")
    a = ap.parse_args()
    only = [n for n in a.only.split(",") if n]
    for n in only:
        if n not in CASES:
            ap.error("no case %s (cases: %s)" % (n, ", ".join(CASES)))

    def repeated(*args):
        return all(run_case(*args) for _ in range(a.repeat))
    return run_matrix(a, CASES, repeated, "ftr-it-",
                      lambda name, case, opt: not only or name in only)


if __name__ == "__main__":
    sys.exit(main())
