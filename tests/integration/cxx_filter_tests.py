#!/usr/bin/env python3
"""C++ names wherever a user types a function, and --summary's open calls.

tests/integration/progs/cxxnames.cpp (namespaces, a class with overloads and a const method,
function and class templates, a free operator, a call operator, a free function), built with
g++ and with clang++ (-O2 -pg -mfentry), traced with

  -F / FTRACE_FILTER   demangled names with and without parameter lists, globs across '::',
                       regexes with and without \\(, mangled names, exclusions, modules
  --graph-function, --notrace (and their variables), on demangled names
  a filter, --graph-function or --notrace that matches nothing: one line on stderr that says
                       so (with the nearest demangled names); the program runs as before
  ftrace-report --filter on the demangled names of a full trace
  ftrace-ctl PID filter: a demangled filter is accepted and takes effect; one that matches
                       nothing is refused (exit 2, one line) and the filter in force stays
                       (checked in the trace); one for a library not loaded yet is accepted
  --summary            a program that exits from inside a function: the open calls are counted
                       apart (column Open) and never in min/average/max/total

Each case checks the exact call tree (call path -> calls) against the unfiltered run's,
with the functions the case should select.

usage: cxx_filter_tests.py --bin DIR [--keep] [--only SUBSTRING]
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import buildcache  # noqa: E402
from run_integration import parse_graph  # noqa: E402
from ctl_tests import wait_file  # noqa: E402

SRC = os.path.join(HERE, "progs", "cxxnames.cpp")

# the functions of cxxnames.cpp as ftrace-report --demangle=full names them
MAIN = "main"
ROUND = "one_round()"
ADD1 = "shop::Cart::add(int)"
ADD2 = "shop::Cart::add(int, int)"
ADD3 = "shop::Cart::add(shop::Item const&)"
TOTAL = "shop::Cart::total() const"
HELPER = "shop::detail::helper(int)"
BIGI = "int shop::biggest<int>(int, int)"
BIGD = "double shop::biggest<double>(double, double)"
BOXI = "shop::Box<int>::get() const"
BOXL = "shop::Box<long>::get() const"
LESS = "shop::operator<(shop::Item const&, shop::Item const&)"
CALL = "shop::Fun::operator()(int) const"
FREE = "free_fn(int)"
ALL = {MAIN, ROUND, ADD1, ADD2, ADD3, TOTAL, HELPER, BIGI, BIGD, BOXI, BOXL, LESS, CALL, FREE}
SHOP = {ADD1, ADD2, ADD3, TOTAL, HELPER, BIGI, BIGD, BOXI, BOXL, LESS, CALL}
CART = {ADD1, ADD2, ADD3, TOTAL}

# -F EXPR -> the functions it selects
FILTERS = [
    ("shop::Cart::*", CART),
    ("shop::Cart::add", {ADD1, ADD2, ADD3}),
    ("shop::Cart::add(int)", {ADD1}),
    ("shop::Cart::add(int, int)", {ADD2}),
    ("shop::Cart::add(int,int)", {ADD2}),
    ("shop::Cart::add(shop::Item const&)", {ADD3}),
    ("shop::Cart::add(*)", {ADD1, ADD2, ADD3}),
    ("shop::Cart::total() const", {TOTAL}),
    ("shop::*::helper", {HELPER}),
    ("shop::*", SHOP),
    ("shop::biggest", {BIGI, BIGD}),
    ("shop::biggest<int>", {BIGI}),
    ("shop::biggest<double>(double, double)", {BIGD}),
    ("int shop::biggest<int>(int, int)", {BIGI}),
    ("shop::Box::get", {BOXI, BOXL}),
    ("shop::Box<long>::get", {BOXL}),
    ("shop::operator<", {LESS}),
    ("shop::operator<,free_fn", {LESS, FREE}),
    ("shop::Fun::operator()", {CALL}),
    ("shop::Fun::operator()(int) const", {CALL}),
    ("free_fn,shop::detail::helper", {FREE, HELPER}),
    ("shop::Cart::add(int, int),free_fn(int)", {ADD2, FREE}),
    ("@^shop::Cart::add$", {ADD1, ADD2, ADD3}),
    (r"@^shop::Cart::add\(int\)$", {ADD1}),
    ("@Cart::(add|total)$", CART),
    ("_ZN4shop4Cart3addEi", {ADD1}),
    ("_ZN4shop4Cart3add*", {ADD1, ADD2, ADD3}),
    ("shop::*,-shop::Cart::add(int)", SHOP - {ADD1}),
    ("-shop::*", {MAIN, ROUND, FREE}),
    ("-shop::Cart::add", ALL - {ADD1, ADD2, ADD3}),
    ("exe:shop::Cart::add(int, int)", {ADD2}),
    ("cxx-*:shop::Cart::total", {TOTAL}),
]

# (--graph-function, --notrace) -> (what the trace holds: "roots" F to keep the trees under,
# "hidden" functions whose trees go)
GRAPH = [
    ("shop::Cart::total", None, {TOTAL}, set()),
    ("shop::Cart::total() const", None, {TOTAL}, set()),
    ("free_fn", None, {FREE}, set()),
    ("shop::Cart::*", None, CART, set()),
    (None, "shop::Cart::*", None, CART),
    (None, "free_fn(int)", None, {FREE}),
    (None, "shop::Box::get,shop::biggest", None, {BOXI, BOXL, BIGI, BIGD}),
    ("one_round", "shop::Cart::add(int, int)", {ROUND}, {ADD2}),
]

# ftrace-report --filter EXPR on the full trace -> the functions it shows
REPORT = [
    ("shop::Cart::add(int)", {ADD1}),
    ("shop::Cart::add(int, int)", {ADD2}),
    ("shop::Cart::*", CART),
    (r"@^shop::Cart::add\(int\)$", {ADD1}),
    ("shop::*,-shop::Cart::add", SHOP - {ADD1, ADD2, ADD3}),
    ("shop::Box::get", {BOXI, BOXL}),
    ("shop::operator<", {LESS}),
    ("-shop::*", {MAIN, ROUND, FREE}),
]


def run(cmd, cwd, env=None, timeout=60):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def project(tree, keep):
    """the tree as if only the functions in keep were traced"""
    out = collections.Counter()
    for stack, n in tree.items():
        frames = stack.split(";")
        if frames[-1] not in keep:
            continue
        out[";".join(f for f in frames if f in keep)] += n
    return dict(out)


def under(tree, roots, hidden):
    """the trees under roots (None: everything), without the trees of hidden"""
    out = collections.Counter()
    for stack, n in tree.items():
        frames = stack.split(";")
        if any(f in hidden for f in frames):
            continue
        if roots is not None:
            first = next((i for i, f in enumerate(frames) if f in roots), None)
            if first is None:
                continue
            frames = frames[first:]
        out[";".join(frames)] += n
    return dict(out)


class Tools:
    def __init__(self, bindir, work):
        self.run_bin = os.path.join(bindir, "ftrace-run")
        self.report_bin = os.path.join(bindir, "ftrace-report")
        self.ctl_bin = os.path.join(bindir, "ftrace-ctl")
        self.lib = os.path.join(bindir, "libftrace.so")
        self.work = work
        self.env = dict(os.environ)
        for k in list(self.env):
            if k.startswith("FTRACE_") or k in ("LD_PRELOAD", "XDG_RUNTIME_DIR"):
                del self.env[k]

    def trace(self, exe, opts, env=None, args=("once",)):
        path = os.path.join(self.work, "t.ftr")
        if os.path.exists(path):
            os.unlink(path)
        if env is None:
            r = run([self.run_bin, "-o", path] + opts + [exe] + list(args), self.work,
                    env=self.env)
        else:
            e = dict(self.env, LD_PRELOAD=self.lib, FTRACE_OUTPUT=path, **env)
            r = run([exe] + list(args), self.work, env=e)
        return path, r

    def tree(self, path, extra=()):
        # the program's own functions: library calls (traced too) left out
        rep = run([self.report_bin, "--demangle=full", "--no-libcall"] + list(extra) + [path],
                  self.work)
        assert rep.returncode == 0, "ftrace-report %s: %s" % (" ".join(extra), rep.stderr)
        folded, open_calls = parse_graph(rep.stdout)
        assert not open_calls, "open calls: %s" % open_calls
        trees = [dict(c) for c in folded.values()]
        assert len(trees) <= 1, "one thread expected: %s" % trees
        return trees[0] if trees else {}


def ftrace_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("ftrace-run: ") and
            " calls traced into " not in l]


def test_ctl(t, exe, tag):
    """ftrace-ctl PID filter with demangled names: accepted, refused, the old one stays"""
    trace = os.path.join(t.work, "ctl-%s.ftr" % tag)
    d = os.path.join(t.work, "ctl-" + tag)
    os.makedirs(d)
    p = subprocess.Popen([t.run_bin, "-q", "-o", trace, exe, "loop", d], cwd=t.work, env=t.env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ctl(*args):
        return run([t.ctl_bin, str(p.pid)] + list(args), t.work, env=t.env)

    def mark(n):
        open(os.path.join(d, "mark%d" % n), "w").close()
        wait_file(os.path.join(d, "ack%d" % n), p)

    def expect(r, code, text, what):
        msg = "%s: exit %d (want %d), stdout %r, stderr %r" % (what, r.returncode, code,
                                                                r.stdout, r.stderr)
        assert r.returncode == code, msg
        if code:
            lines = r.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("ftrace-ctl: "), "one line: " + msg
        if text:
            assert text in r.stdout + r.stderr, "want %r: %s" % (text, msg)

    try:
        wait_file(os.path.join(d, "ready"), p)
        old = "shop::Cart::add(int, int),mark_*"
        expect(ctl("filter", old), 0, None, "demangled filter with a parameter list")
        expect(ctl("status"), 0, "filter: " + old, "status shows the filter")
        mark(1)
        time.sleep(0.2)
        r = ctl("filter", "shop::Nothing::*")
        expect(r, 2, "no function matches the filter 'shop::Nothing::*'", "filter matching nothing")
        r = ctl("filter", "shop::Cart::ad")
        expect(r, 2, "shop::Cart::add", "refusal names the nearest demangled names")
        r = ctl("filter", "_ZN4shop4Nope*,-free_fn")
        expect(r, 2, "no function matches", "mangled filter matching nothing")
        expect(ctl("status"), 0, "filter: " + old, "the filter in force stays after refusals")
        mark(2)
        time.sleep(0.2)
        mark(3)
        expect(ctl("filter", "-shop::*"), 0, None, "exclusions only: accepted")
        time.sleep(0.2)
        # (libc has library calls now: the dynamic linker has none)
        expect(ctl("filter", "ld-linux*:*"), 2, "no function matches",
               "a loaded library without traceable functions")
        expect(ctl("filter", "libnotyet.so:*,shop::Nothing"), 0, None,
               "a library not loaded yet (a later dlopen may bring it): accepted")
        expect(ctl("status"), 0, "filter: libnotyet.so:*,shop::Nothing", "status")
    finally:
        open(os.path.join(d, "stop"), "w").close()
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise AssertionError("the program hung")
    assert p.returncode == 0 and out == "loop done\n" and err == "", \
        "program: %d %r %r" % (p.returncode, out, err)

    rep = run([t.report_bin, "--demangle=full", trace], t.work)
    assert rep.returncode == 0, rep.stderr
    parse_graph(rep.stdout)  # checks the nesting
    names = []
    for line in rep.stdout.splitlines():
        m = re.match(r"^\s*\d+\) [^|]*\|  +(.*?)(\(\);|\(\) \{)$", line)
        if m:
            names.append(m.group(1))

    def segment(a, b):
        i = names.index(a) if a in names else None
        assert i is not None, "%s() is not in the trace" % a
        j = names.index(b) if b in names else len(names)
        return names[i + 1:j]

    seg = segment("mark_1", "mark_2")
    assert seg.count(ADD2) >= 4 and set(seg) <= {ADD2}, \
        "after filter %r: %s" % (old, collections.Counter(seg))
    seg = segment("mark_2", "mark_3")
    assert seg.count(ADD2) >= 4 and set(seg) <= {ADD2}, \
        "after the refused filters, the old one is in force: %s" % collections.Counter(seg)
    seg = segment("mark_3", None)
    changed = next((i for i, n in enumerate(seg) if n != ADD2), len(seg))
    assert FREE in seg[changed:] and not any(n.startswith("shop::") for n in seg[changed:]), \
        "after filter '-shop::*': %s" % collections.Counter(seg[changed:])


def test_summary_open(t, exe):
    """a program that exits from inside shop::step(): open calls apart, never in the timings"""
    path, r = t.trace(exe, ["-q"], args=("exit",))
    assert r.returncode == 0, "exit %d: %s" % (r.returncode, r.stderr)
    rep = run([t.report_bin, "--summary", "--no-libcall", path], t.work)
    assert rep.returncode == 0, rep.stderr
    lines = rep.stdout.splitlines()
    assert re.match(r"^# \d+ functions?, 5 calls; 2 calls still open at the end, not in the "
                    r"timings \(column Open\)$", lines[0]), rep.stdout
    assert lines[1].split()[-2:] == ["Open", "Function"], rep.stdout
    units = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
    rows = {}
    for line in lines[3:]:
        f = line.split()
        rows[f[-1]] = f
    step = rows.get("shop::step")
    assert step, rep.stdout
    # Total Self Calls Average Min Max Open Function, times as "1.234 ms"
    assert step[4] == "5" and step[11] == "1", rep.stdout
    mn = float(step[7]) * units[step[8]]
    assert mn >= 0.9e6, "min of the closed calls (each >= 1 ms): %s" % " ".join(step)
    main = rows.get("main")
    assert main and main[:6] == ["-", "-", "0", "-", "-", "-"] and main[6] == "1", rep.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ftr-cxx-")
    t = Tools(os.path.abspath(a.bin), work)
    buildcache.use(a.bin)
    passed = failed = 0

    def check(tag, fn):
        nonlocal passed, failed
        if a.only not in tag:
            return
        try:
            fn()
            print("ok   %s" % tag)
            passed += 1
        except (AssertionError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
            print("FAIL %s: %s" % (tag, e))
            failed += 1

    builds = [("g++", "cxx-gcc"), ("clang++", "cxx-clang")]
    for cxx, name in builds:
        if not shutil.which(cxx):
            print("skip %s: not installed" % cxx)
            continue
        exe = os.path.join(work, name)
        buildcache.run([cxx, "-O2", "-pg", "-mfentry", "-o", exe, SRC], check=True,
                       capture_output=False)
        base = run([exe, "once"], work)
        path, r = t.trace(exe, ["-q"])
        assert r.returncode == 0 and r.stdout == base.stdout, r.stderr
        full = t.tree(path)
        assert set(";".join(full).split(";")) == ALL, "the functions of %s: %s" % (
            name, sorted(set(";".join(full).split(";"))))
        full_trace = os.path.join(work, "full-%s.ftr" % name)
        os.rename(path, full_trace)

        for expr, want in FILTERS:
            for how in ("-F", "FTRACE_FILTER"):
                def one(expr=expr, want=want, how=how, exe=exe):
                    if how == "-F":
                        path, r = t.trace(exe, ["-q", "-F", expr])
                    else:
                        path, r = t.trace(exe, [], env={"FTRACE_FILTER": expr,
                                                        "FTRACE_QUIET": "1"})
                    assert r.returncode == 0 and r.stdout == base.stdout, \
                        "program changed: %r %d %r" % (r.stdout, r.returncode, r.stderr)
                    assert not ftrace_lines(r.stderr), "stderr: %r" % r.stderr
                    got = t.tree(path)
                    assert got == project(full, want), "tree %s, want %s" % (
                        got, project(full, want))
                check("%s %s '%s'" % (name, how, expr), one)

        for gf, nt, roots, hidden in GRAPH:
            for how in ("option", "env"):
                def one(gf=gf, nt=nt, roots=roots, hidden=hidden, how=how, exe=exe):
                    if how == "option":
                        opts = ["-q"] + (["--graph-function", gf] if gf else []) + \
                               (["--notrace", nt] if nt else [])
                        path, r = t.trace(exe, opts)
                    else:
                        env = {"FTRACE_QUIET": "1"}
                        if gf:
                            env["FTRACE_GRAPH_FUNCTION"] = gf
                        if nt:
                            env["FTRACE_NOTRACE"] = nt
                        path, r = t.trace(exe, [], env=env)
                    assert r.returncode == 0 and r.stdout == base.stdout, r.stderr
                    assert not ftrace_lines(r.stderr), "stderr: %r" % r.stderr
                    got = t.tree(path)
                    want = under(full, roots, hidden)
                    assert got == want, "tree %s, want %s" % (got, want)
                check("%s %s --graph-function %s --notrace %s" % (name, how, gf, nt), one)

        # matching nothing: one line each, with the nearest demangled names; same program
        unmatched = [
            (["-F", "shop::Cart::ad"], "filter 'shop::Cart::ad' matches none", "shop::Cart::add"),
            (["--graph-function", "shop::Cart::totl"],
             "graph-function 'shop::Cart::totl' matches none", "shop::Cart::total"),
            (["--notrace", "shop::nope(int)"], "notrace 'shop::nope(int)' matches none", None),
        ]
        for opts, text, near in unmatched:
            def one(opts=opts, text=text, near=near, exe=exe):
                path, r = t.trace(exe, opts)
                assert r.returncode == 0 and r.stdout == base.stdout, r.stderr
                lines = [l for l in ftrace_lines(r.stderr) if "matches none" in l]
                assert len(lines) == 1 and text in lines[0], "stderr: %r" % r.stderr
                if near:
                    assert "nearest: " in lines[0] and near in lines[0].split("nearest: ")[1], \
                        "nearest names: %r" % lines[0]
            check("%s %s matches nothing: says so" % (name, " ".join(opts)), one)

        for expr, want in REPORT:
            def one(expr=expr, want=want):
                got = t.tree(full_trace, ["--filter", expr])
                assert got == project(full, want), "tree %s, want %s" % (got,
                                                                         project(full, want))
            check("%s ftrace-report --filter '%s'" % (name, expr), one)

        def report_nothing(full_trace=full_trace):
            r = run([t.report_bin, "--filter", "shop::Cart::add(long)", full_trace], work)
            assert r.returncode == 1 and "no function matches the filter" in r.stderr, r.stderr
        check("%s ftrace-report --filter matching nothing" % name, report_nothing)

        check("%s ftrace-ctl filter on demangled names" % name,
              lambda exe=exe, name=name: test_ctl(t, exe, name))
        check("%s --summary: calls open at the end are counted apart" % name,
              lambda exe=exe: test_summary_open(t, exe))

    if a.keep:
        print("kept %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
