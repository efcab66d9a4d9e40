#!/usr/bin/env python3
"""Every ftrace-run option and FTRACE_* variable, and bad input to the tools.

For each option: the exact call tree of tests/integration/progs/tree.c (main -> top -> mid x N
-> leaf x 2; main -> leaf), traced with the option and with the same setting through the
environment only (LD_PRELOAD=libftrace.so FTRACE_...=...), in a -pg -mfentry build and a
-mnop-mcount build. Then bad input: one clear line and the documented exit status. First,
programs built with -fsanitize=address, leak or thread (progs/sanitized.c, with gcc and clang;
a build or run that fails here is skipped with a note): traced with the program unchanged, or
untraced with one line.

usage: options_tests.py --bin DIR [--sanitizers (only those)]
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
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import buildcache  # noqa: E402
from run_integration import parse_graph  # noqa: E402

PROGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs")
N = 3
FULL = {"main": 1, "main;top": 1, "main;top;mid": N, "main;top;mid;leaf": 2 * N, "main;leaf": 1}

# the library calls tree.c makes (at -O2 atoi is strtol); traced by default
LIBC = {"strtol": 1, "printf": 1, "fwrite": 1}


def with_libc(tree):
    """tree, with the library calls main makes (a report that shows them), and those made
    around main"""
    t = dict(tree)
    t.update({"main;" + k: v for k, v in LIBC.items()})
    return ("libcalls", t, "around")


# the library calls (all into libc) made outside main, per build: gcrt1's before main (both
# builds link with -pg), and in the PIE the __cxa_finalize of crtbeginS.o's
# __do_global_dtors_aux at exit
AROUND_MAIN = {"pgfentry": {"__monstartup": 1, "__cxa_atexit": 1, "__cxa_finalize": 1},
               "nop": {"__monstartup": 1, "__cxa_atexit": 1}}


# option args -> (environment, expected tree of the single thread; None: no events at all).
# The tree is of the program's functions (ftrace-report --no-libcall), or ("libcalls", tree):
# the whole report, library calls included (("libcalls", tree, "around"): and AROUND_MAIN).
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
    (["-F", "libc.so*:*"], {"FTRACE_FILTER": "libc.so*:*"}, ("libcalls", LIBC, "around")),
    (["-F", "libc.so*:*,-printf"], {"FTRACE_FILTER": "libc.so*:*,-printf"},
     ("libcalls", {"strtol": 1, "fwrite": 1}, "around")),
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
    (["--no-recorder"], {"FTRACE_RECORDER": "0"}, FULL),
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
    """Whether ftrace-run's --clock auto takes the TSC here (preload/runtime/init.c,
    choose_clock): the CPU says it is invariant and the kernel offers it as a clocksource (a VM
    booted with tsc=unstable does not)."""
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


# Programs built with a sanitizer (progs/sanitized.c; docs/design.md, "Sanitized programs").
# ASan's runtime must come first in the initial library list: ftrace-run preloads it ahead of
# libftrace.so, and the program's children (a shell here) must not inherit it. clang links the
# runtime into the executable. ThreadSanitizer: untraced, said in one line.
SAN_BUILDS = [("gcc", "address"), ("gcc", "leak"), ("gcc", "thread"), ("clang", "address"),
              ("clang", "thread")]
SAN_FLAGS = "-O1 -g -pg -mfentry -fno-omit-frame-pointer -pthread"
SAN_TREES = [  # ftrace-report --no-libcall, per thread: main's, then the worker's
    {"main": 1, "main;build": 1, "main;build;fill": 1, "main;total": 1, "main;total;add": 4,
     "main;spawn": 1},
    {"worker": 1, "worker;total": 1, "worker;total;add": 4},
]
SAN_FRAME = re.compile(r"^\s+#\d+ 0x[0-9a-f]+ in (\S+)")


def san_report(stderr):
    """A sanitizer's report, as what names the error and where: its ERROR and SUMMARY lines,
    and the functions in its stacks (addresses, pids and the shadow map vary from run to run)"""
    out = []
    for line in stderr.splitlines():
        m = SAN_FRAME.match(line)
        if m:
            out.append("  in " + m.group(1))
        elif "ERROR:" in line or line.startswith("SUMMARY:") or " by thread T" in line:
            out.append(re.sub(r"0x[0-9a-f]+|==\d+==|\(pid=\d+\)", "X", line))
    return out


def sanitizer_checks(check, work, ftrace_run, report):
    src = os.path.join(PROGS, "sanitized.c")

    def same_run(r, base):
        """r ran as base did; returns ftrace-run's own lines"""
        own = [l for l in r.stderr.splitlines() if l.startswith("ftrace-run: ")]
        rest = "".join(l + "\n" for l in r.stderr.splitlines() if l not in own)
        assert r.stdout == base.stdout and r.returncode == base.returncode, \
            "program changed: %r %d, untraced %r %d; stderr %r" % (
                r.stdout, r.returncode, base.stdout, base.returncode, r.stderr[-2000:])
        assert rest == base.stderr, "its stderr changed: %r, untraced %r" % (rest, base.stderr)
        return own

    for cc, san in SAN_BUILDS:
        exe = os.path.join(work, "sanitized-%s-%s" % (cc, san))
        b = buildcache.run("%s %s -fsanitize=%s -I%s -o %s %s" % (
            cc, SAN_FLAGS, san, PROGS, exe, src), shell=True, capture_output=True, text=True)
        base = run([exe, "4"], work) if b.returncode == 0 else None
        if base is None or base.stdout != "sanitized 14 14 7\n" or base.returncode != 5:
            why = (b.stderr if b.returncode else "it does not run here: " + base.stderr).strip()
            print("skip %s -fsanitize=%s: %s" % (cc, san, why.splitlines()[-1][:300]))
            continue
        name = "sanitized/%s -fsanitize=%s" % (cc, san)

        if san == "thread":
            # ThreadSanitizer would see the tracer's threads through its interceptors and
            # report races in them (exit status 66)
            def tsan(exe=exe, base=base):
                r = run([ftrace_run, "-o", os.path.join(work, "tsan.ftr"), exe, "4"], work,
                        timeout=120)
                own = same_run(r, base)
                assert len(own) == 1 and "ThreadSanitizer" in own[0] and "untraced" in own[0], \
                    "ftrace-run's lines: %r" % own
            check(name + ": untraced, said in one line", tsan)
            continue

        for args in ([], ["--exit", "hook"], ["--auto-args"]):
            def traced(args=args, exe=exe, base=base):
                trace = os.path.join(work, "san.ftr")
                if os.path.exists(trace):
                    os.unlink(trace)
                r = run([ftrace_run, "-o", trace] + args + [exe, "4"], work, timeout=120)
                own = same_run(r, base)
                assert len(own) == 1 and " calls traced into " in own[0], "ftrace-run: %r" % own
                rep = run([report, "--no-libcall", "--no-args", trace], work)
                assert rep.returncode == 0, "ftrace-report: %s" % rep.stderr
                folded, open_calls = parse_graph(rep.stdout)
                assert not open_calls, "open calls: %s" % open_calls
                got = sorted((dict(c) for c in folded.values()), key=lambda t: "worker" in t)
                assert got == SAN_TREES, "trees %s" % got
            check("%s %s: traced, the program unchanged" % (name, " ".join(args) or "(defaults)"),
                  traced)
        if cc != "gcc":
            continue

        # Its errors: the same exit status and report. The stacks of allocations and frees
        # come from the fast unwinder, which reads return addresses: the tracer's frames show
        # in them (ftr_tramp_through between the program's; with --exit hook, ftr_tramp_hooked
        # in place of its callers). The slow unwinder (the error's own stack; all of them with
        # fast_unwind_on_malloc=0) sees the program's frames alone. Calls into the runtime are
        # not hooked: malloc's caller is not ftr_tramp_hooked.
        errors = [("overflow", [], ""), ("uaf", [], ""), ("leak", [], ""),
                  ("uaf", [], "fast_unwind_on_malloc=0"),
                  ("uaf", ["--exit", "hook"], "fast_unwind_on_malloc=0"),
                  ("leak", ["--exit", "hook"], "fast_unwind_on_malloc=0")]
        for mode, args, opts in errors if san == "address" else errors[2:3]:
            def error(mode=mode, args=args, opts=opts, exe=exe):
                env = dict(os.environ, ASAN_OPTIONS=opts)
                base = run([exe, "4", mode], work, env=env)
                r = run([ftrace_run, "-o", os.path.join(work, "err.ftr")] + args +
                        [exe, "4", mode], work, env=env, timeout=120)
                assert r.stdout == base.stdout and r.returncode == base.returncode, \
                    "program changed: %r %d, untraced %r %d; stderr %r" % (
                        r.stdout, r.returncode, base.stdout, base.returncode, r.stderr[-2000:])
                want, got = san_report(base.stderr), san_report(r.stderr)
                assert "  in build" in want, "untraced: %r" % base.stderr
                if not opts:
                    got = [l for l in got if l != "  in ftr_tramp_through"]
                assert got == want, "report %r, untraced %r" % (got, want)
            check("%s %s: the same report%s" % (
                name, " ".join([mode] + args + (["ASAN_OPTIONS=" + opts] if opts else [])),
                "" if opts else " (the tracer's frames aside)"), error)
        if san != "address":
            continue

        # the runtime already in LD_PRELOAD stays first; a program without ASan whose user
        # preloads it is traced too
        rt = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True,
                            text=True).stdout.strip()

        def preloaded(exe=exe, rt=rt):
            env = dict(os.environ, LD_PRELOAD=rt)
            base = run([exe, "4"], work, env=env)  # the shell is given it too: "9"
            r = run([ftrace_run, "-o", os.path.join(work, "pre.ftr"), exe, "4"], work, env=env,
                    timeout=120)
            own = same_run(r, base)
            assert len(own) == 1 and " calls traced into " in own[0], "ftrace-run: %r" % own
            plain = os.path.join(work, "tree-asanpre")
            buildcache.run(["gcc", "-O2", "-pg", "-mfentry", "-I" + PROGS, "-o", plain,
                            os.path.join(PROGS, "tree.c")], check=True)
            trace = os.path.join(work, "pre.ftr")
            r = run([ftrace_run, "-q", "-o", trace, plain, str(N)], work, env=env)
            assert r.returncode == 3 and r.stdout == run([plain, str(N)], work).stdout, \
                "tree under a preloaded ASan: %d %r" % (r.returncode, r.stderr[-2000:])
            assert tree_of(report, trace, work) == FULL
        check(name + ": the runtime already in LD_PRELOAD", preloaded)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--sanitizers", action="store_true",
                    help="only the programs built with a sanitizer")
    a = ap.parse_args()
    bindir = os.path.abspath(a.bin)
    buildcache.use(bindir)
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

    sanitizer_checks(check, work, ftrace_run, report)
    if a.sanitizers:
        shutil.rmtree(work, ignore_errors=True)
        print("%d passed, %d failed" % (passed, failed))
        return 1 if failed else 0
    builds = {
        "pgfentry": "gcc -O2 -pg -mfentry",
        "nop": "gcc -O2 -pg -mfentry -mnop-mcount -mrecord-mcount -fno-pie -no-pie",
    }
    for bname, cc in builds.items():
        exe = os.path.join(work, "tree-" + bname)
        buildcache.run("%s -I%s -o %s %s/tree.c" % (cc, PROGS, exe, PROGS), shell=True,
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
                    if libcalls and len(want) > 2:
                        w = dict(w, **AROUND_MAIN[bname])
                    got = tree_of(report, trace, work, libcalls)
                    assert got == w, "tree %s, want %s" % (got, w)
                check(tag, one)
        # durations on every clock path agree with the program's own clock within 2%: a
        # 100 ms sleep, measured by the program inside the traced call and around it (the
        # traced duration lies between: the hooks run in between, and may be preempted on a
        # loaded machine, around a system call most of all), and the clock named in --info
        slp = os.path.join(work, "sleeper-" + bname)
        buildcache.run("%s -I%s -o %s %s/sleeper.c" % (cc, PROGS, slp, PROGS), shell=True,
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
        buildcache.run("%s %s -I%s -o %s %s/skipped.c" % (
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
        buildcache.run("%s -I%s -o %s %s/bproc.c" % (cc, PROGS, forker, PROGS), shell=True,
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
    buildcache.run("gcc -O2 -I%s -o %s %s/tree.c" % (PROGS, plain, PROGS), shell=True, check=True)
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
    if buildcache.run("gcc -O2 -static -pg -mfentry -I%s -o %s %s/tree.c" % (PROGS, static, PROGS),
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
