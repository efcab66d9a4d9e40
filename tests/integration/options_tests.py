#!/usr/bin/env python3
"""Every ftrace-run option and FTRACE_* variable, and bad input to the tools.

For each option: the exact call tree of tests/integration/progs/tree.c (main -> top -> mid x N
-> leaf x 2; main -> leaf), traced with the option and with the same setting through the
environment only (LD_PRELOAD=libftrace.so FTRACE_...=...), in a -pg -mfentry build and a
-mnop-mcount build. Then bad input: one clear line and the documented exit status.

usage: options_tests.py --bin DIR
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_integration import parse_graph  # noqa: E402

PROGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs")
N = 3
FULL = {"main": 1, "main;top": 1, "main;top;mid": N, "main;top;mid;leaf": 2 * N, "main;leaf": 1}

# the library calls tree.c makes (at -O2 atoi is strtol); traced by default
LIBC = {"strtol": 1, "printf": 1, "fwrite": 1}


def with_libc(tree):
    """tree, with the library calls main makes (a report that shows them)"""
    t = dict(tree)
    t.update({"main;" + k: v for k, v in LIBC.items()})
    return ("libcalls", t)


# option args -> (environment, expected tree of the single thread; None: no events at all).
# The tree is of the program's functions (ftrace-report --no-libcall), or ("libcalls", tree):
# the whole report, library calls included.
CASES = [
    (["-F", "leaf"], {"FTRACE_FILTER": "leaf"}, {"leaf": 2 * N + 1}),
    (["-F", "-leaf"], {"FTRACE_FILTER": "-leaf"},
     {"main": 1, "main;top": 1, "main;top;mid": N}),
    (["--filter", "mid,-leaf,top"], {"FTRACE_FILTER": "mid,-leaf,top"},
     {"top": 1, "top;mid": N}),
    (["-F", "@^(main|leaf)$"], {"FTRACE_FILTER": "@^(main|leaf)$"},
     {"main": 1, "main;leaf": 2 * N + 1}),
    (["-F", "exe:m*"], {"FTRACE_FILTER": "exe:m*"}, {"main": 1, "main;mid": N}),
    # the library calls into libc, and nothing else
    (["-F", "libc.so*:*"], {"FTRACE_FILTER": "libc.so*:*"}, ("libcalls", LIBC)),
    (["-F", "libc.so*:*,-printf"], {"FTRACE_FILTER": "libc.so*:*,-printf"},
     ("libcalls", {"strtol": 1, "fwrite": 1})),
    (["-F", "libnosuch.so:*"], {"FTRACE_FILTER": "libnosuch.so:*"}, None),  # matches nothing
    (["--no-libcall"], {"FTRACE_LIBCALL": "0"}, ("libcalls", FULL)),
    ([], {}, with_libc(FULL)),
    (["--max-depth", "2"], {"FTRACE_MAX_DEPTH": "2"},
     {"main": 1, "main;top": 1, "main;leaf": 1}),
    (["--max-depth", "0"], {"FTRACE_MAX_DEPTH": "0"}, FULL),
    (["--graph-function", "mid"], {"FTRACE_GRAPH_FUNCTION": "mid"},
     {"mid": N, "mid;leaf": 2 * N}),
    (["--notrace", "mid"], {"FTRACE_NOTRACE": "mid"},
     {"main": 1, "main;top": 1, "main;leaf": 1}),
    (["--graph-function", "top", "--notrace", "mid"],
     {"FTRACE_GRAPH_FUNCTION": "top", "FTRACE_NOTRACE": "mid"}, {"top": 1}),
    (["--threshold", "1s"], {"FTRACE_THRESHOLD": "1s"}, None),  # every call is shorter
    (["--threshold", "0"], {"FTRACE_THRESHOLD": "0"}, FULL),
    (["--disabled"], {"FTRACE_DISABLED": "1"}, None),
    (["--lossless"], {"FTRACE_LOSSLESS": "1"}, FULL),
    (["--clock", "mono"], {"FTRACE_CLOCK": "mono"}, FULL),
    (["--clock", "tsc"], {"FTRACE_CLOCK": "tsc"}, FULL),
    (["--clock", "auto"], {"FTRACE_CLOCK": "auto"}, FULL),
    (["--exit", "hook"], {"FTRACE_EXIT": "hook"}, FULL),
    (["--exit", "through"], {"FTRACE_EXIT": "through"}, FULL),
    ([], {}, FULL),
]

# (command line after ftrace-run, exit status, a piece of the one stderr line)
BAD = [
    (["--bogus", "PROG"], 2, "unknown option '--bogus'"),
    (["-F"], 2, "needs an argument"),
    (["--exit", "back", "PROG"], 2, "--exit back: want through or hook"),
    (["-F", "a,,b", "PROG"], 2, "bad filter term 2"),
    (["-F", "@a(", "PROG"], 2, "bad regular expression"),
    (["--graph-function", "[x", "PROG"], 2, "unmatched ["),
    (["--max-depth", "deep", "PROG"], 2, "--max-depth 'deep'"),
    (["--threshold", "10 parsecs", "PROG"], 2, "--threshold '10 parsecs'"),
    (["--clock", "sundial", "PROG"], 2, "--clock sundial: want tsc, mono or auto"),
    ([], 2, "no program given"),
    (["/nonexistent/prog"], 127, "No such file or directory"),
    (["-o", "/nonexistent/dir/x.ftr", "PROG"], 1, "cannot write /nonexistent/dir/x.ftr"),
]


def tsc_trusted():
    """Whether ftrace-run's --clock auto takes the TSC here (preload/init.c, choose_clock): the
    CPU says it is invariant and the kernel offers it as a clocksource (a VM booted with
    tsc=unstable does not)."""
    try:
        with open("/sys/devices/system/clocksource/clocksource0/available_clocksource") as f:
            kernel = "tsc" in f.read().split()
    except OSError:
        kernel = True
    with open("/proc/cpuinfo") as f:
        flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    return kernel and "constant_tsc" in flags and "nonstop_tsc" in flags


# the summary line's end where the TSC is not trusted (init.c, clock_note)
CLOCK_NOTE = re.compile(r"; timed with CLOCK_MONOTONIC, slower: [^;]*$")


def run(cmd, cwd, env=None, timeout=60):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def tree_of(report_bin, trace, cwd, libcalls=False):
    rep = run([report_bin] + ([] if libcalls else ["--no-libcall"]) + [trace], cwd)
    assert rep.returncode == 0, "ftrace-report: %s" % rep.stderr
    folded, open_calls = parse_graph(rep.stdout)
    assert not open_calls, "open calls: %s" % open_calls
    trees = [dict(c) for c in folded.values()]
    assert len(trees) <= 1, "one thread expected: %s" % trees
    return trees[0] if trees else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    bindir = os.path.abspath(a.bin)
    ftrace_run = os.path.join(bindir, "ftrace-run")
    report = os.path.join(bindir, "ftrace-report")
    lib = os.path.join(bindir, "libftrace.so")
    work = tempfile.mkdtemp(prefix="ftr-opt-")
    passed = failed = 0
    results = collections.OrderedDict()

    def check(tag, fn):
        nonlocal passed, failed
        try:
            fn()
            print("ok   %s" % tag)
            passed += 1
        except (AssertionError, subprocess.TimeoutExpired) as e:
            print("FAIL %s: %s" % (tag, e))
            failed += 1

    builds = {
        "pgfentry": "gcc -O2 -pg -mfentry",
        "nop": "gcc -O2 -pg -mfentry -mnop-mcount -mrecord-mcount -fno-pie -no-pie",
    }
    for bname, cc in builds.items():
        exe = os.path.join(work, "tree-" + bname)
        subprocess.run("%s -I%s -o %s %s/tree.c" % (cc, PROGS, exe, PROGS), shell=True,
                       check=True)
        base = run([exe, str(N)], work)
        for opts, env, want in CASES:
            for how in ("option", "env"):
                tag = "%s/%s %s" % (bname, how, " ".join(opts) or "(none)")
                trace = os.path.join(work, "t.ftr")

                def one(opts=opts, env=env, want=want, how=how, trace=trace):
                    if os.path.exists(trace):
                        os.unlink(trace)
                    if how == "option":
                        r = run([ftrace_run, "-q", "-o", trace] + opts + [exe, str(N)], work)
                    else:
                        e = dict(os.environ, LD_PRELOAD=lib, FTRACE_OUTPUT=trace,
                                 FTRACE_QUIET="1", **env)
                        r = run([exe, str(N)], work, env=e)
                    assert r.stdout == base.stdout and r.returncode == base.returncode, \
                        "program changed: %r %d" % (r.stdout, r.returncode)
                    libcalls = isinstance(want, tuple)
                    w = want[1] if libcalls else want
                    got = tree_of(report, trace, work, libcalls)
                    assert got == w, "tree %s, want %s" % (got, w)
                check(tag, one)
        # durations on every clock path agree with the program's own clock within 2%: a
        # 100 ms sleep, measured by the program inside the traced call and around it (the
        # traced duration lies between: the hooks run in between, and may be preempted on a
        # loaded machine, around a system call most of all), and the clock named in --info
        slp = os.path.join(work, "sleeper-" + bname)
        subprocess.run("%s -I%s -o %s %s/sleeper.c" % (cc, PROGS, slp, PROGS), shell=True,
                       check=True)
        auto = "TSC at" if tsc_trusted() else "CLOCK_MONOTONIC (the "
        for clock, named in (("auto", auto), ("tsc", "TSC at"),
                             ("mono", "CLOCK_MONOTONIC")):
            def sleep_ok(clock=clock, named=named, slp=slp):
                trace, own = os.path.join(work, "s.ftr"), os.path.join(work, "own.txt")
                r = run([ftrace_run, "-q", "--clock", clock, "-o", trace, slp, own], work)
                assert r.returncode == 0 and r.stdout == "slept\n", "program: %r" % r.stdout
                with open(own) as f:
                    inner_ns, outer_ns = map(int, f.read().split())
                ch = run([report, "--chrome", trace], work)
                ev = [json.loads(line.rstrip(",")) for line in ch.stdout.splitlines()
                      if '"name":"sleeper"' in line]
                begin = [e["ts"] for e in ev if e["ph"] == "B"]
                end = [e["ts"] for e in ev if e["ph"] == "E"]
                assert len(begin) == 1 and len(end) == 1, "sleeper events: %s" % ev
                got_ns = (end[0] - begin[0]) * 1000.0
                assert 0.98 * inner_ns <= got_ns <= 1.02 * outer_ns, \
                    "sleeper: %.0f ns traced, %d..%d ns by its own clock" % (
                        got_ns, inner_ns, outer_ns)
                info = run([report, "--info", trace], work).stdout
                assert named in info, "--info: no %r in %s" % (named, info)
            check("%s/clock %s: a 100 ms sleep within 2%%" % (bname, clock), sleep_ok)
        # functions whose sites cannot be patched: named in the one summary line
        odd = os.path.join(work, "skipped-" + bname)
        subprocess.run("%s %s -I%s -o %s %s/skipped.c" % (
            cc, "-DLIST_SITES" if "mcount" in cc else "", PROGS, odd, PROGS), shell=True,
            check=True)

        def skipped(exe=exe, odd=odd):
            base = run([odd], work)
            r = run([ftrace_run, "-o", os.path.join(work, "k.ftr"), odd], work)
            assert r.stdout == base.stdout and r.returncode == base.returncode, \
                "program changed: %r %d" % (r.stdout, r.returncode)
            lines = r.stderr.replace(base.stderr, "").strip().splitlines()
            assert len(lines) == 1 and CLOCK_NOTE.sub("", lines[0]).endswith(
                " KiB); 2 functions could not be traced: odd_entry, odd_other, see --info") \
                and " calls traced into " in lines[0], "stderr: %r" % r.stderr
            assert tree_of(report, os.path.join(work, "k.ftr"), work) == {
                "main": 1, "main;work": 3}
            r = run([ftrace_run, "-o", os.path.join(work, "k.ftr"), exe, str(N)], work)
            assert "could not be traced" not in r.stderr, "stderr: %r" % r.stderr
        check("%s/skipped functions named in the summary line" % bname, skipped)

        # fork children that record say nothing: one summary line for the whole run
        forker = os.path.join(work, "bproc-" + bname)
        subprocess.run("%s -I%s -o %s %s/bproc.c" % (cc, PROGS, forker, PROGS), shell=True,
                       check=True)

        def one_line(forker=forker):
            base = run([forker, "many"], work)
            r = run([ftrace_run, "-o", os.path.join(work, "m.ftr"), forker, "many"], work)
            assert r.stdout == base.stdout and r.returncode == base.returncode, \
                "program changed: %r %d" % (r.stdout[-200:], r.returncode)
            lines = [l for l in r.stderr.splitlines() if l.startswith("ftrace-run: ")]
            assert len(lines) == 1 and " calls traced into " in lines[0], \
                "%d lines: %r" % (len(lines), lines[:3])
        check("%s/one summary line for 200 children" % bname, one_line)

        # a filter that matches nothing says so, with the nearest names
        def unmatched(exe=exe):
            r = run([ftrace_run, "-o", os.path.join(work, "u.ftr"), "-F", "lef", exe], work)
            assert r.returncode == base.returncode, "exit %d" % r.returncode
            assert "matches none" in r.stderr and "leaf" in r.stderr, r.stderr
        check("%s/unmatched filter names the nearest" % bname, unmatched)

    plain = os.path.join(work, "plain")
    subprocess.run("gcc -O2 -I%s -o %s %s/tree.c" % (PROGS, plain, PROGS), shell=True, check=True)
    for cmdline, status, text in BAD:
        tag = "bad input: %s" % " ".join(cmdline)

        def bad(cmdline=cmdline, status=status, text=text):
            r = run([ftrace_run] + [plain if c == "PROG" else c for c in cmdline], work)
            assert r.returncode == status, "exit %d, want %d: %s" % (r.returncode, status,
                                                                    r.stderr)
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and text in lines[0], "stderr: %r" % r.stderr
        check(tag, bad)

    def uninstrumented():
        base = run([plain, str(N)], work)
        r = run([ftrace_run, "-o", os.path.join(work, "p.ftr"), plain, str(N)], work)
        assert r.stdout == base.stdout and r.returncode == base.returncode
        lines = r.stderr.replace(base.stderr, "").strip().splitlines()
        assert len(lines) == 1 and "no function entry hooks found" in lines[0], r.stderr
    check("uninstrumented program runs untraced with one line", uninstrumented)

    static = os.path.join(work, "static")
    if subprocess.run("gcc -O2 -static -pg -mfentry -I%s -o %s %s/tree.c" % (PROGS, static, PROGS),
                      shell=True, capture_output=True).returncode == 0:
        def static_bin():
            base = run([static, str(N)], work)
            r = run([ftrace_run, "-o", os.path.join(work, "s.ftr"), static, str(N)], work)
            assert r.stdout == base.stdout and r.returncode == base.returncode
            assert "statically linked" in r.stderr, r.stderr
        check("static binary: said before running, runs untraced", static_bin)

    def installed():
        prefix = os.path.join(work, "prefix")
        r = run(["cmake", "--install", bindir, "--prefix", prefix], work)
        assert r.returncode == 0, "cmake --install: %s" % r.stderr
        exe = os.path.join(work, "tree-pgfentry")
        trace = os.path.join(work, "inst.ftr")
        r = run([os.path.join(prefix, "bin", "ftrace-run"), "-q", "-o", trace, exe, str(N)], work)
        assert r.returncode == 3 and os.path.exists(trace), "installed ftrace-run: %s" % r.stderr
        rep = run([os.path.join(prefix, "bin", "ftrace-report"), trace], work)
        assert rep.returncode == 0 and "main() {" in rep.stdout, rep.stderr
    check("installed under another prefix, ftrace-run finds libftrace.so", installed)

    def cet_unmarked():
        # docs/design.md, "CET shadow stacks": a hooked return is a shadow-stack violation, and
        # mcount sites and functions in doubt keep hooked returns, so libftrace.so must not be
        # marked for shadow stacks: glibc then runs a CET-capable process without them.
        r = run(["readelf", "-n", "-W", lib], work)
        assert r.returncode == 0, r.stderr
        assert "SHSTK" not in r.stdout, "libftrace.so is marked for shadow stacks:\n" + r.stdout
    check("libftrace.so is not marked for CET shadow stacks", cet_unmarked)

    shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
