#!/usr/bin/env python3
"""Behaviour tests ("faithful on real programs"): programs that use threads, signals, non-local
exits, C++ exceptions, coroutines, tail calls, new processes, shared libraries and the limits of
a process, built with one instrumentation flag set, run untraced and under ftrace-run. Each case
checks that the program's stdout and exit status (and, for most, stderr) are unchanged, and that
the report holds exactly the expected call trees per thread (names, nesting, counts; threads are
matched order-free), what is left open at the end, and the same open calls in --chrome.

The programs are tests/integration/progs/b*.c, b*.cpp, libb*.c; each says its expected tree.

usage: behaviours.py --bin DIR --flagset NAME [--opt O0|O2|both] [--keep] [--only CASE[,CASE]]
                     [--repeat N]
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import buildcache  # noqa: E402
from run_integration import (FLAGSETS, PROGS, arg_parser, check_chrome, compare_runs,  # noqa: E402
                             STRESS_DIV, parse_graph_sections, run_matrix, same_trees,
                             scaled)

CXX = {"gcc": "g++", "clang": "clang++"}
TIMEOUT = 60


class Case:
    """src: program in progs/ (.c or .cpp: the C++ compiler of the flag set builds .cpp);
    args; check(result) raises AssertionError; cflags: extra compiler flags (then the build is
    named src-variant); needed: libraries (source, name, extra flags) the program links;
    dlopen: libraries built next to it but not linked; opts: optimisation levels it runs at;
    stderr: compare stderr with the untraced run; report: check the trace (False: the run is
    expected untraced); verify(exe, opt, flagset): checks on the binary, returning facts the
    check reads as Result.facts; compilers: the flag sets' compilers it is built with (others
    skip it); frame_pointer: False builds the program without frame pointers (see build()); graph_args:
    options of the graph the check reads (a 16 000-level chain prints half a gigabyte); env: more
    environment for the traced run; base_only: the case stresses the tracer's own threads and
    descriptors, which neither the flag set, nor the exit mode, nor value capture changes: it
    runs in the base configuration only (BASE_FLAGSET, returns hijacked, no values), so that
    a soak run of the whole suite stays short enough to be repeated 20 times."""

    def __init__(self, src, args, check, cflags="", variant="", needed=(), dlopen=(),
                 opts=("O0", "O2"), stderr=True, report=True, verify=None,
                 compilers=("gcc", "clang"), frame_pointer=True, graph_args=(), env=None,
                 base_only=False):
        self.src, self.args, self.check = src, args, check
        self.cflags, self.variant = cflags, variant
        self.needed, self.dlopen = needed, dlopen
        self.opts, self.stderr, self.report, self.verify = opts, stderr, report, verify
        self.compilers, self.frame_pointer = compilers, frame_pointer
        self.graph_args = list(graph_args)
        self.env = dict(env or {})
        self.base_only = base_only

# FTRACE_TEST_VALUES=1: every case with values recorded at every traced call: strings read from
# whatever rdi and rsi hold (bad pointers included), xmm0, the first stack word, and the return
# value typed from DWARF: value capture under signals, jumps, exceptions, forks and threads. The
# program must behave the same; the trees are compared without the values (--no-args).
VALUES_ENV = ({"FTRACE_AUTO_ARGS": "1", "FTRACE_ARGS": "*@arg1/s,arg2/s,fparg1,arg7"}
              if os.environ.get("FTRACE_TEST_VALUES") else {})
# The configuration the base_only cases run in
BASE_FLAGSET = "gcc-pgfentry"


def base_config(flagset):
    return (flagset == BASE_FLAGSET and not VALUES_ENV
            and os.environ.get("FTRACE_EXIT", "through") == "through")


# The costly cases (loops that scaled() shortens) run in full at -O2 only in the base
# configuration: at -O0 they run a tenth as long in each other configuration (FTR_STRESS_DIV=10),
# where the code's shape is what differs; at full length, what is stressed is the tracer.
FULL_AT_O2_ONLY = {"threads-churn", "hostile-sigswitch", "proc-many"}


def full_views(flagset):
    """Whether the views beside the graph (the --chrome view checked against the graph, the
    whole report with library calls) are checked: in the base configuration, the mcount flag
    set (every return hooked: other exits in the trace), and with values (arguments in the
    JSON). They are the report's own consistency on the trace; the other configurations check
    the graph, and the library calls of the cases that must show some (LIBCALLS)."""
    return base_config(flagset) or flagset == "gcc-pg" or bool(VALUES_ENV)


# The library calls these cases must show (their own, which never return or return twice
# among them), in the whole report
LIBCALLS = {
    "jmp-longjmp": ["longjmp"], "jmp-siglongjmp": ["siglongjmp"],
    "proc-fork": ["fork"], "proc-forkret": ["fork", "waitpid"], "proc-exec": ["execve"],
    "threads-exit": ["pthread_exit"], "threads-mainexit": ["pthread_exit"],
    "lib-dlopen": ["dlclose"],  # dlopen, which looks at its caller, is never hooked
}
# Library calls are traced (the default: every case runs with them) and left out of the trees
# the cases compare; check_libcalls() looks at them in the whole report.
REPORT_ARGS = ["--no-libcall"] + (["--no-args"] if VALUES_ENV else [])


class Result:
    def __init__(self, base, traced, sections, cwd, info=None, facts=None, report_err=""):
        self.base, self.traced, self.sections, self.cwd = base, traced, sections, cwd
        self._info, self.facts = info, facts
        self.report_err = report_err  # what ftrace-report said on stderr

    def view(self, view="--info", libcalls=False):
        """ftrace-report VIEW of the trace (--info, --summary, ...); libcalls: with them."""
        return self._info(view, libcalls)

    def parents(self):
        """pid -> (parent pid, the parent is in this trace), from ftrace-report --info."""
        text = self._info()
        got = {}
        for m in re.finditer(r"^process (\d+):.*\n(?:  .*\n)*?  parent +(\d+)( \(in this trace\))?",
                             text, re.M):
            got[int(m.group(1))] = (int(m.group(2)), bool(m.group(3)))
        return got

    def trees(self):
        """Every thread's folded tree, all processes together."""
        return [t for s in self.sections for t in s.folded.values()]

    def open_calls(self):
        return [st for s in self.sections for st in s.open.values()]


Section = collections.namedtuple("Section", "header pid folded open")


def parse_sections(text, skipped=None):
    """The report, one section per process (each starting with its '# ftrace-run: ... pid N'
    header line), parsed as parse_graph does (one graph-fold for them all); the pids of
    sections left out go to skipped."""
    out = []
    for header, pid, own, folded, open_calls in parse_graph_sections(text):
        # a process whose only calls were library calls (left out: --no-libcall) shows only
        # the frames it inherited: as if it had not recorded (a fork child that only called
        # execve or _exit), which it would not have without them
        if not own and "--no-libcall" in REPORT_ARGS:
            if skipped is not None:
                skipped.add(pid)
            continue
        out.append(Section(header, pid, folded, open_calls))
    return out


def show(tree, limit=12):
    items = sorted(tree.items())
    s = ", ".join("%s %d" % kv for kv in items[:limit])
    return "{%s%s}" % (s, ", ..." if len(items) > limit else "")


def tree_diff(got, want):
    """Multiset difference of two lists of trees, for failure messages."""
    key = lambda t: tuple(sorted(t.items()))
    g = collections.Counter(key(t) for t in got)
    w = collections.Counter(key(t) for t in want)
    extra = [dict(k) for k in (g - w).elements()]
    missing = [dict(k) for k in (w - g).elements()]
    lines = ["%d threads, want %d" % (len(got), len(want))]
    lines += ["  unexpected: %s" % show(t) for t in extra[:4]]
    lines += ["  missing:    %s" % show(t) for t in missing[:4]]
    if len(extra) > 4 or len(missing) > 4:
        lines.append("  (%d unexpected, %d missing in all)" % (len(extra), len(missing)))
    return "\n".join(lines)


def assert_trees(got, want, got_open, want_open, what="call trees differ"):
    assert same_trees({i: collections.Counter(t) for i, t in enumerate(got)}, want), \
        "%s: %s" % (what, tree_diff(got, want))
    assert sorted(got_open) == sorted(want_open), "open at the end: %s, want %s" % (
        sorted(got_open), sorted(want_open))


# ---- checkers: each takes a Result ----

def exact(want, want_open=()):
    """One process; every thread's tree exactly as listed; exactly these calls left open."""
    def check(r):
        assert len(r.sections) == 1, "%d process sections, want 1" % len(r.sections)
        assert_trees(r.trees(), want, r.open_calls(), list(want_open))
    return check


def exact_besides(want, leaf):
    """exact(want) once the calls of leaf (anywhere, with what they called) are taken out; there
    must have been some."""
    def check(r):
        assert len(r.sections) == 1, "%d process sections, want 1" % len(r.sections)
        trees, seen = [], 0
        for t in r.trees():
            keep = {}
            for path, n in t.items():
                if (";" + path + ";").find(";%s;" % leaf) >= 0:
                    seen += n if path.split(";")[-1] == leaf else 0
                else:
                    keep[path] = n
            trees.append(keep)
        assert seen > 0, "no call of %s in the tree" % leaf
        assert_trees(trees, want, r.open_calls(), [])
    return check


def plug_tree():
    """bdl_local.c: plug_run(i % 4) for i < 20, each with 5 throws through r^(d + 1)."""
    t = collections.Counter({"main": 1, "main;call_plug": 20, "main;call_plug;plug_run": 20})
    for i in range(20):
        for k in range(1, i % 4 + 2):
            t["main;call_plug;plug_run" + ";r" * k] += 5
    return dict(t)


def worker_tree(n, root="worker"):
    return {root: 1, root + ";work": 1, root + ";work;leaf": n}


def check_handlers(mode, kicker):
    """usr1/alarm: main's tree is main;m_MODE;loop(;spin_fn) with exactly 20 handler_work calls,
    each directly below a handler frame, wherever the handler interrupted main; handler frames
    hold nothing else. The kicker thread (usr1) has {kicker}."""
    root = "main;m_" + mode

    def check(r):
        assert len(r.sections) == 1, "%d process sections, want 1" % len(r.sections)
        trees = r.trees()
        mains = [t for t in trees if "main" in t]
        assert len(mains) == 1, "main thread's tree: %s" % [show(t) for t in mains]
        others = [t for t in trees if "main" not in t]
        want_others = [{"kicker": 1}] if kicker else []
        assert sorted(map(show, others)) == sorted(map(show, want_others)), \
            "other threads: %s, want %s" % ([show(t) for t in others], want_others)
        t = mains[0]
        handlers = work = 0
        base = collections.Counter()
        for path, n in t.items():
            parts = path.split(";")
            if "handler" in parts:
                i = parts.index("handler")
                tail = parts[i + 1:]
                assert tail in ([], ["handler_work"]), "below a handler: %s" % path
                handlers += n if not tail else 0
                work += n if tail else 0
                prefix = ";".join(parts[:i])
            else:
                assert "handler_work" not in parts, "handler_work outside a handler: %s" % path
                base[path] += n
                prefix = path
            assert prefix in ("main", root, root + ";loop", root + ";loop;spin_fn"), \
                "unexpected call path: %s" % path
        assert work == 20, "handler_work called %d times below handler, want 20 (%s)" % (
            work, show(t))
        if kicker:
            assert handlers == 20, "handler called %d times, want 20" % handlers
        else:
            assert handlers >= 20, "handler called %d times, want >= 20" % handlers
        assert base["main"] == 1 and base[root] == 1 and base[root + ";loop"] == 1, \
            "main's own tree: %s" % show(base)
        assert not r.open_calls(), "open at the end: %s" % r.open_calls()
    return check


HELD_CHILDREN, HELD_BURSTS = scaled(40), 5


def check_heldexit(r):
    """heldexit: the parent's tree exact; in each of the children's, child_run below the frames
    it inherited (main;m_heldexit), spin_fn below it, at least HELD_BURSTS burst frames (below
    child_run or spin_fn: wherever SIGALRM came) and exactly 300 handler_work per burst that
    worked, each directly below a burst. Every chunk of a child that exits right after a
    handler switched chunks is in the trace: no call is missing or misplaced."""
    assert not r.report_err, "ftrace-report: %s" % r.report_err.strip()
    parent = {"main": 1, "main;m_heldexit": 1}
    parents = [s for s in r.sections if parent in s.folded.values()]
    assert len(parents) == 1, "parent's tree %s not found" % parent
    assert not parents[0].open, "parent: open at the end: %s" % parents[0].open
    children = [s for s in r.sections if s is not parents[0]]
    assert len(children) == HELD_CHILDREN, "%d child sections, want %d" % (
        len(children), HELD_CHILDREN)
    run = "main;m_heldexit;child_run"
    for s in children:
        trees = list(s.folded.values())
        assert len(trees) == 1, "child %d: %d threads" % (s.pid, len(trees))
        t = trees[0]
        bursts = work = 0
        for path, n in t.items():
            if path in ("main", "main;m_heldexit", run, run + ";spin_fn"):
                continue
            if path in (run + ";burst", run + ";spin_fn;burst"):
                bursts += n
            elif path in (run + ";burst;handler_work", run + ";spin_fn;burst;handler_work"):
                work += n
            else:
                raise AssertionError("child %d: unexpected call path %s (%s)" % (
                    s.pid, path, show(t)))
        assert t.get(run) == 1 and bursts >= HELD_BURSTS and work == 300 * HELD_BURSTS, \
            "child %d: %d bursts, %d handler_work, want >= %d and %d: %s" % (
                s.pid, bursts, work, HELD_BURSTS, 300 * HELD_BURSTS, show(t))
        # it exits inside the frames it inherited
        assert list(s.open.values()) == [["main", "m_heldexit"]], \
            "child %d: open at the end: %s" % (s.pid, s.open)


def alt_tree(root):
    p = root + ";run_alt" if root == "alt_thread" else root + ";m_altstack;run_alt"
    t = {p: 1, p + ";deep": 3, p + ";deep;on_alt": 3, p + ";deep;on_alt;handler_work": 3,
         p + ";after": 1}
    if root == "alt_thread":
        t["alt_thread"] = 1
    else:
        t.update({"main": 1, "main;m_altstack": 1})
    return t


def jump_tree():
    return {"main": 1, "main;depth1": 3, "main;depth1;depth2": 3, "main;depth1;depth2;depth3": 3,
            "main;depth1;depth2;depth3;leaf": 3, "main;after_jump": 3, "main;after_jump;leaf": 6}


def exc_tree(chain, extra):
    """main -> chain[0] -> ... -> chain[-1] -> leaf, 3 rounds; extra: {path below main: n}."""
    t = {"main": 1, "main;after_catch": 3}
    path = "main"
    for f in chain:
        path += ";" + f
        t[path] = 3
    t[path + ";leaf"] = 3
    for k, n in extra.items():
        t["main;" + k] = n
    return t


def count_calls(tree):
    """name -> calls, wherever in the tree."""
    c = collections.Counter()
    for path, n in tree.items():
        c[path.split(";")[-1]] += n
    return c


def calls_exactly(want, closed=False):
    """One process, one thread, whose calls per function (wherever in its tree) are want; with
    closed, nothing left open at the end."""
    def check(r):
        assert len(r.sections) == 1, "%d process sections, want 1" % len(r.sections)
        trees = r.trees()
        assert len(trees) == 1, "threads: %s" % [show(t) for t in trees]
        c = count_calls(trees[0])
        assert dict(c) == want, "calls per function: %s, want %s" % (dict(c), want)
        assert not closed or not r.open_calls(), "open at the end: %s" % r.open_calls()
    return check


check_coro300 = calls_exactly({"main": 1, "run_coro": 1, "resume": 900, "co_body": 300,
                               "co_work": 600}, closed=True)


def one_well_formed_tree(r, paths, counts):
    """Well formed: the report matched every exit with its call and nothing is left open; one
    thread, whose call paths all match the regular expression paths; counts: {path: (least,
    most)} calls."""
    assert not r.report_err, "ftrace-report: %s" % r.report_err.strip()
    assert not r.open_calls(), "open at the end: %s" % r.open_calls()
    trees = r.trees()
    assert len(trees) == 1, "threads: %s" % [show(t) for t in trees]
    ok = re.compile(paths)
    bad = [p for p in trees[0] if not ok.match(p)]
    assert not bad and all(lo <= trees[0].get(p, 0) <= hi for p, (lo, hi) in counts.items()), \
        "tree: %s (unexpected %s)" % (show(trees[0]), bad[:5])


def check_jmpprof(r):
    """Only main;job(;mid(;leaf)), with on_prof anywhere below main; and the trace goes on to
    main's return (a record the jump abandoned half written, a hole in the thread's chunk, must
    not end what is written)."""
    one_well_formed_tree(r, r"^main(;job(;mid(;leaf)?)?)?(;on_prof)?$",
                         {"main": (1, 1), "main;job": (scaled(150), 10 ** 9)})


def check_jmpfill(r):
    """Only main;job(;mid(;leaf)), with on_jmpfill(;fill3) anywhere below main, every exit
    matched (a hook's record that the handler's chunk switch sent to the writer, which zeroed
    the chunk for reuse before the jump, still counts as written)."""
    one_well_formed_tree(r, r"^main(;job(;mid(;leaf)?)?)?(;on_jmpfill(;fill3)?)?$",
                         {"main": (1, 1), "main;job": (scaled(250), 10 ** 9)})


def check_sigswitch(r):
    """A signal handler's calls during coroutine switches: every switch's frames counted, the
    tree well formed, on_tick at most once per signal (those during a switch run untraced)."""
    assert not r.report_err, "ftrace-report: %s" % r.report_err.strip()
    assert not r.open_calls(), "open at the end: %s" % r.open_calls()
    c = collections.Counter()
    for t in r.trees():
        for p, n in t.items():
            c[p.split(";")[-1]] += n
    want = {"main": 1, "sw_ping": scaled(20000), "co_pong": scaled(20000), "sw_body": 1}
    assert all(c[f] == n for f, n in want.items()), "counts: %s" % dict(c)
    assert c["on_tick"] == c["tick_work"] and c["on_tick"] > 0, "handler calls: %s" % dict(c)


def check_fillchunk(r):
    """Only main;job2(;leaf2), with on_fill(;slow2) anywhere below main."""
    one_well_formed_tree(r, r"^main(;job2(;leaf2)?)?(;on_fill(;slow2(;now_ns)?)?)?$",
                         {"main": (1, 1), "main;job2": (1, 1)})


def check_migrate(r):
    assert not r.report_err, "ftrace-report: %s" % r.report_err.strip()
    c = collections.Counter()
    for t in r.trees():
        c.update(count_calls(t))
    assert c["main"] == 1 and c["worker"] == 5 and c["fiber"] == 1 and c["step"] == 4, \
        "calls: %s" % dict(c)


def check_cancel_random(r):
    assert not r.report_err, "ftrace-report: %s" % r.report_err.strip()
    trees = r.trees()
    assert {"main": 1} in trees and len(trees) == 31, "threads: %d" % len(trees)
    ok = {"rspin", "rspin;rmid", "rspin;rmid;rleaf", "rspin;rclean"}
    for t in trees:
        if t == {"main": 1}:
            continue
        assert set(t) <= ok and t["rspin"] == 1 and t.get("rspin;rclean", 0) <= 1, \
            "thread tree: %s" % show(t)
    assert not r.open_calls(), "open at the end: %s" % r.open_calls()


def check_migback(r):
    assert not r.report_err, "ftrace-report: %s" % r.report_err.strip()
    c = collections.Counter()
    for t in r.trees():
        c.update(count_calls(t))
    assert c["main"] == 1 and c["mb_body"] == 1 and c["mb_f1"] == 1 and c["mb_f2"] == 1 and \
        c["mb_thread"] == 1, "calls: %s" % dict(c)


def check_exit3(r):
    info = r.view()
    assert "exited with status 3" in info, "--info: %s" % info


def check_firsthook(r):
    """main's tree, and two workers whose only calls are SIGUSR1 handlers (their first traced
    calls, made while the interrupted code allocated)."""
    assert len(r.sections) == 1, "%d process sections, want 1" % len(r.sections)
    trees = r.trees()
    main = {"main": 1, "main;run_firsthook": 1}
    assert main in trees, "no thread with %s: %s" % (show(main), [show(t) for t in trees])
    workers = [t for t in trees if t != main]
    assert len(workers) == 2, "threads: %s" % [show(t) for t in trees]
    for t in workers:
        n = t.get("on_usr1", 0)
        assert n > 0 and t == {"on_usr1": n, "on_usr1;tick": n}, "worker: %s" % show(t)
    assert not r.open_calls(), "open at the end: %s" % r.open_calls()


def check_deep(r):
    """The graph (to depth 64) is one chain deep_thread;recurse;... with each level once; the
    summary counts every level (more than 1000) and --info says the rest was too deep."""
    assert len(r.sections) == 1, "%d process sections, want 1" % len(r.sections)
    trees = r.trees()
    assert {"main": 1} in trees and len(trees) == 2, "threads: %s" % [show(t) for t in trees]
    t = [t for t in trees if t != {"main": 1}][0]
    levels = sorted(len(p.split(";")) for p in t)
    assert all(n == 1 for n in t.values()) and levels == list(range(1, 65)) and all(
        p == ";".join(["deep_thread"] + ["recurse"] * (len(p.split(";")) - 1)) for p in t), \
        "deep thread's tree is not one chain deep_thread;recurse;...: %s" % show(t)
    assert not r.open_calls(), "open at the end: %d frames" % sum(map(len, r.open_calls()))
    calls = summary_calls(r.view("--summary"))
    assert calls.get("main") == 1 and calls.get("deep_thread") == 1 and \
        calls.get("recurse", 0) > 1000 and len(calls) == 3, "summary: %s" % calls
    info = r.view()
    m = re.search(r"\((\d+) calls\), 0 lost \(0 calls\), (\d+) calls not traced "
                  r"\(stack too deep\)", info)
    # --info counts the library calls too (traced, left out of the trees): at least as many
    libcalls = sum(summary_calls(r.view("--summary", libcalls=True)).values()) - sum(calls.values())
    assert m and int(m.group(1)) == calls["recurse"] + 2 + libcalls and \
        int(m.group(2)) >= 100001 - calls["recurse"], "info: %s (%d library calls)" % (
            re.findall(r"events .*", info), libcalls)


def check_file(name, content):
    """A file the program wrote in its working directory holds exactly content."""
    def check(r):
        with open(os.path.join(r.cwd, name), "rb") as f:
            data = f.read()
        assert data == content.encode(), "%s: %d bytes, want %d; first difference at %d" % (
            name, len(data), len(content),
            next((i for i, (a, b) in enumerate(zip(data, content.encode())) if a != b),
                 min(len(data), len(content))))
    return check


def all_of(*checks):
    def check(r):
        for c in checks:
            c(r)
    return check


CLOSEFDS_TEXT = "".join("closefds round %d fd 3\n" % i for i in range(40))
DUP2_TEXT = "".join("dup2 round %d fd %d\n" % (r, fd) for r in range(20) for fd in range(3, 21))


def summary_calls(text):
    """function -> calls, from ftrace-report --summary."""
    got = {}
    # a duration is "608.205 ms" or, from a second on, "1.081  s" (the unit padded to two)
    row = re.compile(r"^\s*(?:\S+ +\S+|-)\s+(?:\S+ +\S+|-)\s+(\d+)\s.*\s(\S+)$")
    for line in text.splitlines():
        m = row.match(line)
        if m and not line.startswith("#"):
            got[m.group(2)] = int(m.group(1))
    return got


def gen_tree(n):
    """bcoro gen: generator i runs inside resume_gen(i) (progs/bcoro.c)."""
    t = {"main": 1}
    for i in range(n):
        a = "main;resume_gen" + ";start;gen_body;resume_gen" * i
        t[a] = 1
        t[a + ";post"] = 1
        for f in ("start", "start;gen_body", "start;gen_body;work", "start;gen_body;yield_val"):
            t[a + ";" + f] = 1
    return t


def summary_exactly(want):
    """ftrace-report --summary counts these calls per function (a coroutine's call once)."""
    def check(r):
        got = summary_calls(r.view("--summary"))
        assert got == want, "--summary calls: %s, want %s" % (got, want)
    return check


check_coro = all_of(
    exact([{"main": 1, "main;pinger": 1, "main;pinger;ping_work": 100,
            "main;pinger;coro_body": 1, "main;pinger;coro_body;pong_work": 100}]),
    summary_exactly({"main": 1, "pinger": 1, "ping_work": 100, "coro_body": 1,
                     "pong_work": 100}))
def check_forkret(r):
    """The parent's and the child's trees exact; the child's main and forker2 are the frames it
    inherited, which --summary does not count as its calls."""
    trees = sorted((list(s.folded.values()) for s in r.sections), key=len)
    want = [[{"main": 1, "main;forker2": 1}],
            [{"main": 1, "main;forker2": 1, "main;forker2;child_work": 2}]]
    got = sorted(trees, key=lambda t: sum(sum(x.values()) for x in t))
    assert got == want, "trees: %s, want %s" % (got, want)
    calls = summary_calls(r.view("--summary"))
    assert calls == {"main": 1, "forker2": 1, "child_work": 2}, "--summary calls: %s" % calls


def check_fork(r):
    """Two process sections: the parent's tree exact; the child's holds child_main ->
    child_work x 3 (below whatever it inherited), and nothing of the parent's later calls."""
    assert len(r.sections) >= 2, "%d process sections, want one per process (2)" % len(
        r.sections)
    parent_tree = {"main": 1, "main;forker": 1, "main;parent_work": 2}
    parents = [s for s in r.sections if parent_tree in s.folded.values()]
    assert len(parents) == 1, "parent's tree %s not found: %s" % (
        parent_tree, [[show(t) for t in s.folded.values()] for s in r.sections])
    assert not parents[0].open, "parent: open at the end: %s" % parents[0].open
    children = [s for s in r.sections if s is not parents[0]]
    ok = []
    for s in children:
        for t in s.folded.values():
            work = {p: n for p, n in t.items() if p.endswith("child_work")}
            if (sum(work.values()) == 3 and all(p.endswith("child_main;child_work") for p in work)
                    and count_calls(t)["child_main"] == 1 and "parent_work" not in count_calls(t)):
                ok.append(s)
    assert len(ok) == 1, "child's tree (child_main -> child_work x 3) not found: %s" % (
        [[show(t) for t in s.folded.values()] for s in children])
    assert ok[0].pid != parents[0].pid, "parent and child sections have the same pid"
    # the child's tree nests under the frames it inherited, which --summary never counts as
    # its calls: main and forker once each (the parent's)
    calls = summary_calls(r.view("--summary"))
    assert calls.get("main") == 1 and calls.get("forker") == 1 and calls.get("child_work") == 3, \
        "--summary calls: %s" % calls


MALLOC_PARENT = {"main": 1, "main;malloc": 5, "main;calloc": 2, "main;realloc": 3,
                 "main;free": 4, "main;counts": 2, "main;forker": 1, "main;parent_report": 1}
MALLOC_CHILD = {"main": 1, "main;forker": 1, "main;forker;child_main": 1}
MALLOC_CHILD.update(("main;forker;child_main;" + f, n) for f, n in (
    ("malloc", 3), ("calloc", 1), ("realloc", 2), ("posix_memalign", 1), ("free", 2),
    ("counts", 1)))


def check_churn(r):
    """5000 short threads (scaled): every call of each in the trace, nothing lost (--info's
    events line says 0 lost), and one tree per thread."""
    n = scaled(50) * 100
    trees = r.trees()
    main = [t for t in trees if "main" in t]
    assert main == [{"main": 1, "main;churn": 1}], "main thread: %s" % [show(t) for t in main]
    want = {"worker": 1, "worker;work": 1, "worker;work;leaf": 100}
    bad = [t for t in trees if "main" not in t and t != want]
    assert len(trees) - len(main) == n and not bad, "%d worker trees of %d, %d differ: %s" % (
        len(trees) - len(main), n, len(bad), [show(t) for t in bad[:3]])
    m = re.search(r"events +\d+ recorded \(\d+ calls\), (\d+) lost", r.view("--info"))
    assert m and m.group(1) == "0", "--info: %s" % (m.group(0) if m else "no events line")


def check_names(r):
    """A sandbox that forbids prctl(PR_GET_NAME): the process lives, every call is traced, and
    each thread has the name the program gave it last (--info's thread lines)."""
    trees = r.trees()
    want = {"worker": 1, "worker;work": 1, "worker;work;leaf": 3000}
    assert sorted(map(show, trees)) == sorted(
        [show({"main": 1, "main;names": 1}), show(want), show(want)]), [show(t) for t in trees]
    names = re.findall(r"^    \d+ +(\S+) +\d+ chunks? of events", r.view("--info"), re.M)
    assert sorted(names) == ["bthreads", "renamed-b", "self-2"], "thread names: %s" % names


def check_own_malloc(r):
    """A program with its own allocator: below main (and the child's child_main) exactly the
    program's own calls; outside main, in the parent, only what gprof's start-up and exit code
    calls in a -pg build (one calloc before main, one free after), nothing else: not the calloc
    of the TLS vector that glibc's pthread_create makes with the program's allocator for the
    tracer's own threads. The counts from main on, on stdout, hold no call of anyone else (the
    tracer, libelf, libzstd)."""
    gmon = "-pg" in FLAGSETS[r.facts][1].split()
    assert len(r.sections) == 2, "%d process sections, want 2: %s" % (
        len(r.sections), [[show(t) for t in s.folded.values()] for s in r.sections])
    for s, want, want_open in ((r.sections[0], MALLOC_PARENT, []),
                               (r.sections[1], MALLOC_CHILD, [["main", "forker", "child_main"]])):
        trees = list(s.folded.values())
        assert len(trees) == 1, "pid %d: %d threads with calls: %s" % (
            s.pid, len(trees), [show(t) for t in trees])
        own = {p: n for p, n in trees[0].items() if p.split(";")[0] == "main"}
        outside = {p: n for p, n in trees[0].items() if p not in own}
        want_out = {"calloc": 1, "free": 1} if gmon and s is r.sections[0] else {}
        assert outside == want_out, "pid %d: outside main: %s, want %s" % (
            s.pid, outside, want_out)
        assert_trees([own], [want], list(s.open.values()), want_open,
                     "pid %d: call trees differ" % s.pid)


def check_own_getpid(r):
    """Both processes' trees exact: the program's getpid and getppid only below its own ask()
    (stdout, compared with the untraced run, has the counts)."""
    assert len(r.sections) == 2, "%d process sections, want 2" % len(r.sections)
    ask = {"ask": 1, "ask;getpid": 1, "ask;getppid": 1}
    parent = {"main": 1, "main;forker": 1}
    parent.update(("main;" + p, 2 * n) for p, n in ask.items())
    child = {"main": 1, "main;forker": 1, "main;forker;child_main": 1}
    child.update(("main;forker;child_main;" + p, n) for p, n in ask.items())
    assert_trees(r.trees(), [parent, child], [st for s in r.sections for st in s.open.values()],
                 [["main", "forker", "child_main"]])


def check_parent_only(r):
    """vfork/spawn/system: the parent's section holds exactly its tree; other sections (traced
    children) are not checked."""
    want = {"main": 1, "main;spawner": 1, "main;after": 1}
    parents = [s for s in r.sections if any("main;spawner" in t for t in s.folded.values())]
    assert len(parents) == 1, "%d sections with main;spawner: %s" % (
        len(parents), [[show(t) for t in s.folded.values()] for s in r.sections])
    p = parents[0]
    assert_trees(list(p.folded.values()), [want], list(p.open.values()), [])


def check_daemon(r):
    """The parent's section (it ended inside daemon()) and the daemon's."""
    parents = [s for s in r.sections if any(t == {"main": 1, "main;parent_work": 2}
                                            for t in s.folded.values())]
    assert len(parents) == 1, "no parent section with main;parent_work x 2: %s" % (
        [[show(t) for t in s.folded.values()] for s in r.sections])
    daemons = [s for s in r.sections if any(
        sum(n for k, n in t.items() if k.endswith("child_work")) == 3 for t in s.folded.values())]
    assert len(daemons) == 1, "no daemon section with child_work x 3: %s" % (
        [[show(t) for t in s.folded.values()] for s in r.sections])
    # the daemon's parent is the process that forked it (it had exited by the time the daemon
    # could ask getppid(): init's pid then)
    parent = r.parents().get(daemons[0].pid)
    assert parent == (parents[0].pid, True), "daemon %d: parent %s, want %d in this trace" % (
        daemons[0].pid, parent, parents[0].pid)


def check_exec(r):
    """Two sections (one per image, same pid): the first image's tree (main and before_exec
    may stay open), the new image's tree exact."""
    first = {"main": 1, "main;before_exec": 1, "main;before_exec;child_image_work": 1}
    second = {"main": 1, "main;exec_child_work": 3}
    assert len(r.sections) == 2, "%d process sections, want 2 (one per image): %s" % (
        len(r.sections), [[show(t) for t in s.folded.values()] for s in r.sections])
    trees = [list(s.folded.values()) for s in r.sections]
    assert trees[0] == [first], "first image: %s, want %s" % ([show(t) for t in trees[0]], first)
    assert list(r.sections[0].open.values()) in ([], [["main", "before_exec"]]), \
        "first image: open at the end: %s" % list(r.sections[0].open.values())
    assert trees[1] == [second], "new image: %s, want %s" % (
        [show(t) for t in trees[1]], second)
    assert not r.sections[1].open, "new image: open at the end: %s" % r.sections[1].open


def check_many(r):
    """A shell-like parent of 200 children: exactly one section per process that recorded (the
    parent, the 50 exec'd instrumented images, the 50 fork children that recorded), none for
    /bin/true, for the fork children that recorded nothing or for the one that slept 300 ms
    doing nothing; every tree exact."""
    kinds = collections.defaultdict(list)
    with open(os.path.join(r.cwd, "bp_many.txt")) as f:
        for line in f:
            kind, pid = line.split()
            kinds[kind].append(int(pid))
    assert [len(kinds[k]) for k in ("parent", "true", "image", "fork", "quiet")] == \
        [1] + [scaled(50)] * 3 + [scaled(50) + 1], "bp_many.txt: %s" % {
            k: len(v) for k, v in kinds.items()}
    by_pid = collections.defaultdict(list)
    for s in r.sections:
        by_pid[s.pid].append(s)
    want = set(kinds["parent"] + kinds["image"] + kinds["fork"])
    assert set(by_pid) == want and len(r.sections) == len(want), \
        "sections for %d pids (%d sections), want %d; unexpected: %s, missing: %s" % (
            len(by_pid), len(r.sections), len(want),
            [(p, [k for k in kinds if p in kinds[k]]) for p in sorted(set(by_pid) - want)][:5],
            [(p, [k for k in kinds if p in kinds[k]]) for p in sorted(want - set(by_pid))][:5])
    parent = by_pid[kinds["parent"][0]][0]
    assert_trees(list(parent.folded.values()), [{
        "main": 1, "main;quiet_child": 1, "main;spawn_many": 1,
        "main;spawn_many;spawn_one": scaled(200)}],
        list(parent.open.values()), [], "parent")
    for pid in kinds["image"]:
        s = by_pid[pid][0]
        assert_trees(list(s.folded.values()), [{"main": 1, "main;image_work": 1}],
                     list(s.open.values()), [], "exec'd image %d" % pid)
    path = "main;spawn_many;spawn_one"
    for pid in kinds["fork"]:
        s = by_pid[pid][0]
        assert_trees(list(s.folded.values()), [{"main": 1, "main;spawn_many": 1, path: 1,
                                                path + ";fork_work": 1}],
                     list(s.open.values()), [["main", "spawn_many", "spawn_one"]],
                     "fork child %d" % pid)


def nm_has(symbol):
    def verify(exe, opt, _flagset):
        out = subprocess.run(["nm", "-D", exe], capture_output=True, text=True).stdout
        assert re.search(r"\b%s\b" % re.escape(symbol), out), \
            "%s does not import %s: the case does not test it" % (os.path.basename(exe), symbol)
    return verify


def tail_calls(exe, opt, _flagset):
    """At -O2: first() must end in jmp <other>, chain() in jmp <first>."""
    if opt != "O2":
        return
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", exe], capture_output=True,
                         text=True).stdout
    for fn, callee in (("first", "other"), ("chain", "first")):
        m = re.search(r"^[0-9a-f]+ <%s>:\n(.*?)\n\n" % fn, out, re.S | re.M)
        assert m, "no %s in the disassembly" % fn
        assert re.search(r"\bjmp\s+[0-9a-f]+ <%s>" % callee, m.group(1)), \
            "%s() does not tail-call %s() (no jmp): the case does not test tail calls" % (
                fn, callee)


def check_untraced_note(r):
    """sigblock: the run may be untraced: at most one more stderr line, from ftrace-run."""
    extra = r.traced.stderr.splitlines()[len(r.base.stderr.splitlines()):]
    assert r.traced.stderr.startswith(r.base.stderr) and len(extra) <= 1 and all(
        l.startswith("ftrace-run: ") for l in extra), "stderr: %r, untraced %r" % (
        r.traced.stderr, r.base.stderr)


STARTUP_LIB = (("libbstartup.c", "bstartup", ""),)
HOSTILE_LIB = (("libbhostile.c", "bhostile", ""),)
STATIC_CXX = "-static-libgcc -static-libstdc++"
BJIT_LIB = (("libbjit.c", "bjit", ""),)
CANCEL_PATH = "worker;c1;c2;c3"
CANCEL_BASE = {"worker": 1, "worker;c1": 1, "worker;c1;c2": 1, CANCEL_PATH: 1,
               CANCEL_PATH + ";leaf": 1, CANCEL_PATH + ";wait_cancel": 1}
# each cleanup handler or destructor runs in its own frame
CANCEL_TREE = dict(CANCEL_BASE, **{CANCEL_PATH + ";cleanup": 1, "worker;c1;c2;cleanup": 1,
                                   "worker;c1;cleanup": 1})
TALKER = {"talker": 1, "talker;work": 3, "talker;work;leaf": 6}


def check_walk(r):
    """threads-walk: main walked; each of the three waiters took its signal in checkin"""
    assert len(r.sections) == 1, "%d process sections, want 1" % len(r.sections)
    trees = r.trees()
    assert any(t.get("main;walk") == 1 for t in trees), trees
    took = sum(1 for t in trees if any(p.endswith("checkin") for p in t))
    assert took == 3, "%d threads ran checkin, want 3: %r" % (took, trees)


def check_walkexit(r):
    """threads-walkexit: the walker walked (its output, compared with the untraced run's, says
    that every thread checked in, the tracer's included)"""
    trees = r.trees()
    assert any(t.get("walker;walk_all") == 1 for t in trees), trees


def renamed(check, pattern, name):
    """check on trees whose function names matching pattern are replaced by name."""
    def fix(path):
        return ";".join(name if re.fullmatch(pattern, f) else f for f in path.split(";"))

    def wrapped(r):
        sections = [Section(s.header, s.pid,
                            {tid: collections.Counter({fix(p): n for p, n in t.items()})
                             for tid, t in s.folded.items()},
                            {tid: [fix(f) for f in st] for tid, st in s.open.items()})
                    for s in r.sections]
        check(Result(r.base, r.traced, sections, r.cwd, r._info, r.facts))
    return wrapped


def nested_sites(exe, opt, _flagset):
    """The nested function's site must be wrapped in push %r10 / pop %r10 (at its start with
    -mfentry, after the prologue with -pg), or be -fpatchable-function-entry's nops."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", exe], capture_output=True,
                         text=True).stdout
    m = re.search(r"^[0-9a-f]+ <by_key\.\d+>:\n(.*?)\n\n", out, re.S | re.M)
    assert m, "no nested function by_key.N in the disassembly"
    insns = [l.split("\t")[-1].split() for l in m.group(1).splitlines() if "\t" in l]
    insns = [i for i in insns if i and i[0] != "endbr64"][:10]
    wrapped = any(insns[k] == ["push", "%r10"] and insns[k + 1][0] in ("call", "nopl") and
                  insns[k + 2] == ["pop", "%r10"] for k in range(len(insns) - 2))
    assert wrapped or insns[:5] == [["nop"]] * 5, \
        "by_key's site is not wrapped in push %%r10 / pop %%r10: %s" % insns


def has_tree(want):
    """One process, one of whose threads has exactly this tree."""
    def check(r):
        assert len(r.sections) == 1, "%d process sections, want 1" % len(r.sections)
        assert any(t == want for t in r.trees()), "no thread with %s: %s" % (
            show(want), [show(t) for t in r.trees()])
    return check

NEEDED_LIB = (("libbneeded.c", "bneeded", ""),)
DL_LIBS = (("libbdl.c", "bdla", "-DTAG=a"), ("libbdl.c", "bdlb", "-DTAG=b"))
ORIGIN_LIBS = tuple(("libbdlo.c", name, flags) for name, flags in (
    ("sub/bdlo_val", "-DVAL=1"), ("sub/bdlo_bare", "-DVAL=3"), ("sub/bdlo_lib", "-DVAL=5"),
    ("other/sub/bdlo_val", "-DVAL=2"), ("other/sub/bdlo_lib", "-DVAL=4"),
    ("other/bdlo_mid", "-DMID -Wl,--enable-new-dtags,-rpath,'$ORIGIN/sub'")))

CASES = {
    # 1. threads
    "threads-many": Case("bthreads.c", ["many"], exact(
        [{"main": 1, "main;many": 1}] + [worker_tree((i % 7 + 1) * 3) for i in range(50)])),
    "threads-churn": Case("bthreads.c", ["churn"], check_churn),
    "threads-names": Case("bthreads.c", ["names"], check_names, env={"FTRACE_BUFSIZE": "4"}),
    # the tracer's own threads answer a thread walker's signals (the output says so)
    "threads-walk": Case("bthreads.c", ["walk"], check_walk),
    # ... and so does the one that watches for the end after main's pthread_exit()
    "threads-walkexit": Case("bthreads.c", ["walkexit"], check_walkexit),
    # ... and the parked server of a fork child that records nothing
    "threads-forkwalk": Case("bthreads.c", ["forkwalk"], exact([{"main": 1}]),
                             env={"FTRACE_FILTER": "main", "FTRACE_LIBCALL": "0"}),
    "threads-detached": Case("bthreads.c", ["detached"], exact(
        [{"main": 1, "main;detached": 1}] + [worker_tree(5)] * 20)),
    "threads-exit": Case("bthreads.c", ["exit"], exact(
        [{"main": 1, "main;texit": 1, "main;texit;after_join": 1},
         {"exiter": 1, "exiter;nest1": 1, "exiter;nest1;nest2": 1, "exiter;nest1;nest2;leaf": 1,
          "exiter;nest1;cleanup_fn": 1}])),
    # a thread blocking every signal during start-up: traced all the same (nobody is parked)
    "threads-sigblock": Case("bstartup.c", ["sigblock"], has_tree(
        {"main": 1, "main;work": 1, "main;work;leaf": 10}), needed=STARTUP_LIB),
    # the main thread ends first: the process ends with the last thread, exit handlers run
    "threads-mainexit": Case("bthreads.c", ["mainexit"], exact(
        [{"main": 1, "main;mainexit": 1}, TALKER])),
    "threads-sysexit": Case("bthreads.c", ["sysexit"], exact(
        [{"main": 1, "main;sysexit": 1}, TALKER], [["main", "sysexit"]])),
    # ... in a process run under nice 5
    "threads-mainexit-nice": Case("bthreads.c", ["mainexit", "nice"], exact(
        [{"main": 1, "main;mainexit": 1}, TALKER])),
    "threads-sysexit-nice": Case("bthreads.c", ["sysexit", "nice"], exact(
        [{"main": 1, "main;sysexit": 1}, TALKER], [["main", "sysexit"]])),
    # ... while a fork child connects to the control socket every 20 ms
    "threads-pokedexit": Case("bthreads.c", ["pokedexit"], exact(
        [{"main": 1, "main;pokedexit": 1, "main;pokedexit;sysexit": 1}, TALKER],
        [["main", "pokedexit", "sysexit"]])),
    # ... while the thread left closes descriptors 3 to 15 over and over
    "threads-closerexit": Case("bthreads.c", ["closerexit"], exact(
        [{"main": 1, "main;closerexit": 1},
         {"closer": 1, "closer;talker": 1, "closer;talker;work": 3,
          "closer;talker;work;leaf": 6}])),
    # ... chrooted first, where there is no /proc (and main's pthread_exit() alike)
    "threads-mainexit-chroot": Case("bthreads.c", ["mainexit", "chroot"], exact(
        [{"main": 1, "main;mainexit": 1}, TALKER])),
    "threads-sysexit-chroot": Case("bthreads.c", ["sysexit", "chroot"], exact(
        [{"main": 1, "main;sysexit": 1}, TALKER], [["main", "sysexit"]])),
    "threads-blocked": Case("bstartup.c", ["blocked"], exact(
        [{"main": 1, "main;work": 1, "main;work;leaf": 10}, {"rd_done": 1}, {"sl_done": 1}]),
        needed=STARTUP_LIB),
    # 2. signals
    "signals-usr1": Case("bsignals.c", ["usr1"], check_handlers("usr1", True)),
    "signals-alarm": Case("bsignals.c", ["alarm"], check_handlers("alarm", False)),
    # a chunk held for a record a handler interrupted, when the process exits right after
    # a caller that keeps values in registers System V lets a callee clobber (a caller of a
    # no_caller_saved_registers, ms_abi or preserve_most function): the traced return gives
    # them back (stdout says which changed)
    "calls-keepregs": Case("bregs.c", [], exact([{
        "main": 1, "main;check_regs": 3, "main;check_regs;call_keeping": 3,
        "main;check_regs;call_keeping;keep_all": 3}]), cflags="-mno-red-zone",
        compilers=("gcc",)),
    "signals-heldexit": Case("bsignals.c", ["heldexit"], check_heldexit,
                             env={"FTRACE_BUFSIZE": "4"}),
    "signals-altstack": Case("bsignals.c", ["altstack"], exact(
        [alt_tree("main"), alt_tree("alt_thread")])),
    "signals-siglongjmp": Case("bsignals.c", ["siglongjmp"], exact([{
        "main": 1, "main;level1": 3, "main;level1;level2": 3, "main;level1;level2;jump_handler": 3,
        "main;level1;level2;jump_handler;handler_work": 3, "main;after_jump": 3}])),
    "signals-segv": Case("bsignals.c", ["segv"], exact([{
        "main": 1, "main;fault1": 2, "main;fault1;bad_access": 2,
        "main;fault1;bad_access;segv_handler": 2,
        "main;fault1;bad_access;segv_handler;handler_work": 2, "main;after_jump": 2}])),
    # 3. non-local exits
    # the tracer's set-up of a thread inside a handler that interrupted malloc (no lock, no
    # allocation); coroutines suspended by hundreds; siglongjmp out of a sigaltstack handler
    "hostile-firsthook": Case("bhostile.c", ["firsthook"], check_firsthook, needed=HOSTILE_LIB),
    "hostile-coro300": Case("bhostile.c", ["coro300"], check_coro300, needed=HOSTILE_LIB),
    # a coroutine resumed on another thread; the program's key destructors; exit() from an exit
    # handler registered before main
    # a SIGPROF handler's siglongjmp out of traced code, landing inside the hooks too
    "hostile-jmpprof": Case("bhostile.c", ["jmpprof", "alarm"], check_jmpprof,
                            needed=HOSTILE_LIB),
    # ... with the slow clock (a system call in every hook: the signals land inside them)
    "hostile-jmpprof-mono": Case("bhostile.c", ["jmpprof", "alarm"], check_jmpprof,
                                 needed=HOSTILE_LIB, env={"FTRACE_CLOCK": "mono"}),
    # ... with --threshold, whose exits take short calls' entries back: a jump out of one taking
    # an entry back (the TSC: short hooks, so the signals often land there) must not close it
    "hostile-jmpprof-threshold": Case("bhostile.c", ["jmpprof", "alarm"], check_jmpprof,
                                      needed=HOSTILE_LIB,
                                      env={"FTRACE_THRESHOLD": "30us", "FTRACE_CLOCK": "tsc"}),
    # ... a handler that fills (4 KiB) chunks, which the writer writes and zeroes, before its
    # jump: a hook's ENTRY or EXIT written before the signal landed still counts as written
    "hostile-jmpfill": Case("bhostile.c", ["jmpfill"], check_jmpfill, needed=HOSTILE_LIB,
                            env={"FTRACE_BUFSIZE": "4"}),
    "hostile-jmpfill-mono": Case("bhostile.c", ["jmpfill"], check_jmpfill, needed=HOSTILE_LIB,
                                 env={"FTRACE_BUFSIZE": "4", "FTRACE_CLOCK": "mono"}),
    # a signal handler's traced calls landing while a coroutine switch moves the shadow entries
    "hostile-sigswitch": Case("bhostile.c", ["sigswitch"], check_sigswitch, needed=HOSTILE_LIB),
    # ... a handler that fills a (4 KiB) chunk while a take-back is under way: the chunk must
    # not go to the writer (which takes a full chunk whole) nor be recycled before it settles
    "hostile-fillchunk": Case("bhostile.c", ["fillchunk"], check_fillchunk, needed=HOSTILE_LIB,
                              env={"FTRACE_BUFSIZE": "4", "FTRACE_THRESHOLD": "1us",
                                   "FTRACE_CLOCK": "tsc"}),
    "hostile-migrate": Case("bhostile.c", ["migrate"], check_migrate, needed=HOSTILE_LIB),
    # ... and back on the thread that first ran it (its entries there are stale by then)
    "hostile-migback": Case("bhostile.c", ["migback"], check_migback, needed=HOSTILE_LIB),
    "hostile-keydtor": Case("bhostile.c", ["keydtor"], exact(
        [{"main": 1}, {"kthread": 1, "kdtor": 1, "kdtor;kwork": 1}]), needed=HOSTILE_LIB),
    "hostile-exit3": Case("bhostile.c", ["exit3"], check_exit3, needed=HOSTILE_LIB),
    "hostile-altjmp": Case("bhostile.c", ["altjmp"], exact([{
        "main": 1, "main;trigger": scaled(10000), "main;trigger;on_alt": scaled(10000),
        "main;trigger;on_alt;alt_work": scaled(10000), "main;final": 1}]), needed=HOSTILE_LIB),
    "signals-smallalt": Case("bsignals.c", ["smallalt"], exact(
        [{"main": 1}, {"small_work": 1, "small_work;handler_work": 5}])),
    "jmp-longjmp": Case("bjmp.c", ["longjmp"], exact([jump_tree()])),
    "jmp-siglongjmp": Case("bjmp.c", ["siglongjmp"], exact([jump_tree()])),
    "jmp-longjmp-chk": Case("bjmp.c", ["longjmp"], exact([jump_tree()]),
                            cflags="-D_FORTIFY_SOURCE=2", variant="fortify", opts=("O2",),
                            verify=nm_has("__longjmp_chk")),
    "jmp-siglongjmp-chk": Case("bjmp.c", ["siglongjmp"], exact([jump_tree()]),
                               cflags="-D_FORTIFY_SOURCE=2", variant="fortify", opts=("O2",),
                               verify=nm_has("__longjmp_chk")),
    "exc-throw": Case("bexc.cpp", ["throw"], exact([exc_tree(["d1", "d2", "d3"], {})])),
    "exc-rethrow": Case("bexc.cpp", ["rethrow"], exact(
        [exc_tree(["r_outer", "r_mid", "r_inner"], {"r_outer;r_mid;r_handle": 3})])),
    "exc-raii": Case("bexc.cpp", ["raii"], exact(
        [exc_tree(["g_outer", "g_mid", "g_thrower"],
                  {"g_outer;g_mid;cleanup": 3, "g_outer;cleanup": 3})])),
    "exc-terminate": Case("bexc.cpp", ["terminate"], exact(
        [{"main": 1, "main;t1": 1, "main;t1;t2": 1, "main;t1;t2;leaf": 1}],
        [["main", "t1", "t2"]])),
    "exc-nested": Case("bexc.cpp", ["nested"], exact([exc_tree(["n1", "n2", "n3"], {
        "n1;n2;dtor_work": 3, "n1;n2;dtor_work;dtor_inner": 3,
        "n1;n2;dtor_work;inner_caught": 3})])),
    # the program's own unwinder and C++ runtime: no wrapper of ours sees its throws and catches
    "exc-static-throw": Case("bexc.cpp", ["throw"], exact([exc_tree(["d1", "d2", "d3"], {})]),
                             cflags=STATIC_CXX, variant="static"),
    "exc-static-rethrow": Case("bexc.cpp", ["rethrow"], exact(
        [exc_tree(["r_outer", "r_mid", "r_inner"], {"r_outer;r_mid;r_handle": 3})]),
        cflags=STATIC_CXX, variant="static"),
    "exc-static-raii": Case("bexc.cpp", ["raii"], exact(
        [exc_tree(["g_outer", "g_mid", "g_thrower"],
                  {"g_outer;g_mid;cleanup": 3, "g_outer;cleanup": 3})]),
        cflags=STATIC_CXX, variant="static"),
    "exc-static-nested": Case("bexc.cpp", ["nested"], exact([exc_tree(["n1", "n2", "n3"], {
        "n1;n2;dtor_work": 3, "n1;n2;dtor_work;dtor_inner": 3,
        "n1;n2;dtor_work;inner_caught": 3})]), cflags=STATIC_CXX, variant="static"),
    # exceptions while someone else answers libgcc's FDE lookups and forwards the rest with
    # dlsym(RTLD_NEXT): the program itself, and a library describing code it generated
    "exc-fde-self": Case("bexc_fde.cpp", ["self"], exact_besides([{
        "main": 1, "main;mid": 50, "main;mid;thrower": 50}], "_Unwind_Find_FDE"),
        needed=BJIT_LIB),
    "exc-fde-jit": Case("bexc_fde.cpp", ["jit"], exact_besides([{
        "main": 1, "main;run": 50, "main;run;thrower": 50}], "_Unwind_Find_FDE"),
        needed=BJIT_LIB),
    # backtrace() from 4 traced frames deep, and from a signal handler there
    "unwind-backtrace": Case("bunwind.c", ["bt"], exact([{
        "main": 1, "main;f1": 1, "main;f1;f2": 1, "main;f1;f2;f3": 1, "main;f1;f2;f3;show": 1,
        "main;f1;f2;f3;show;after": 1}]), cflags="-rdynamic", variant="rdynamic"),
    "unwind-backtrace-signal": Case("bunwind.c", ["signal"], exact([{
        "main": 1, "main;f1": 1, "main;f1;f2": 1, "main;f1;f2;f3": 1,
        "main;f1;f2;f3;on_usr1": 1}]), cflags="-rdynamic", variant="rdynamic"),
    # a handler with a 200 KiB frame, every 20 us, on threads whose slow paths come every 128
    # calls (4 KiB chunks): it must run on the thread's stack, never on the tracer's private one
    **{"signal-big-handler" + suffix: Case("bsigstack.c", [sig], exact(
        [{"main": 1}] + [dict({"worker": 1}, **{"worker" + ";fstep" * k: scaled(2500)
                                                for k in range(1, 22)})] * 2),
        env={"FTRACE_BUFSIZE": "4"}) for suffix, sig in (("", "usr1"), ("-trap", "trap"),
                                                           ("-bus", "bus"))},
    # _Unwind_Backtrace() of a libgcc_s opened RTLD_LOCAL, or of the program's own copy: no
    # wrapper sees it, and it must end
    **{"unwind-%s-libgcc" % m: Case("bwalk_local.c", [arg], exact([{
        "main": 1, "main;w1": 1, "main;w1;w2": 1, "main;w1;w2;w3": 1}]), cflags=flags,
        variant=m) for m, arg, flags in (("local", "local", ""),
                                         ("static", "direct", "-static-libgcc"))},
    # backtrace() from a signal handler after every single instruction of a traced call
    # (the trap flag): the stub, trampolines and hooks must all be walked through to main
    "unwind-step": Case("bstep.c", [], exact([{
        "main": 1, "main;outer": 2, "main;outer;leaf": 2}])),
    # the libunwind project's unwinder (-lunwind): unw_step() from inside traced frames, in a
    # signal handler, twice in a row (the frames must still return through their hooks), and
    # unw_backtrace()
    **{"unwind-libunwind-" + m: Case("blibunwind.c", [m], exact([dict(
        {"main": 1, "main;f1": 1, "main;f1;f2": 1, "main;f1;f2;f3": 1},
        **({"main;f1;f2;f3;on_usr1": 1} if m == "signal" else
           {"main;f1;f2;f3;show": 1, "main;f1;f2;f3;show;after": 1}))]),
        cflags="-rdynamic -Wl,--no-as-needed -lunwind", variant="rdynamic")
       for m in ("step", "bt", "signal", "twice")},
    # pthread_cancel() of a thread inside traced frames: every cleanup handler and destructor
    # runs (the forced unwind walks through the hooked slots), each nested where it runs
    "cancel-deferred": Case("bcancel.c", ["deferred"], exact([{"main": 1}, CANCEL_TREE])),
    "cancel-async": Case("bcancel.c", ["async"], exact([{"main": 1}, CANCEL_TREE])),
    # asynchronous cancellation at random points, in the hooks too
    "cancel-async-random": Case("bcancel.c", ["random"], check_cancel_random),
    "cancel-cxx-deferred": Case("bcancel.cpp", ["deferred"], exact([{"main": 1}, CANCEL_TREE]),
                                variant="cxx"),
    "cancel-cxx-async": Case("bcancel.cpp", ["async"], exact([{"main": 1}, CANCEL_TREE]),
                             variant="cxx"),
    "swapcontext": Case("bcoro.c", [], check_coro),
    # the graph knobs on a coroutine's frames: a --notrace function that yields hides nothing
    # of its resumer's; a --graph-function one records its own subtree each time it is resumed
    "swapcontext-notrace": Case("bcoro.c", [], exact(
        [{"main": 1, "main;pinger": 1, "main;pinger;ping_work": 100}]),
        env={"FTRACE_NOTRACE": "coro_body"}),
    "swapcontext-graph": Case("bcoro.c", [], exact([{"coro_body": 1, "coro_body;pong_work": 100}]),
                              env={"FTRACE_GRAPH_FUNCTION": "coro_body"}),
    # a coroutine whose stack is an array in main's frame: no frame of it grows (call-through)
    "swapcontext-local": Case("bcoro.c", ["local"], exact([dict(
        {"main": 1, "main;lco": 1},
        **{";".join(["main", "lco"] + ["lrec"] * i): 1 for i in range(1, 601)})]), opts=("O2",)),
    "swapcontext-nest": Case("bcoro.c", ["nest"], exact(
        [{"main": 1, "main;foo": 1, "main;foo;bar": 1, "main;baz": 1}])),
    "swapcontext-gen": Case("bcoro.c", ["gen"], exact([gen_tree(20)])),
    "swapcontext-reuse": Case("bcoro.c", ["reuse"], exact([{
        "main": 1, "main;run_co": 3, "main;run_co;old_gen": 1, "main;run_co;old_gen;post": 2,
        "main;run_co;old_gen;old_yield": 2, "main;run_co;new_task": 1,
        "main;run_co;new_task;post": 1}])),
    "swapcontext-firstin": Case("bcorofirst.c", [], exact([{
        "co_root": 1, "co_root;co_work": 3, "co_root;co_yield": 3, "main_work": 3}])),
    "swapcontext-pingpong": Case("bcoro.c", ["pingpong"], all_of(exact([{
        "main": 1, "main;driver": 1, "main;driver;a_body": 1, "main;driver;a_body;a_step": 3,
        "main;driver;a_body;a_step;a_work": 3, "main;driver;a_body;a_step;b_body": 1,
        "main;driver;a_body;a_step;b_body;b_step": 3,
        "main;driver;a_body;a_step;b_body;b_step;b_work": 3, "main;after": 1}]),
        summary_exactly({"main": 1, "driver": 1, "a_body": 1, "a_step": 3, "a_work": 3,
                         "b_body": 1, "b_step": 3, "b_work": 3, "after": 1}))),
    # a GNU C nested function (static chain in r10) passed to qsort() and called directly
    "nested-qsort": Case("bnested.c", [], renamed(exact([{
        "main": 1, "main;sorter": 1, "main;sorter;by_key": 6, "main;sorter;by_key;leaf": 6}]),
        r"by_key\.\d+", "by_key"), verify=nested_sites, compilers=("gcc",)),
    "tailcall": Case("btail.c", [], exact([{
        "main": 1, "main;first": 5, "main;first;other": 5, "main;chain": 3,
        "main;chain;first": 3, "main;chain;first;other": 3}]), verify=tail_calls),
    # 4. processes
    "proc-fork": Case("bproc.c", ["fork"], check_fork),
    "proc-forkret": Case("bproc.c", ["forkret"], check_forkret),
    "proc-vfork": Case("bproc.c", ["vfork"], check_parent_only),
    "proc-spawn": Case("bproc.c", ["spawn"], check_parent_only),
    "proc-system": Case("bproc.c", ["system"], check_parent_only),
    "proc-exec": Case("bproc.c", ["exec"], check_exec),
    # (the test waits for the daemon, which keeps its stdout; its records reach the file
    # just after its end, written by the recorder: the report waits for that, as a user's
    # must, with --wait)
    "proc-daemon": Case("bproc.c", ["daemon"], check_daemon, graph_args=["--wait"]),
    "proc-many": Case("bproc.c", ["many"], check_many),
    # the program's own malloc & co: the tracer never calls them, in the parent or a child
    # (built -fno-builtin, as an allocator of its own must be: the compiler would merge calls)
    # the program's own getpid/getppid: the tracer never calls them (start, fork, end)
    "proc-own-getpid": Case("bgetpid.c", [], check_own_getpid),
    # setuid(): glibc signals every thread (SIGSETXID), ours too, and waits for each
    "proc-setuid": Case("bsetuid.c", [], exact([{"main": 1, "main;drop": 1}])),
    "proc-own-malloc": Case("bmalloc.c", [], check_own_malloc, cflags="-fno-builtin",
                            variant="nobuiltin", verify=lambda exe, opt, flagset: flagset),
    # the child counts 150 ms after it began: its trace began meanwhile
    "proc-own-malloc-late": Case("bmalloc.c", ["late"], check_own_malloc, cflags="-fno-builtin",
                                 variant="nobuiltin", verify=lambda exe, opt, flagset: flagset),
    # 5. libraries
    "lib-needed": Case("blibs.c", ["needed"], exact([{
        "main": 1, "main;lib_outer": 2, "main;lib_outer;lib_inner": 4,
        "main;lib_outer;app_cb": 2}]), needed=NEEDED_LIB, dlopen=DL_LIBS),
    "lib-dlopen": Case("blibs.c", ["dlopen"], None, needed=NEEDED_LIB, dlopen=DL_LIBS),
    # a C++ plugin opened RTLD_LOCAL (and RTLD_GLOBAL, in turn) by a C program: its catches and
    # _Unwind_Backtrace reach the tracer's wrappers, whose real functions are only in the
    # plugin's own dependencies
    "lib-dlopen-local-cxx": Case("bdl_local.c", [], exact([plug_tree()]),
                                 dlopen=(("libbplug.cpp", "bplug", "-Wl,--no-as-needed -lstdc++"),)),
    # dlopen() of $ORIGIN/... and ${ORIGIN}/... (the calling object's directory: the program's,
    # then a library's elsewhere) and of bare names along the caller's DT_RPATH or DT_RUNPATH
    "lib-dlopen-origin": Case("bdl_origin.c", [], exact([{
        "main": 1, "main;load": 3, "main;load;bdlo_val": 3, "main;load;bdlo_val;open_val": 2,
        "main;load;bdlo_val;open_val;bdlo_val": 2}]),
        cflags="-Wl,--disable-new-dtags,-rpath,'$ORIGIN/sub'", dlopen=ORIGIN_LIBS),
    # 6. limits
    "limit-deep": Case("blimits.c", ["deep"], check_deep, graph_args=["--max-depth=64"]),
    "limit-closefds": Case("blimits.c", ["closefds"], all_of(
        check_file("bl_closefds.txt", CLOSEFDS_TEXT),
        exact([{"main": 1, "main;phase": 40, "main;phase;leaf": 8000}]))),
    "limit-dup2": Case("blimits.c", ["dup2"], all_of(
        check_file("bl_dup2.txt", DUP2_TEXT),
        exact([{"main": 1, "main;phase": 20, "main;phase;leaf": 4000}]))),
    # the writer flushing every millisecond, while the program frees and refills fds 3..20
    "limit-fdreuse": Case("blimits.c", ["reuse"], exact(
        [{"main": 1, "main;phase1": scaled(20000),
          "main;phase1;leaf": scaled(20000)}]),
        env={"FTRACE_FLUSH_MS": "1"}, base_only=True, opts=("O2",)),
    # the same while the control server accepts connection after connection
    "limit-ctlreuse": Case("blimits.c", ["ctlreuse"], exact(
        [{"main": 1, "main;phase1": scaled(5000), "main;phase1;leaf": scaled(5000)}]),
        base_only=True, opts=("O2",)),
    # ... and after a thread was cancelled inside close()
    "limit-cancelclose": Case("blimits.c", ["cancelclose"], exact(
        [{"main": 1, "main;phase1": 100, "main;phase1;leaf": 100}])),
    # the control server's sockets are not among the program's descriptors
    "limit-sockets": Case("blimits.c", ["sockets"], exact(
        [{"main": 1, "main;phase1": 1, "main;phase1;leaf": 1}])),
}


def check_dlopen(r):
    """main's tree exact, with the names of the library mapped at the time; the spinner's
    tree is spinner -> spin_leaf (any count)."""
    assert len(r.sections) == 1, "%d process sections, want 1" % len(r.sections)
    want_main = {"main": 1, "main;dla_func": 2, "main;dla_func;dla_inner": 2, "main;dlb_func": 3,
                 "main;dlb_func;dlb_inner": 3}
    trees = r.trees()
    assert want_main in trees, "main's tree %s not found: %s" % (
        want_main, [show(t) for t in trees])
    others = [t for t in trees if t != want_main]
    assert len(others) == 1 and set(others[0]) == {"spinner", "spinner;spin_leaf"} and \
        others[0]["spinner"] == 1, "spinner thread: %s" % [show(t) for t in others]
    assert not r.open_calls(), "open at the end: %s" % r.open_calls()


CASES["lib-dlopen"].check = check_dlopen


def run(cmd, cwd, **kw):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, **kw)


def sh(cmd, out):
    """Builds out with the shell command cmd (through the build cache)."""
    r = buildcache.run(cmd, out, shell=True)
    if r.returncode:
        raise AssertionError("build: %s\n%s" % (cmd, r.stderr))


def build(flagset, opt, case, work):
    """Builds the case's libraries and program into WORK/OPT (once); returns the executable."""
    cc, cflags, ldflags, libflags = FLAGSETS[flagset]
    d = os.path.join(work, opt)
    os.makedirs(d, exist_ok=True)
    for src, name, extra in tuple(case.needed) + tuple(case.dlopen):
        # a name may start with a directory (dlopen only): "sub/x" is built as sub/libx.so
        so = os.path.join(d, os.path.dirname(name), "lib%s.so" % os.path.basename(name))
        if not os.path.exists(so):
            os.makedirs(os.path.dirname(so), exist_ok=True)
            sh("%s -%s -g -fno-omit-frame-pointer -fPIC -shared %s %s -I%s -o %s %s -pthread"
               % (cc, opt, libflags, extra, PROGS, so, os.path.join(PROGS, src)), so)
    stem, ext = os.path.splitext(case.src)
    exe = os.path.join(d, stem + ("-" + case.variant if case.variant else ""))
    if not os.path.exists(exe):
        compiler = CXX[cc] if ext == ".cpp" else cc
        libs = "".join(" -L%s -l%s" % (d, name) for _s, name, _e in case.needed)
        if libs:
            # the libraries are next to the program: $ORIGIN finds them wherever the work
            # directory is (the same program, from the build cache, in every run)
            libs += " -Wl,-rpath,'$ORIGIN'"
        fp = "-fno-omit-frame-pointer"
        if not case.frame_pointer:
            # gcc's driver refuses -pg (with or without -mfentry) with -fomit-frame-pointer;
            # without -fno-omit-frame-pointer, -O2 omits it wherever it may: everywhere with
            # -mfentry, only in the functions not instrumented with mcount (gcc keeps it in
            # every function that calls mcount), which then call traced ones with whatever
            # %rbp holds. -O0 keeps it always: such cases run at -O2.
            fp = "" if cc == "gcc" else "-fomit-frame-pointer"
        sh("%s -%s -g %s %s %s -I%s -o %s %s %s %s -pthread -ldl"
           % (compiler, opt, fp, cflags, case.cflags, PROGS, exe,
              os.path.join(PROGS, case.src), ldflags, libs), exe)
    return exe


def mcount_shaped(flagset):
    """gcc's -pg without -mfentry: the mcount call after the prologue."""
    cc, cflags = FLAGSETS[flagset][:2]
    return cc == "gcc" and "-pg" in cflags.split() and "-mfentry" not in cflags.split()


def run_case(flagset, opt, name, case, work, run_bin, report_bin, bases=None):
    """One case's untraced and traced runs and every check; bases (a dict, --repeat): the
    untraced run of each case, kept for the repeats (a program that answers differently from
    one run to the next fails its case anyway). A repeat leaves out the views beside the graph
    (full_views(): the report's own consistency, which its first run checked; the JSON is the
    largest text a case makes)."""
    tag = "%s/%s/%s" % (flagset, opt, name)
    traced = None
    t0 = time.monotonic()
    try:
        exe = build(flagset, opt, case, work)
        facts = case.verify(exe, opt, flagset) if case.verify else None
        cwd = os.path.dirname(exe)
        trace = os.path.join(cwd, "%s.ftr" % name)
        base = bases.get(tag) if bases is not None else None
        repeat = base is not None
        if base is None:
            base = run([exe] + case.args, cwd)
            if bases is not None:
                bases[tag] = base
        traced = run([run_bin, "-q", "-o", trace, exe] + case.args, cwd,
                     env=dict(os.environ, **VALUES_ENV, **case.env))
        compare_runs(base, traced, case.stderr)
        sections, skipped = [], set()
        if case.report:
            rep = run([report_bin] + REPORT_ARGS + case.graph_args + [trace], cwd)
            assert rep.returncode == 0, "ftrace-report failed (%d): %s" % (
                rep.returncode, rep.stderr.strip())
            sections = parse_sections(rep.stdout, skipped)
            assert sections, "no process section in the report: %r" % rep.stdout[:300]
        def info(view="--info", libcalls=False):
            args = [a for a in REPORT_ARGS if not libcalls or a != "--no-libcall"]
            rep = run([report_bin] + args + [view, trace], cwd)
            assert rep.returncode == 0, "ftrace-report %s failed: %s" % (view, rep.stderr.strip())
            return rep.stdout
        case.check(Result(base, traced, sections, cwd, info, facts,
                          report_err=rep.stderr if case.report else ""))
        short = name.split("/")[-1]
        if case.report and not repeat and (full_views(flagset) or short in LIBCALLS):
            # the whole report, library calls included, nests too
            args = [a for a in REPORT_ARGS if a != "--no-libcall"]
            full = run([report_bin] + args + case.graph_args + [trace], cwd)
            assert full.returncode == 0, "ftrace-report (library calls) failed: %s" % full.stderr
            called = set()
            for sec in parse_sections(full.stdout):
                for tree in sec.folded.values():
                    called |= {path.split(";")[-1] for path in tree}
                for st in sec.open.values():
                    called |= set(st)
            missing = [n for n in LIBCALLS.get(short, ()) if n not in called]
            assert not missing, "library calls not in the report: %s (it has %s)" % (
                missing, sorted(called))
        if case.report and not repeat and full_views(flagset):
            ch = run([report_bin] + REPORT_ARGS + ["--chrome", trace], cwd)
            assert ch.returncode == 0, "ftrace-report --chrome failed: %s" % ch.stderr
            chrome_open = check_chrome(ch.stdout, skipped)
            graph_open = collections.Counter()
            for s in sections:
                for tid, st in s.open.items():
                    graph_open[tid] += len(st)
            assert chrome_open == dict(+graph_open), "open calls: chrome %s, graph %s" % (
                chrome_open, dict(+graph_open))
        print("ok   %s (%.1f s)" % (tag, time.monotonic() - t0))
        return True
    except (AssertionError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
        msg = str(e)
        if traced is not None and traced.returncode != base.returncode and "exit" not in msg:
            msg += " (exit status %d, untraced %d)" % (traced.returncode, base.returncode)
        if traced is not None and traced.stderr and "stderr" not in msg:
            msg += "\n     traced stderr: %r" % traced.stderr[-400:]
        print("FAIL %s: %s" % (tag, msg))
        keep_failed(tag, trace if traced is not None else None, report_bin)
        return False


def keep_failed(tag, trace, report_bin):
    """A failure seen once must be explainable after: the trace's header line of events (lost
    ones too), and with FTR_KEEP_FAILED=DIR (scripts/soak.sh sets it) the trace and the
    program, copied there."""
    if not trace or not os.path.exists(trace):
        return
    info = subprocess.run([report_bin, "--info", trace], capture_output=True, text=True,
                          timeout=60).stdout
    for line in info.splitlines():
        if line.strip().startswith(("events", "ended")):
            print("     %s" % line.strip())
    keep = os.environ.get("FTR_KEEP_FAILED")
    if keep:
        dest = os.path.join(keep, tag.replace("/", "-"))
        shutil.copytree(os.path.dirname(trace), dest, dirs_exist_ok=True)
        print("     kept in %s" % dest)


def main():
    ap = arg_parser()
    ap.add_argument("--only", action="append", default=[],
                    help="run only these cases (comma-separated, repeatable; a trailing * "
                         "matches a prefix): %s" % ", ".join(sorted(CASES)))
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each case's traced run this many times (built once; stops at the "
                         "case's first failure): scripts/stress.sh")
    a = ap.parse_args()
    only = [n for o in a.only for n in o.split(",") if n]

    def picked(name, n):
        return name == n or (n.endswith("*") and name.startswith(n[:-1]))
    for n in only:
        if not any(picked(c, n) for c in CASES):
            ap.error("no case %s (cases: %s)" % (n, ", ".join(sorted(CASES))))
    cc = FLAGSETS[a.flagset][0]
    bases = {} if a.repeat > 1 else None

    def repeated(*args):
        return all(run_case(*args, bases=bases) for _ in range(a.repeat))
    return run_matrix(a, CASES, repeated, "ftr-bh-",
                      lambda name, case, opt: opt in case.opts and cc in case.compilers and
                      (base_config(a.flagset) or not case.base_only) and
                      not (opt == "O0" and STRESS_DIV == 1 and name in FULL_AT_O2_ONLY) and
                      (not only or any(picked(name, n) for n in only)))


# abort and exit paths, thread exec, variadic functions, function pointers, callbacks,
# recursion, inlining, no frame pointers (behaviour_kinds.py)
from behaviour_kinds import kind_cases  # noqa: E402
CASES.update(kind_cases(sys.modules[__name__]))


if __name__ == "__main__":
    sys.exit(main())
