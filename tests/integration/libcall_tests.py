#!/usr/bin/env python3
"""Library calls: calls through the PLT / GOT into other libraries, traced by default.

progs/blibcall.c (and the dlopen()ed progs/libblibcall.c), built at -O0 and -O2 with each flag
set of run_integration.py, plus -fno-plt (GOT calls) and full RELRO (-z now: the GOT is
read-only once relocated). Each run checks:
  - stdout, stderr and the exit status are the untraced run's (abs's address, taken by the
    program, is still abs: a GOT slot that is read is never hooked);
  - the whole tree, library calls included, is exactly WANT: leaves with their durations,
    qsort calling back into the traced cmp, longjmp and exit (they never return), a thread's
    getpid, a dlopen()ed library's strlen;
  - --no-libcall (and FTRACE_LIBCALL=0): the same tree without them;
  - filters: -F 'main,run,libc.so.6:str*' (a module-qualified selection), '*,-malloc,-free';
  - --auto-args: the arguments and return values of the libc prototype table;
  - ftrace-ctl PID libcall off / on while the program runs: each phase as asked, marked;
  - a program that hooks its own GOT slot (progs/bgothook.c): ftrace-ctl leaves the slot and
    its page's protection as the program made them.

usage: libcall_tests.py --bin DIR [--flagset NAME ...] [--keep]
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import buildcache  # noqa: E402
from run_integration import FLAGSETS, Cases, case_args, parse_graph  # noqa: E402

PROGS = os.path.join(HERE, "progs")
TIMEOUT = 60

# main's thread; memcpy is inlined by some builds (counted 0 or 1)
WANT = {
    "main": 1,
    "main;run": 1, "main;run;malloc": 1, "main;run;strlen": 1, "main;run;write": 1,
    "main;run;free": 1,
    "main;sorter": 1, "main;sorter;qsort": 1, "main;sorter;qsort;cmp": 5,
    "main;sorter;snprintf": 1, "main;sorter;fputs": 1,
    "main;pointers": 1, "main;pointers;printf": 1,
    "main;jumper": 1, "main;jumper;longjmp": 1,
    "main;threads": 1, "main;threads;pthread_create": 1, "main;threads;pthread_join": 1,
    "main;plugin": 1,  # dlopen and dlsym are never hooked (they look at their caller)
    "main;plugin;plug_len": 1, "main;plugin;plug_len;strlen": 1, "main;plugin;printf": 1,
    "main;plugin;dlclose": 1,
    "main;fflush": 1, "main;exit": 1,
}
OPTIONAL = {"main;run;memcpy"}
WORKER = {"worker": 1, "worker;getpid": 1}
OPEN = ["main", "exit"]  # exit never returns


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, **kw)


class Build:
    def __init__(self, work, fs, opt, extra_cflags="", extra_ldflags=""):
        cc, cflags, ldflags, libflags = FLAGSETS[fs]
        tag = "%s-%s%s" % (fs, opt, "-x%d" % abs(hash(extra_cflags + extra_ldflags))
                           if extra_cflags or extra_ldflags else "")
        self.exe = os.path.join(work, "blibcall-" + tag)
        self.lib = os.path.join(work, "libblibcall-%s.so" % tag)
        if not os.path.exists(self.exe):
            for cmd in ("%s -%s %s %s -fPIC -shared -I%s -o %s %s/libblibcall.c" % (
                            cc, opt, libflags, extra_cflags, PROGS, self.lib, PROGS),
                        "%s -%s %s %s -I%s -o %s %s/blibcall.c -pthread -ldl %s %s" % (
                            cc, opt, cflags, extra_cflags, PROGS, self.exe, PROGS, ldflags,
                            extra_ldflags)):
                b = buildcache.run(cmd, shell=True, timeout=TIMEOUT)
                assert b.returncode == 0, "build failed: %s\n%s" % (cmd, b.stderr)


def trace(bindir, work, exe, args, opts=(), env=None):
    """Runs exe untraced and traced; checks they behave the same. @return the trace's path"""
    plain = run([exe] + args, cwd=work)
    path = os.path.join(work, "t.ftr")
    if os.path.exists(path):
        os.unlink(path)
    e = dict(os.environ, **(env or {}))
    traced = run([os.path.join(bindir, "ftrace-run"), "-q", "-o", path] + list(opts) + [exe] +
                 args, cwd=work, env=e)
    for what in ("stdout", "stderr", "returncode"):
        assert getattr(traced, what) == getattr(plain, what), "%s differs: %r vs %r" % (
            what, getattr(traced, what), getattr(plain, what))
    assert "abs same 7" in plain.stdout, plain.stdout
    return path


def graph(bindir, path, *extra):
    r = run([os.path.join(bindir, "ftrace-report")] + list(extra) + [path])
    assert r.returncode == 0 and not r.stderr, "ftrace-report: %s" % r.stderr
    return r.stdout


def check_tree(text, want=WANT, worker=WORKER, optional=OPTIONAL, open_=OPEN):
    folded, open_calls = parse_graph(text)
    trees = {tid: dict(c) for tid, c in folded.items()}
    mains = [tid for tid, t in trees.items() if "main" in t]
    assert len(mains) == 1 and len(trees) == (2 if worker else 1), "threads: %s" % trees
    got = {k: v for k, v in trees[mains[0]].items() if k not in optional or v != 1}
    assert got == want, "main's tree differs:\n got %s\nwant %s\n diff %s" % (
        sorted(got.items()), sorted(want.items()),
        sorted(set(got.items()) ^ set(want.items())))
    if worker:
        other = [t for tid, t in trees.items() if tid != mains[0]][0]
        assert other == worker, "worker's tree: %s" % other
    assert open_calls.get(mains[0], []) == open_, "open: %s" % open_calls


def without(tree, *names):
    return {k: v for k, v in tree.items() if k.split(";")[-1] not in names}


FUNCS = {"main", "run", "sorter", "cmp", "pointers", "jumper", "threads", "worker", "plugin",
         "plug_len"}


def only_functions(tree):
    """tree as if the library calls had not been traced (their callees move up)"""
    out = collections.Counter()
    for k, v in tree.items():
        parts = k.split(";")
        if parts[-1] in FUNCS:
            out[";".join(x for x in parts if x in FUNCS)] += v
    return dict(out)


def case_tree(bindir, work, b):
    path = trace(bindir, work, b.exe, [b.lib])
    check_tree(graph(bindir, path))
    # the same trace without its library calls
    check_tree(graph(bindir, path, "--no-libcall"), only_functions(WANT),
               only_functions(WORKER), (), ["main"])


def case_off(bindir, work, b):
    for opts, env in (["--no-libcall"], None), ([], {"FTRACE_LIBCALL": "0"}):
        path = trace(bindir, work, b.exe, [b.lib], opts, env)
        check_tree(graph(bindir, path), only_functions(WANT), only_functions(WORKER), (),
                   ["main"])


def case_filters(bindir, work, b):
    path = trace(bindir, work, b.exe, [b.lib], ["-F", "main,run,libc.so.6:str*"])
    # plug_len is not selected: the strlen its library calls is main's callee now
    check_tree(graph(bindir, path),
               {"main": 1, "main;run": 1, "main;run;strlen": 1, "main;strlen": 1}, None, (),
               ["main"])
    path = trace(bindir, work, b.exe, [b.lib], ["-F", "*,-malloc,-free"])
    check_tree(graph(bindir, path), without(WANT, "malloc", "free"))


ARGS_WANT = [
    re.compile(r"^    malloc\(64\) = 0x[0-9a-f]+;$"),
    re.compile(r'^    strlen\("hello, world\\n"\) = 13;$'),
    re.compile(r"^    write\(1, 0x[0-9a-f]+, 13\) = 13;$"),
    re.compile(r"^    free\(0x[0-9a-f]+\);$"),
    re.compile(r"^  getpid\(\) = \d+;$"),
    re.compile(r"^      strlen\(\"abc\"\) = 3;$"),
    re.compile(r"^    pthread_join\(0x[0-9a-f]+, 0x[0-9a-f]+\) = 0;$"),
    re.compile(r"^  exit\(3\) \{$"),
]
LINE = re.compile(r"^\s*\d+\) [^|]*\|  (.*)$")


def case_auto_args(bindir, work, b):
    path = trace(bindir, work, b.exe, [b.lib], ["--auto-args"])
    text = graph(bindir, path)
    lines = [LINE.match(x).group(1) for x in text.splitlines()
             if x.strip() and not x.startswith("#")]
    for w in ARGS_WANT:
        assert any(w.match(x) for x in lines), "no line like %s in\n%s" % (
            w.pattern, "\n".join(lines))
    # the tree itself is unchanged by the values
    check_tree(re.sub(r"\((?:[^()]|\([^()]*\))*\)( = [^;{]*)?(;| \{)", r"()\2", text))


def case_ctl(bindir, work, b):
    """ftrace-ctl PID libcall off, then on: run()'s library calls stop, then come back"""
    stop = os.path.join(work, "stop")
    if os.path.exists(stop):
        os.unlink(stop)
    path = os.path.join(work, "loop.ftr")
    p = subprocess.Popen([os.path.join(bindir, "ftrace-run"), "-q", "-o", path, b.exe, "loop",
                          stop], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ctl = os.path.join(bindir, "ftrace-ctl")
    try:
        for cmd, want in ((["libcall", "maybe"], 2), (["libcall", "off"], 0),
                          (["status"], 0), (["libcall", "on"], 0)):
            time.sleep(0.2)
            r = run([ctl, "-t", "5000", str(p.pid)] + cmd)
            assert r.returncode == want, "ftrace-ctl %s: %d %r" % (cmd, r.returncode, r.stderr)
            if cmd == ["status"]:
                assert "libcalls: off" in r.stdout, r.stdout
        time.sleep(0.2)
    finally:
        open(stop, "w").close()
        out, err = p.communicate(timeout=TIMEOUT)
    assert p.returncode == 0 and not err, (p.returncode, err)
    phase, seen, last = 0, collections.Counter(), [None, None, None]
    for line in graph(bindir, path).splitlines():
        if line.startswith("#") or not line.strip():
            continue
        body = LINE.match(line).group(1)
        if body.strip().startswith("/* library calls"):
            phase += 1
            continue
        if body.strip() in ("run() {", "run();"):
            seen[(phase, body.strip())] += 1
            last[phase] = body.strip()
    assert phase == 2, "marks seen: %d" % phase
    # The "off" mark is written once the last slot is put back, so a run() begun in between
    # (the control thread preempted there, under load) is the last of phase 0 and has no
    # library calls: one such run() is allowed, and only as the last before the mark.
    if last[0] == "run();":
        seen[(0, "run();")] -= 1
    assert seen[(0, "run() {")] and not seen[(0, "run();")], seen
    assert seen[(1, "run();")] and not seen[(1, "run() {")], seen
    assert seen[(2, "run() {")], seen


def case_own_hook(bindir, work, flags):
    """The program's own GOT hook (progs/bgothook.c, plthook's way): ftrace-ctl's libcall,
    filter, off and on leave the slot the program changed as the program left it, and its
    page as writable as the program made it."""
    exe = os.path.join(work, "bgothook" + flags.replace(" ", ""))
    cmd = "gcc -O2 -pg -mfentry %s -I%s -o %s %s/bgothook.c -Wl,-z,now,-z,relro" % (
        flags, PROGS, exe, PROGS)
    b = buildcache.run(cmd, shell=True, timeout=TIMEOUT)
    assert b.returncode == 0, "build failed: %s\n%s" % (cmd, b.stderr)
    d = os.path.join(work, "gothook")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    open(os.path.join(d, "go"), "w").close()
    plain = run([exe, d])
    assert plain.returncode == 0, "untraced: %d %r" % (plain.returncode, plain.stdout)
    for f in ("go", "ready"):
        os.unlink(os.path.join(d, f))
    path = os.path.join(work, "gothook.ftr")
    p = subprocess.Popen([os.path.join(bindir, "ftrace-run"), "-q", "-o", path, exe, d],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ctl = os.path.join(bindir, "ftrace-ctl")
    try:
        for _ in range(TIMEOUT * 100):
            if os.path.exists(os.path.join(d, "ready")) or p.poll() is not None:
                break
            time.sleep(0.01)
        for cmd in (["libcall", "off"], ["libcall", "on"], ["filter", "calls"], ["filter", ""],
                    ["off"], ["on"]):
            r = run([ctl, "-t", "5000", str(p.pid)] + cmd)
            assert r.returncode == 0, "ftrace-ctl %s: %d %r" % (cmd, r.returncode, r.stderr)
    finally:
        open(os.path.join(d, "go"), "w").close()
        out, err = p.communicate(timeout=TIMEOUT)
    assert (out, err, p.returncode) == (plain.stdout, plain.stderr, plain.returncode), \
        "traced: exit %d, %r %r; untraced %r" % (p.returncode, out, err, plain.stdout)


def case_callers(bindir, work):
    """What looks at its caller sees the program, not our hook: an interposer's
    dlsym(RTLD_NEXT) finds the next puts (no endless recursion), dlopen() searches the calling
    executable's RUNPATH ($ORIGIN/sub); and a preloaded malloc wrapper that calls dlsym() from
    free() starts (the tracer's own start leaves no dlerror() string for free() to meet)."""
    sub = os.path.join(work, "origin", "sub")
    os.makedirs(sub, exist_ok=True)
    d = os.path.dirname(sub)
    cmds = ["gcc -O2 -fPIC -shared -o %s/libblibcall.so %s/libblibcall.c -I%s" % (sub, PROGS, PROGS),
            "gcc -O2 -fPIC -shared -pg -mfentry -o %s/libblc_wrap.so %s/libblc_wrap.c -ldl" % (d, PROGS),
            "gcc -O2 -pg -mfentry -I%s -o %s/blc_origin %s/blc_origin.c -L%s -lblc_wrap -ldl "
            "-Wl,-rpath,'$ORIGIN' -Wl,-rpath,'$ORIGIN/sub' -Wl,--enable-new-dtags" % (PROGS, d, PROGS, d),
            "gcc -O2 -fPIC -shared -o %s/libblc_malloc.so %s/libblc_malloc.c -ldl" % (d, PROGS)]
    for c in cmds:
        b = buildcache.run(c, shell=True, timeout=TIMEOUT)
        assert b.returncode == 0, "build failed: %s\n%s" % (c, b.stderr)
    exe = os.path.join(d, "blc_origin")
    path = os.path.join(work, "o.ftr")
    plain = run([exe], cwd=work)
    assert plain.stdout == "[wrap] hello\n[wrap] loaded\n", plain.stdout
    traced = run([os.path.join(bindir, "ftrace-run"), "-q", "-o", path, exe], cwd=work)
    assert (traced.stdout, traced.stderr, traced.returncode) == (
        plain.stdout, plain.stderr, plain.returncode), "traced: %r %r %d" % (
        traced.stdout, traced.stderr, traced.returncode)
    folded, _ = parse_graph(graph(bindir, path))
    tree = [dict(c) for c in folded.values()][0]
    assert tree.get("main;puts") == 1 and tree.get("main;puts;puts") is None, tree
    # the malloc wrapper, preloaded before the tracer (as LD_PRELOAD=... ftrace-run would, but
    # not into ftrace-run itself, which may be an ASan build)
    env = dict(os.environ, LD_PRELOAD=os.path.join(d, "libblc_malloc.so") + ":" +
               os.path.join(bindir, "libftrace.so"), FTRACE_OUTPUT=path, FTRACE_QUIET="1")
    r = run(["/bin/echo", "hi"], cwd=work, env=env)
    assert r.returncode == 0 and r.stdout == "hi\n", (r.returncode, r.stdout, r.stderr)


def main():
    a = case_args()
    bindir = os.path.abspath(a.bin)
    buildcache.use(bindir)
    case = Cases("ftr-libcall-", a.keep)
    work = case.work
    for fs in a.flagset or sorted(FLAGSETS):
        for opt in ("O0", "O2"):
            b = Build(work, fs, opt)
            case("%s/%s tree" % (fs, opt), lambda b=b: case_tree(bindir, work, b))
    b = Build(work, "gcc-pgfentry", "O2")
    case("gcc-pgfentry/O2 --no-libcall", lambda: case_off(bindir, work, b))
    case("gcc-pgfentry/O2 filters", lambda: case_filters(bindir, work, b))
    case("gcc-pgfentry/O2 --auto-args", lambda: case_auto_args(bindir, work, b))
    case("gcc-pgfentry/O2 ftrace-ctl libcall", lambda: case_ctl(bindir, work, b))
    for fs in ("gcc-pgfentry", "clang-pgfentry"):
        for opt in ("O0", "O2"):
            nb = Build(work, fs, opt, "-fno-plt")
            case("%s/%s -fno-plt tree" % (fs, opt), lambda b=nb: case_tree(bindir, work, b))
    case("callers: dlsym(RTLD_NEXT), RUNPATH, a malloc wrapper",
         lambda: case_callers(bindir, work))
    for flags in ("", "-fno-plt"):
        case("the program's own GOT hook %s" % flags,
             lambda flags=flags: case_own_hook(bindir, work, flags))
    rb = Build(work, "gcc-pgfentry", "O2", "", "-Wl,-z,now,-z,relro")
    case("gcc-pgfentry/O2 full RELRO tree", lambda: case_tree(bindir, work, rb))
    return case.finish()


if __name__ == "__main__":
    sys.exit(main())
