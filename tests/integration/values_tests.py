#!/usr/bin/env python3
"""Arguments and return values (-A / -R, the spec form), in every instrumentation flag set.

progs/bvalues.c (C) and progs/bvalues_cxx.cpp (a member function: `this`), built at -O0 and
-O2 with each flag set of run_integration.py, traced with the specs below. Each run checks:
  - the program's stdout, stderr (ftrace-run -q) and exit status are the untraced run's;
  - the graph's function column, line by line, is exactly WANT (the values main passed and the
    functions returned: integers of every width and sign, hex, chars with escapes, bools,
    NULL, strings whole, cut, escaped, NULL and unreadable, float and double arguments beside
    integers, structs by value (their register parts), eight arguments (two on the stack), a
    variadic call, and a function given without an item list: its DWARF parameters);
  - the same trace's --chrome has the values in each call's args;
  - FTRACE_ARGS / FTRACE_RETVAL set by hand give the same tree as the options;
  - --auto-args: every function's parameters and return value named and typed from its
    DWARF (enumerators by name, a struct's register parts, `this`), the same in every build.
Bad specs (-A/-R and the variables): exit status 2 and one line that names the spec; the
program does not run.

usage: values_tests.py --bin DIR [--flagset NAME ...] [--keep]
"""
import json
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
from run_integration import FLAGSETS, case_args  # noqa: E402

PROGS = os.path.join(HERE, "progs")
TIMEOUT = 60

SPECS = [
    ("-A", "w8@arg1/d8,arg2/u8"), ("-R", "w8@retval/d8"),
    ("-A", "w16@arg1/d16,arg2/u16"), ("-R", "w16@retval/i16"),
    ("-A", "w32@arg1/d32,arg2/x32"), ("-R", "w32@retval/d32"),
    ("-A", "w64@arg1,arg2/u64"), ("-R", "w64"),
    ("-R", "color_of@retval/d32"),  # a return value alone: its list follows the ENTRY
    ("-A", "up@arg1/c"), ("-R", "up@retval/c"),
    ("-A", "is_odd@arg1/d32"), ("-R", "is_odd@retval/b"),
    ("-A", "same@arg1/p"), ("-R", "same@retval/p"),
    ("-A", "show@arg1/s,arg2/d32"), ("-R", "show@retval/d32"),
    ("-A", "fmix@fparg1/32,fparg2,arg1/d32"), ("-R", "fmix@retval/f"),
    ("-A", "fhalf@fparg1/32"), ("-R", "fhalf@retval/f32"),
    ("-A", "pairsum@arg1/d32,arg1/x"),
    ("-A", "mixsum@fparg1,arg1"), ("-R", "mixsum@retval/f"),
    ("-A", "eight@arg1,arg2,arg3,arg4,arg5,arg6,arg7,arg8"), ("-R", "eight"),
    ("-A", "vsum@arg1/d32,arg2/d32,arg3/d32,arg4/d32"), ("-R", "vsum@retval/d32"),
    ("-A", "neg"),
]

WANT = [
    "main() {",
    "  w8(-5, 250) = -5;",
    "  w16(-300, 65000) = -300;",
    "  w32(-70000, 0xee6b2800) = -70000;",
    "  w64(-9000000000, 18000000000000000000) = -9000000000;",
    "  color_of() = 10;",
    "  color_of() = -6;",
    "  up('q') = 'Q';",
    "  up('\\n') = '\\n';",
    "  is_odd(7) = true;",
    "  is_odd(10) = false;",
    "  same(NULL) = NULL;",
    '  show("hello", 1) = 5;',
    "  show(NULL, 0) = -1;",
    "  show((bad), 0) = -1;",
    '  show("012345678901234567890123456789012345678901234567"..., 1) = 70;',
    '  show("tab\\t\\"q\\"\\n", 1) = 8;',
    "  fmix(1.5, -2.25, 3) = 2.25;",
    "  fhalf(5) = 2.5;",
    "  pairsum(3, 0x400000003);",
    "  mixsum(0.5, 9) = 9.5;",
    "  eight(1, 2, 3, 4, 5, 6, 7, -8) = 20;",
    "  vsum(3, 10, 20, 30) = 60;",
    "  neg(x=42);",  # -A without an item list: the parameters its DWARF declares
    "} /* main */",
]

# --auto-args: every function, named and typed from its DWARF (int8_t is a signed char)
WANT_DWARF = [
    "main() {",
    "  w8(a='\\xfb', b='\\xfa') = '\\xfb';",
    "  w16(a=-300, b=65000) = -300;",
    "  w32(a=-70000, b=4000000000) = -70000;",
    "  w64(a=-9000000000, b=18000000000000000000) = -9000000000;",
    "  color_of(c=GREEN) = 10;",
    "  color_of(c=BLUE) = -6;",
    "  up(c='q') = 'Q';",
    "  up(c='\\n') = '\\n';",
    "  is_odd(x=7) = true;",
    "  is_odd(x=10) = false;",
    "  same(p=NULL) = NULL;",
    '  show(s="hello", deref=1) = 5;',
    "  show(s=NULL, deref=0) = -1;",
    "  show(s=(bad), deref=0) = -1;",
    '  show(s="012345678901234567890123456789012345678901234567"..., deref=1) = 70;',
    '  show(s="tab\\t\\"q\\"\\n", deref=1) = 8;',
    "  fmix(f=1.5, d=-2.25, i=3) = 2.25;",
    "  fhalf(x=5) = 2.5;",
    "  pairsum(p=0x400000003) = 7;",
    "  mixsum(m={0x3fe0000000000000, 0x9}) = 9.5;",  # an SSE part: a double or two floats
    "  eight(a=1, b=2, c=3, d=4, e=5, f=6, g=7, h=-8) = 20;",
    "  vsum(n=3) = 60;",
    "  neg(x=42) = -42;",
    "} /* main = 0 */",
]
CXX_WANT_DWARF = [
    "main() {",
    re.compile(r"^  Counter::add\(this=0x[0-9a-f]+, k=5\) = 5;$"),
    re.compile(r"^  Counter::add\(this=0x[0-9a-f]+, k=-2\) = 3;$"),
    re.compile(r"^  Counter::get\(this=0x[0-9a-f]+\) = 3;$"),
    "} /* main = 0 */",
]

CXX_SPECS = [("-A", "Counter::add@arg1/p,arg2"), ("-R", "Counter::add"),
             ("-A", "Counter::get@arg1/p"), ("-R", "Counter::get@retval/d32")]
CXX_WANT = [
    "main() {",
    re.compile(r"^  Counter::add\(0x[0-9a-f]+, 5\) = 5;$"),
    re.compile(r"^  Counter::add\(0x[0-9a-f]+, -2\) = 3;$"),
    re.compile(r"^  Counter::get\(0x[0-9a-f]+\) = 3;$"),
    "} /* main */",
]

# bvalues_edge.c: a struct of two floats (its SSE register's bits), an unsigned enum, a stack
# word past the end of a coroutine's stack
EDGE_SPECS = [("--auto-args",), ("-A", "co@arg12")]
EDGE_WANT = [
    "main() {",
    "  f2sum(p=0x402000003fc00000) = 4;",
    "  pick(b=HIGH) = HIGH;",
    "  co((bad));",
    "} /* main = 0 */",
]
# clang -O2 gives the struct parameter no location (left out), and folds pick(HIGH) away
EDGE_WANT_CLANG = ["main() {", "  f2sum() = 4;", "  co((bad));", "} /* main = 0 */"]

BAD = [
    ("-A", "f@arg0"), ("-A", "f@arg1/q"), ("-A", "f@arg1/d12"), ("-A", "f@fparg9"),
    ("-A", "f@arg1,"), ("-R", "f@retval/f16"), ("-A", "f@arg1/d32x"),
    ("-A", "[f@arg1"), ("-A", "-f@arg1"), ("-A", "f@fparg1/x"), ("-R", ""),
]

LINE = re.compile(r"^\s*\d+\) [^|]*\|  (.*)$")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, **kw)


def body_lines(graph):
    out = []
    for line in graph.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = LINE.match(line)
        assert m, "unparsable graph line: %r" % line
        out.append(m.group(1))
    return out


def same_lines(got, want):
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if isinstance(w, str):
            if g != w:
                return False
        elif not w.match(g):
            return False
    return True


def spec_args(specs):
    args = []
    for s in specs:
        args += list(s)
    return args


def check_chrome(bindir, trace):
    r = run([os.path.join(bindir, "ftrace-report"), "--no-libcall", "--chrome", trace])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    begins = {ev["name"]: ev for ev in doc["traceEvents"] if ev.get("ph") in ("B", "X")
              and ev["name"] == "w32"}
    ev = begins.get("w32")
    assert ev and ev.get("args", {}).get("args") == "-70000, 0xee6b2800", \
        "chrome args of w32: %s" % ev
    ends = [ev for ev in doc["traceEvents"] if ev.get("ph") == "E" and
            ev.get("args", {}).get("retval") == "-70000"]
    x = [ev for ev in doc["traceEvents"] if ev.get("ph") == "X" and
         ev.get("args", {}).get("retval") == "-70000"]
    assert ends or x, "no chrome event with w32's return value"


def one(bindir, work, fs, opt, src, specs, want, by_env=False):
    cc, cflags, ldflags, _ = FLAGSETS[fs]
    cxx = src.endswith(".cpp")
    if cxx:
        cc = "g++" if cc == "gcc" else "clang++"
    exe = os.path.join(work, "%s-%s-%s" % (os.path.splitext(src)[0], fs, opt))
    if not os.path.exists(exe):
        b = buildcache.run("%s -%s -g %s -o %s %s %s" % (cc, opt, cflags, exe,
                                                         os.path.join(PROGS, src), ldflags),
                           shell=True)
        assert b.returncode == 0, "build failed: %s" % b.stderr
    if fs == "clang-pg":
        # clang -pg calls mcount in a variadic function only after saving its register area
        # (a branch on al first): the site finder does not walk that far, vsum is not traced
        # (and a spec for it alone would be said to select nothing)
        specs = [sp for sp in specs if len(sp) < 2 or not sp[1].startswith("vsum")]
        want = [w for w in want if not (isinstance(w, str) and w.startswith("  vsum("))]
    plain = run([exe])
    trace = os.path.join(work, "t.ftr")
    env = dict(os.environ)
    env.pop("FTRACE_ARGS", None)
    env.pop("FTRACE_RETVAL", None)
    cmd = [os.path.join(bindir, "ftrace-run"), "-q", "-o", trace]
    if by_env:
        env["FTRACE_ARGS"] = ";".join(s[1] for s in specs if s[0] == "-A")
        env["FTRACE_RETVAL"] = ";".join(s[1] for s in specs if s[0] == "-R")
    else:
        cmd += spec_args(specs)
    traced = run(cmd + [exe], env=env)
    for what in ("stdout", "stderr", "returncode"):
        assert getattr(traced, what) == getattr(plain, what), "%s differs: %r vs %r" % (
            what, getattr(traced, what), getattr(plain, what))
    r = run([os.path.join(bindir, "ftrace-report"), "--no-libcall", trace])
    assert r.returncode == 0, r.stderr
    got = body_lines(r.stdout)
    assert same_lines(got, want), "graph differs:\n got %s\nwant %s" % (
        "\n     ".join(got), "\n     ".join(w if isinstance(w, str) else w.pattern for w in want))
    return trace


def check_bad(bindir):
    for opt, spec in BAD:
        r = run([os.path.join(bindir, "ftrace-run"), opt, spec, "/bin/true"])
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "argument spec" in lines[0], \
            "%s %r: status %d, stderr %r" % (opt, spec, r.returncode, r.stderr)
    env = dict(os.environ, FTRACE_ARGS="f@arg1/zz")
    r = run([os.path.join(bindir, "ftrace-run"), "/bin/echo", "hi"], env=env)
    # the preload says why and lets the program run untraced
    assert r.stdout == "hi\n" and "FTRACE_ARGS" in r.stderr, (r.stdout, r.stderr)


def check_ctl(bindir, work):
    """ftrace-ctl PID args / retval on a running program: calls after each change (its mark)
    carry what it asked for; a spec that selects nothing, or a bad one, is refused (exit 2)
    and changes nothing."""
    exe = os.path.join(work, "bvalues_loop")
    if not os.path.exists(exe):
        b = buildcache.run("gcc -O2 -g -pg -mfentry -o %s %s" % (
            exe, os.path.join(PROGS, "bvalues_loop.c")), shell=True)
        assert b.returncode == 0, b.stderr
    trace, stop = os.path.join(work, "loop.ftr"), os.path.join(work, "stop")
    # at start, a spec that selects nothing is said in one line each; the program runs on
    open(stop, "w").close()
    r = run([os.path.join(bindir, "ftrace-run"), "-o", trace, "-A", "nosuch_fn",
             "-R", "work;zzz_fn", exe, stop])
    assert r.returncode == 0 and r.stdout == "bvalues_loop none\n", (r.returncode, r.stdout)
    lines = r.stderr.splitlines()
    assert lines[:2] == [
        "ftrace-run: argument spec 'nosuch_fn' (-A) matches none of the functions loaded",
        "ftrace-run: return value spec 'zzz_fn' (-R) matches none of the functions loaded"] \
        and len(lines) == 3 and " calls traced into " in lines[2], r.stderr
    # -q: not a line of ours on the program's stderr
    open(stop, "w").close()
    r = run([os.path.join(bindir, "ftrace-run"), "-q", "-o", trace, "-A", "nosuch_fn",
             "-R", "work;zzz_fn", exe, stop])
    assert r.returncode == 0 and r.stdout == "bvalues_loop none\n" and r.stderr == "", \
        (r.returncode, r.stdout, r.stderr)
    if os.path.exists(stop):
        os.unlink(stop)
    p = subprocess.Popen([os.path.join(bindir, "ftrace-run"), "-q", "-o", trace, exe, stop],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ctl = os.path.join(bindir, "ftrace-ctl")
    try:
        steps = [(["args", "nosuch_fn"], 2), (["args", "work@arg0"], 2),
                 (["args", "work@arg1/d32,arg2/s"], 0), (["retval", "work"], 0),
                 (["args", ""], 0)]
        for cmd, want in steps:
            time.sleep(0.15)
            r = run([ctl, "-t", "5000", str(p.pid)] + cmd)
            assert r.returncode == want, "ftrace-ctl %s: %d %r" % (cmd, r.returncode, r.stderr)
            if want:
                assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        time.sleep(0.15)
    finally:
        open(stop, "w").close()
        out, err = p.communicate(timeout=TIMEOUT)
    assert p.returncode == 0 and out == "bvalues_loop ok\n" and not err, (p.returncode, out, err)
    r = run([os.path.join(bindir, "ftrace-report"), "--no-libcall", trace])
    assert r.returncode == 0, r.stderr
    phase, seen = 0, [0, 0, 0, 0]
    forms = [re.compile(r"^  work\(\);$"), re.compile(r'^  work\((\d+), "xyz"\);$'),
             re.compile(r'^  work\((\d+), "xyz"\) = (\d+);$'), re.compile(r"^  work\(\) = (\d+);$")]
    # A change's mark is timed once the sites are rewritten (values.c): the calls made while
    # they were may show the next form just before it, and only there.
    early = False
    for line in body_lines(r.stdout):
        if line.startswith("  /* "):
            phase += 1
            early = False
            continue
        if not line.startswith("  work"):
            continue
        m = None if early else forms[phase].match(line)
        if not m and phase + 1 < len(forms):
            m = forms[phase + 1].match(line)
            early = m is not None
        assert m, "phase %d: %r" % (phase, line)
        if phase + early == 2:
            assert int(m.group(2)) == int(m.group(1)) + 1, line
        seen[phase + early] += 1
    assert phase == 3 and all(seen), "marks %d, calls per phase %s" % (phase, seen)


def main():
    a = case_args()
    bindir = os.path.abspath(a.bin)
    buildcache.use(bindir)
    work = tempfile.mkdtemp(prefix="ftr-values-")
    passed = failed = 0

    def case(name, fn):
        nonlocal passed, failed
        try:
            fn()
            print("ok   %s" % name)
            passed += 1
        except (AssertionError, subprocess.TimeoutExpired) as e:
            print("FAIL %s: %s" % (name, e))
            failed += 1

    case("bad-specs", lambda: check_bad(bindir))
    case("ftrace-ctl", lambda: check_ctl(bindir, work))
    for fs in a.flagset or sorted(FLAGSETS):
        for opt in ("O0", "O2"):
            def c_case(fs=fs, opt=opt):
                t = one(bindir, work, fs, opt, "bvalues.c", SPECS, WANT)
                if opt == "O2":
                    check_chrome(bindir, t)
            case("%s/%s/c" % (fs, opt), c_case)
            case("%s/%s/cxx" % (fs, opt),
                 lambda fs=fs, opt=opt: one(bindir, work, fs, opt, "bvalues_cxx.cpp", CXX_SPECS,
                                            CXX_WANT))
            case("%s/%s/auto-args" % (fs, opt),
                 lambda fs=fs, opt=opt: one(bindir, work, fs, opt, "bvalues.c", [("--auto-args",)],
                                            WANT_DWARF))
            case("%s/%s/cxx-auto-args" % (fs, opt),
                 lambda fs=fs, opt=opt: one(bindir, work, fs, opt, "bvalues_cxx.cpp",
                                            [("--auto-args",)], CXX_WANT_DWARF))
        case("%s/O2/edge" % fs,
             lambda fs=fs: one(bindir, work, fs, "O2", "bvalues_edge.c", EDGE_SPECS,
                               EDGE_WANT_CLANG if fs.startswith("clang") else EDGE_WANT))
        case("%s/O2/env" % fs,
             lambda fs=fs: one(bindir, work, fs, "O2", "bvalues.c", SPECS, WANT, by_env=True))
    if a.keep:
        print("kept", work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
