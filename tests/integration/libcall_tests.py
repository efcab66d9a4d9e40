#!/usr/bin/env python3
"""Library calls: calls through the PLT / GOT into other libraries, traced by default.

progs/blibcall.c (and the dlopen()ed progs/libblibcall.c), built at -O0 and -O2 with each flag
set of run_integration.py, plus -fno-plt (GOT calls) and full RELRO (-z now: the GOT is
read-only once relocated). Each run checks:
  - stdout, stderr and the exit status are the untraced run's (abs's address, taken by the
    program, is still abs: a GOT slot that is read is never hooked);
  - the whole tree, library calls included, is exactly WANT: leaves with their durations,
    qsort calling back into the traced cmp, longjmp and exit (they never return), a thread's
    getpid, a dlopen()ed library's strlen, the __cxa_finalize of its destructors in dlclose
    (and of the executable's in exit, for a PIE), gcrt1's __monstartup and __cxa_atexit
    before main in a -pg link;
  - --no-libcall (and FTRACE_LIBCALL=0): the same tree without them;
  - filters: -F 'main,run,libc.so.6:str*' (a module-qualified selection), '*,-malloc,-free';
  - --auto-args: the arguments and return values of the libc prototype table;
  - ftrace-ctl PID libcall off / on while the program runs: each phase as asked, marked;
  - a program that hooks its own GOT slot (progs/bgothook.c): ftrace-ctl leaves the slot and
    its page's protection as the program made them.
The C++ ABI's library calls and gprof's, as uftrace records them, in every flag set at -O0
and -O2, each call counted exactly where it is made (stdout, stderr, exit status unchanged):
  - progs/blc_cxxabi.cpp: __cxa_atexit under the static initialiser, before main;
    __cxa_guard_acquire in both threads that race for a function-local static,
    __cxa_guard_release once, __cxa_guard_abort when its constructor throws; a catch's
    __cxa_begin_catch, __cxa_end_catch, __cxa_get_exception_ptr; __cxa_thread_atexit;
  - progs/blc_gmon.c: in -pg builds gcrt1's __monstartup and __cxa_atexit before main (none
    without -pg); moncontrol, and _mcleanup before an _exit.

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
    # the library's destructors' __cxa_finalize (crtstuff's __do_global_dtors_aux)
    "main;plugin;dlclose": 1, "main;plugin;dlclose;__cxa_finalize": 1,
    "main;fflush": 1, "main;exit": 1,
}
# gcrt1 (a -pg link): __gmon_start__ calls __monstartup() and atexit(_mcleanup), whose
# __cxa_atexit() is the library call (atexit is linked into the program, untraced)
GMON_START = {"__monstartup": 1, "__cxa_atexit": 1}
OPTIONAL = {"main;run;memcpy"}
WORKER = {"worker": 1, "worker;getpid": 1}
OPEN = ["main", "exit"]  # exit never returns


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, **kw)


def gmon_start(fs, exe):
    """gcrt1's calls before main, in a -pg link, when the executable's _init is the first to
    call __gmon_start__, after libftrace.so's constructor. A library loaded at the start that
    refers to it (libm, libstdc++: the executable then exports it) calls it from its own _init,
    before that constructor runs: untraced."""
    if "-pg" not in FLAGSETS[fs][1].split():
        return {}
    r = run(["nm", "-D", "--defined-only", exe])
    assert r.returncode == 0, "nm: %s" % r.stderr
    return {} if re.search(r" __gmon_start__$", r.stdout, re.M) else dict(GMON_START)


def pie(fs):
    """crtbeginS.o's __do_global_dtors_aux (a PIE's) calls __cxa_finalize at exit; crtbegin.o's
    does not"""
    return "-no-pie" not in FLAGSETS[fs][2].split()


def want_of(fs, exe):
    """WANT for exe, built in flag set fs"""
    want = dict(WANT, **gmon_start(fs, exe))
    if pie(fs):
        want["main;exit;__cxa_finalize"] = 1
    return want


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
        self.want = want_of(fs, self.exe)


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


def check_tree(text, want, worker=WORKER, optional=OPTIONAL, open_=OPEN):
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
    check_tree(graph(bindir, path), b.want)
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
    check_tree(graph(bindir, path), without(b.want, "malloc", "free"))


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
    # the tree itself is unchanged by the values (a call's, and a closer's: "} /* f = 0 */")
    text = re.sub(r"\((?:[^()]|\([^()]*\))*\)( = [^;{]*)?(;| \{)", r"()\2", text)
    check_tree(re.sub(r"(\} /\* \S+) = .* \*/$", r"\1 */", text, flags=re.M), b.want)


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
    cmds = ["gcc -O2 -fPIC -shared -o %s/libblibcall.so %s/libblibcall.c -I%s"
            % (sub, PROGS, PROGS),
            "gcc -O2 -fPIC -shared -pg -mfentry -o %s/libblc_wrap.so %s/libblc_wrap.c -ldl"
            % (d, PROGS),
            "gcc -O2 -pg -mfentry -I%s -o %s/blc_origin %s/blc_origin.c -L%s -lblc_wrap -ldl "
            "-Wl,-rpath,'$ORIGIN' -Wl,-rpath,'$ORIGIN/sub' -Wl,--enable-new-dtags"
            % (PROGS, d, PROGS, d),
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


# The C++ ABI's library calls and gprof's (progs/blc_cxxabi.cpp, progs/blc_gmon.c), which
# uftrace records. Only these functions' frames are kept (and the library calls among them);
# the others (constructors inlined or not, split by gcc's partial inlining, destructors,
# printf...) are left out and their callees move up.
CXX_FUNCS = {"main", "use", "flaky", "catcher", "thrower", "worker", "tls_use",
             "wait_for_waiter", "made", "gone"}
INIT = "<init>"  # the static initialiser: _GLOBAL__sub_I_<the file's first symbol or name>
CXX_MAIN = {
    INIT: 1, INIT + ";made": 1, INIT + ";__cxa_atexit": 1,  # g's destructor, before main
    "main": 1,
    # use()'s static: main and the worker both acquire; main constructs, releases once and
    # registers its destructor; the 3 later uses call nothing
    "main;use": 4, "main;use;__cxa_guard_acquire": 1, "main;use;wait_for_waiter": 1,
    "main;use;made": 1, "main;use;__cxa_guard_release": 1, "main;use;__cxa_atexit": 1,
    # flaky()'s static: its constructor throws the first time (the guard aborted)
    "main;flaky": 2, "main;flaky;__cxa_guard_acquire": 2,
    "main;flaky;__cxa_allocate_exception": 1, "main;flaky;__cxa_guard_abort": 1,
    "main;flaky;__cxa_guard_release": 1,
    "main;__cxa_begin_catch": 1, "main;__cxa_end_catch": 1,
    # a throw caught by value (__cxa_throw itself is not traced: it never returns)
    "main;catcher": 1, "main;catcher;thrower": 1,
    "main;catcher;thrower;__cxa_allocate_exception": 1,
    "main;catcher;__cxa_get_exception_ptr": 1, "main;catcher;__cxa_begin_catch": 1,
    "main;catcher;__cxa_current_exception_type": 1, "main;catcher;__cxa_demangle": 1,
    "main;catcher;__cxa_end_catch": 1,
    "gone": 2,  # at exit: use()'s static (~Counter), then g (~Global)
}
CXX_WORKER = {"worker": 1, "worker;use": 1, "worker;use;__cxa_guard_acquire": 1,
              "worker;tls_use": 1, "worker;tls_use;__cxa_thread_atexit": 1,
              "gone": 1}  # its thread_local's destructor, as the thread ends
CXX = {"gcc": "g++", "clang": "clang++"}
ROOT = re.compile(r"^\s*(\d+)\) [^|]*\|  ([^ }][^(]*)\(")


def build_prog(work, fs, opt, src):
    cc, cflags, ldflags, _ = FLAGSETS[fs]
    stem, ext = os.path.splitext(src)
    exe = os.path.join(work, "%s-%s-%s" % (stem, fs, opt))
    cmd = "%s -%s %s -I%s -o %s %s/%s -pthread %s" % (
        CXX[cc] if ext == ".cpp" else cc, opt, cflags, PROGS, exe, PROGS, src, ldflags)
    b = buildcache.run(cmd, shell=True, timeout=TIMEOUT)
    assert b.returncode == 0, "build failed: %s\n%s" % (cmd, b.stderr)
    return exe


def trace_same(bindir, work, exe, args=()):
    """exe run untraced and traced: the same stdout, stderr and exit status. @return the
    report, library calls shown (the default)"""
    plain = run([exe] + list(args), cwd=work)
    path = os.path.join(work, "t.ftr")
    if os.path.exists(path):
        os.unlink(path)
    traced = run([os.path.join(bindir, "ftrace-run"), "-q", "-o", path, exe] + list(args),
                 cwd=work)
    for what in ("stdout", "stderr", "returncode"):
        assert getattr(traced, what) == getattr(plain, what), "%s differs: %r vs %r" % (
            what, getattr(traced, what), getattr(plain, what))
    return graph(bindir, path)


def roots(text):
    """tid -> the names of its calls at depth 0, in order"""
    out = collections.defaultdict(list)
    for line in text.splitlines():
        m = ROOT.match(line)
        if m:
            out[int(m.group(1))].append(m.group(2))
    return out


def project(tree, keep):
    """tree with only the frames keep(name) names (and the static initialiser as INIT)"""
    out = collections.Counter()
    for k, v in tree.items():
        parts = [INIT if x.startswith("_GLOBAL__sub_I_") else x for x in k.split(";")]
        if keep(parts[-1]):
            out[";".join(x for x in parts if keep(x))] += v
    return dict(out)


def same(got, want, what):
    assert got == want, "%s differs:\n got %s\nwant %s\n diff %s" % (
        what, sorted(got.items()), sorted(want.items()),
        sorted(set(got.items()) ^ set(want.items())))


def case_cxxabi(bindir, work, fs, opt):
    """__cxa_atexit before main under the static initialiser; __cxa_guard_acquire in both
    threads racing for a function-local static, __cxa_guard_release once; __cxa_guard_abort
    when its constructor throws; a catch's __cxa_begin_catch and __cxa_end_catch; in -pg builds
    gcrt1's __monstartup and __cxa_atexit first of all, when traced (not here: libm's and
    libstdc++'s _init call __gmon_start__ first); __cxa_finalize at exit in a PIE"""
    exe = build_prog(work, fs, opt, "blc_cxxabi.cpp")
    text = trace_same(bindir, work, exe)
    folded, open_calls = parse_graph(text)
    assert not open_calls, "open: %s" % open_calls
    def keep(x):
        return x in CXX_FUNCS or x.startswith("__cxa_") or x in ("__monstartup", INIT)
    trees = {tid: project(c, keep) for tid, c in folded.items()}
    mains = [tid for tid, t in trees.items() if "main" in t]
    assert len(mains) == 1 and len(trees) == 2, "threads: %s" % trees
    start = gmon_start(fs, exe)
    want = dict(CXX_MAIN, **start, **({"__cxa_finalize": 1} if pie(fs) else {}))
    same(trees[mains[0]], want, "main's thread")
    same([t for tid, t in trees.items() if tid != mains[0]][0], CXX_WORKER, "the worker")
    order = [INIT if x.startswith("_GLOBAL__sub_I_") else x for x in roots(text)[mains[0]]]
    assert "main" in order, "no main in %s" % order
    before = order[:order.index("main")]
    assert before == list(start) + [INIT], "before main: %s, want %s" % (
        before, list(start) + [INIT])
    assert not pie(fs) or order[-1] == "__cxa_finalize", "the last: %s" % order
    # the frames the exceptions left: the throwers' alone (with flaky's constructor), never a
    # library call's (__cxa_begin_catch closing its own frame: "unwound")
    unwound = re.findall(r"\} /\* (\S+) \(unwound\) \*/$", text, re.M)
    assert sorted(x for x in unwound if keep(x)) == ["flaky", "thrower"], "unwound: %s" % unwound


def case_gmon(bindir, work, fs, opt):
    """gcrt1's __monstartup and __cxa_atexit before main in -pg builds (none without -pg);
    main's atexit (its __cxa_atexit), moncontrol, the executable's __cxa_finalize at exit (a
    PIE's), and with "dump" _mcleanup then _exit"""
    exe = build_prog(work, fs, opt, "blc_gmon.c")
    start = gmon_start(fs, exe)
    assert start or "-pg" not in FLAGSETS[fs][1].split(), "__gmon_start__ exported"
    fin = ["__cxa_finalize"] if pie(fs) else []  # the executable's, at exit
    for args, tree, open_, after in (
            ([], dict({"main": 1, "main;__cxa_atexit": 1, "main;moncontrol": 1,
                       "main;printf": 1, "bye": 1, "bye;printf": 1}, **{f: 1 for f in fin}),
             [], ["bye"] + fin),
            # _mcleanup's GOT slot is read where gcrt1 takes its address: never hooked there
            (["dump"], dict({"main": 1, "main;__cxa_atexit": 1, "main;moncontrol": 1,
                             "main;printf": 1, "main;fflush": 1, "main;_exit": 1},
                            **({} if start else {"main;_mcleanup": 1})), ["main", "_exit"], [])):
        text = trace_same(bindir, work, exe, args)
        folded, open_calls = parse_graph(text)
        assert len(folded) == 1, "threads: %s" % folded
        tid, got = list(folded.items())[0]
        same(dict(got), dict(tree, **start), "the tree (%s)" % " ".join(args or ["plain"]))
        assert open_calls.get(tid, []) == open_, "open: %s" % open_calls
        order = roots(text)[tid]
        assert order == list(start) + ["main"] + after, "calls at depth 0: %s" % order


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
            for what, fn in ("C++ ABI", case_cxxabi), ("gmon", case_gmon):
                case("%s/%s %s" % (fs, opt, what),
                     lambda fn=fn, fs=fs, opt=opt: fn(bindir, work, fs, opt))
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
