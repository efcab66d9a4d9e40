#!/usr/bin/env python3
"""ftrace-inject end to end (cli/inject/): a library loaded into running programs must change
nothing they can see, and what cannot be done safely must be refused with one line.

  sleepers  N injections (N copies of the library, each loaded anew) into a program whose
            threads wait over and over in sleeps, poll, select, read, accept, sigsuspend, ppoll
            and pselect with a signal mask, epoll_wait and an accept with a timeout (the last
            two may never be chosen: Linux ends them with EINTR at any stop), one in a raw
            nanosleep that checks every register the kernel keeps across it, while SIGRTMIN+1
            keeps arriving (every ms): no EINTR, no early return, no register or signal mask
            changed, every signal handled, stdout identical to an uninjected run's, exit status
            0; each library's constructor ran in the thread reported; held times (median, max)
  registers N/2 injections into a program whose only thread loops in a raw nanosleep with
            every register the kernel keeps across a system call (rdx, r8-r10, rdi, rsi,
            ymm0-15) loaded with a pattern and checked after it: none changed, no EINTR, no
            early return
  each      for each system call a thread may be stopped in, a program with one thread waiting
            there (and the others where they may not be stopped): that thread is chosen, three
            times, and sees no EINTR, no early return, no mask changed; the read and accept
            threads 12 times each, handling SIGRTMIN+1 sent every ms: every one handled
  unsafe    a program whose threads wait only where they may not be stopped: a futex
            (pthread_cond_timedwait), epoll_wait, rt_sigtimedwait, an accept and a recv with a
            receive timeout, a nanosleep inside a signal handler (which may have interrupted
            malloc), one on an alternate signal stack: refused after the wait (the handler's
            thread named), no EINTR, no early return
  spinner   a thread spinning in pure computation and a sleeping one: the sleeping one is
            chosen every time, and the spinner never stopped (its voluntary context switches,
            which a ptrace stop would count, do not change)
  computer  a program whose only thread computes: refused after the wait, never stopped,
            unharmed
  killed    the injector SIGKILLed while the call runs (the library's constructor sleeps 300
            ms): the thread resumes alone through the signal frame the injector left under the
            call, in a program whose main thread sleeps (a restart block), in the registers
            loop (ymm0-15 and the kept general registers checked), and in a thread blocked in
            accept (ERESTARTSYS; the main thread in a futex): the program keeps running,
            ends with no EINTR, no early return, no register changed, the same stdout as an
            uninjected run, exit status 0; the library's mark appears (the call completed)
  dlerror   a library dlopen cannot load: exit 2 with dlerror()'s text; the program unharmed,
            and a good library loads after it
  refusals  a dead pid, a zombie, a stopped process, a traced one (a tiny C tracer; strace -f
            too if installed), a statically linked one (if libc.a is installed), one under a
            seccomp filter, a library that does not exist; each: exit status 2, one line on
            stderr, the program still running and unharmed, traced only by its own tracer
  user      (as root, with setpriv) a process of user nobody: refused to another ordinary user,
            loaded for nobody itself
  tracer    libftrace.so itself into a program started without it (its initial-exec TLS must
            fit in what glibc keeps for libraries loaded later: before, "cannot allocate memory
            in static TLS block"): loaded, mapped, and dormant until attaching is built: not
            a line on stderr (one could kill or hang the program: SIGPIPE, a full pipe), no
            thread of ours, stdout and exit status as uninjected; its TLS within TLS_BUDGET

Every program runs under a timeout. The programs are tests/integration/inject/*.c.

usage: inject_tests.py --bin DIR [--injections N] [--only NAME,...] [--keep]
"""
import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "inject")
RUN_TIMEOUT = 60  # seconds, any program
READY_TIMEOUT = 20
INJECTED = re.compile(r"^injected (\S+) into (\d+): thread (\d+) held (\d+) us$")
NEVER_CHOSEN = {"epoll", "accept-timeout"}  # EINTR at any stop


class Fail(Exception):
    pass


class Env:
    def __init__(self, args, work):
        self.bin = os.path.abspath(args.bin)
        self.inject_exe = os.path.join(self.bin, "ftrace-inject")
        self.work = work
        self.problems = []
        self.targets = []  # killed at the end, whatever happened
        self.marker = os.path.join(work, "shared", "markers")
        os.makedirs(os.path.dirname(self.marker))
        self.bindir = os.path.join(work, "bin")
        os.makedirs(self.bindir)
        os.chmod(work, 0o755)  # other users' programs run from here
        os.chmod(os.path.dirname(self.marker), 0o1777)
        open(self.marker, "w").close()
        os.chmod(self.marker, 0o666)  # other users' programs write here too

    def cc(self, out, srcs, flags=()):
        cmd = ["gcc", "-O2", "-g", "-Wall", "-o", os.path.join(self.bindir, out)]
        cmd += [os.path.join(SRC, s) for s in srcs] + list(flags)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        if r.returncode:
            raise Fail("cannot build %s: %s" % (out, r.stderr.strip()))
        return os.path.join(self.bindir, out)

    def build(self, injections):
        self.sleeper = self.cc("sleeper", ["sleeper.c"], ["-pthread"])
        self.spinner = self.cc("spinner", ["spinner.c"], ["-pthread"])
        self.computer = self.cc("computer", ["computer.c"])
        self.wrap = self.cc("wrap", ["wrap.c"])
        mark = ['-DMARKER="%s"' % self.marker, "-shared", "-fPIC"]
        lib = self.cc("libmark.so", ["libmark.c"], mark)
        self.bad = self.cc("libbad.so", ["libmark.c"], mark + ["-DBAD"])
        self.slow = self.cc("libslow.so", ["libmark.c"], mark + ["-DSLOW_MS=300"])
        # copies, not links: the loader knows a file by its inode
        self.libs = []
        for i in range(injections):
            p = os.path.join(self.bindir, "libmark_%02d.so" % i)
            shutil.copyfile(lib, p)
            os.chmod(p, 0o755)
            self.libs.append(p)
        self.lib = lib
        self.static = None
        r = subprocess.run(["gcc", "-print-file-name=libc.a"], capture_output=True, text=True)
        if os.path.isabs(r.stdout.strip()):
            try:
                self.static = self.cc("sleeper-static", ["sleeper.c"], ["-pthread", "-static"])
            except Fail as e:
                print("  (no static build: %s)" % e)

    def check(self, cond, msg):
        if not cond:
            self.problems.append(msg)
            print("  FAIL: " + msg)
        return cond

    def inject(self, pid, lib, wait_ms=None, user=None):
        cmd = [self.inject_exe] + (["-w", str(wait_ms)] if wait_ms else []) + [str(pid), lib]
        if user is not None:
            cmd = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] + cmd
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        return r.returncode, r.stdout, r.stderr

    def markers(self):
        try:
            with open(self.marker) as f:
                return [line.split() for line in f if line.strip()]
        except FileNotFoundError:
            return []


class Target:
    """A program started in a directory of its own, with DIR/ready, DIR/tids, DIR/stop."""

    def __init__(self, env, name, argv, prefix=(), want_ready=True):
        self.env = env
        self.dir = os.path.join(env.work, name)
        os.makedirs(self.dir)
        os.chmod(self.dir, 0o777)
        self.out = open(os.path.join(self.dir, "stdout"), "w+")
        argv = [a.replace("{DIR}", self.dir) for a in argv]
        self.p = subprocess.Popen(list(prefix) + argv, stdout=self.out, stderr=subprocess.PIPE,
                                  text=True)
        env.targets.append(self)
        if want_ready:
            self.wait_file("ready")

    def wait_file(self, name):
        end = time.time() + READY_TIMEOUT
        while not os.path.exists(os.path.join(self.dir, name)):
            if self.p.poll() is not None or time.time() > end:
                self.kill()
                raise Fail("%s: no %s (exit %s)" % (self.dir, name, self.p.returncode))
            time.sleep(0.01)

    def tids(self):
        with open(os.path.join(self.dir, "tids")) as f:
            return {int(t): n for n, t in (line.split() for line in f if line.strip())}

    @property
    def pid(self):
        """the program's own pid (under a wrapper, not the wrapper's): its main thread's tid"""
        return next(t for t, n in self.tids().items() if n == "main")

    def finish(self):
        open(os.path.join(self.dir, "stop"), "w").close()
        try:
            _, err = self.p.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Fail("%s: hung" % self.dir)
        self.out.seek(0)
        return self.p.returncode, self.out.read(), err

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def status(pid, tid=None, key="voluntary_ctxt_switches"):
    path = "/proc/%d/task/%d/status" % (pid, tid) if tid else "/proc/%d/status" % pid
    with open(path) as f:
        for line in f:
            if line.startswith(key + ":"):
                return line.split(":", 1)[1].strip()
    return None


def zero_counts(out):
    """the lines of a sleeper's output that are not all-zero counts"""
    return [ln for ln in out.splitlines()
            if "EINTR" in ln and not ln.endswith(": 0 EINTR, 0 early")]


class Sender(threading.Thread):
    """SIGRTMIN+1 to each of the pids every millisecond, the same number to each"""

    def __init__(self, pids):
        super().__init__()
        self.pids, self.sent, self.done = pids, 0, threading.Event()
        self.start()

    def run(self):
        while not self.done.is_set():
            for pid in self.pids:
                os.kill(pid, signal.SIGRTMIN + 1)
            self.sent += 1
            time.sleep(0.001)

    def stop(self):
        self.done.set()
        self.join()
        time.sleep(0.2)  # the last ones handled

    def check(self, env, what, out):
        env.check("signals: %d\n" % self.sent in out, "%s: %d signals sent, the program says %s"
                  % (what, self.sent, [ln for ln in out.splitlines() if ln.startswith("signals")]))


def case_sleepers(env, n):
    base = Target(env, "sleepers-base", [env.sleeper, "{DIR}"])
    t = Target(env, "sleepers", [env.sleeper, "{DIR}"])
    names = t.tids()
    sender = Sender([base.p.pid, t.p.pid])
    held, chosen = [], {}
    try:
        for i, lib in enumerate(env.libs[:n]):
            rc, out, err = env.inject(t.p.pid, lib)
            m = INJECTED.match(out.strip())
            if not env.check(rc == 0 and m and not err,
                             "injection %d: rc %d, %r %r" % (i, rc, out, err)):
                continue
            tid = int(m.group(3))
            held.append(int(m.group(4)))
            chosen.setdefault(names.get(tid, "?%d" % tid), []).append(tid)
            mk = [x for x in env.markers() if x[2] == lib and x[0] == str(t.p.pid)]
            env.check(mk == [[str(t.p.pid), str(tid), lib]],
                      "injection %d: the constructor's mark %r, the reported thread %d"
                      % (i, mk, tid))
    finally:
        sender.stop()
    rb, ob, eb = base.finish()
    rt, ot, et = t.finish()
    env.check(rt == 0 and rb == 0, "exit status %d (uninjected: %d)" % (rt, rb))
    env.check(not zero_counts(ot), "injected run's counts: %s" % zero_counts(ot))
    env.check("registers changed: 0\n" in ot, "registers changed: %s"
              % [ln for ln in ot.splitlines() if ln.startswith("registers")])
    env.check(ot == ob, "stdout differs:\n%s\nuninjected:\n%s" % (ot, ob))
    sender.check(env, "sleepers", ot)
    env.check(not et and not eb, "stderr: %r %r" % (et, eb))
    bad = set(chosen) & NEVER_CHOSEN
    env.check(not bad, "threads chosen that Linux interrupts with EINTR: %s" % bad)
    if held:
        print("  %d injections, %d signals; held: median %d us, max %d us; threads chosen: %s"
              % (len(held), sender.sent, statistics.median(held), max(held),
                 ", ".join("%s x%d" % (k, len(v)) for k, v in sorted(chosen.items()))))
        env.check(max(held) < 1000000, "held %d us" % max(held))


def case_registers(env, n):
    t = Target(env, "registers", [env.sleeper, "{DIR}", "regs"])
    held = []
    for i in range(n):
        rc, out, err = env.inject(t.pid, env.libs[i % len(env.libs)])
        m = INJECTED.match(out.strip())
        if env.check(rc == 0 and m, "registers injection %d: rc %d %r %r" % (i, rc, out, err)):
            held.append(int(m.group(4)))
    rc, out, err = t.finish()
    env.check(rc == 0 and "regs: 0 EINTR, 0 early\n" in out and "registers changed: 0\n" in out
              and not zero_counts(out) and not err, "registers: %d %r %r" % (rc, out, err))
    if held:
        print("  %d injections; held: median %d us, max %d us"
              % (len(held), statistics.median(held), max(held)))


SAFE_KINDS = ["nanosleep", "abstime", "poll", "select", "read", "long", "accept", "regs",
              "sigsuspend", "ppoll-mask", "pselect-mask"]


def case_each(env, n=3):
    for kind in SAFE_KINDS:
        t = Target(env, "each-" + kind, [env.sleeper, "{DIR}", "only:" + kind])
        want = next(tid for tid, name in t.tids().items() if name == kind)
        held = []
        sender = Sender([t.p.pid]) if kind in ("read", "accept") else None  # their handler's
        try:
            for i in range(n if not sender else 4 * n):
                rc, out, err = env.inject(t.pid, env.libs[i % len(env.libs)])
                m = INJECTED.match(out.strip())
                if env.check(rc == 0 and m,
                             "%s injection %d: rc %d %r %r" % (kind, i, rc, out, err)):
                    held.append(int(m.group(4)))
                    env.check(int(m.group(3)) == want, "%s: thread %s chosen, not %d"
                              % (kind, m.group(3), want))
        finally:
            if sender:
                sender.stop()
        rc, out, err = t.finish()
        if sender:
            sender.check(env, kind, out)
        env.check(rc == 0 and ("%s: 0 EINTR, 0 early\n" % kind) in out and not zero_counts(out)
                  and (kind != "regs" or "registers changed: 0\n" in out) and not err,
                  "%s: the program: %d %r %r" % (kind, rc, out, err))
        if held:
            print("  %-13s %d injections, held %s us%s"
                  % (kind + ":", len(held), " ".join(map(str, held)),
                     ", %d signals" % sender.sent if sender else ""))


def case_unsafe(env):
    t = Target(env, "unsafe", [env.sleeper, "{DIR}", "unsafe"])
    rc, out, err = env.inject(t.pid, env.lib, wait_ms=1000)
    refused(env, "unsafe", rc, out, err, "no thread of %d waits in a system call" % t.pid)
    handler = next(tid for tid, name in t.tids().items() if name == "handler")
    env.check("thread %d waits inside a signal handler" % handler in err,
              "unsafe: the thread in a signal handler not named: %r" % err)
    rc, out, err = t.finish()
    env.check(rc == 0 and out.count(" EINTR, ") == 7 and not zero_counts(out) and not err,
              "unsafe: the program: %d %r %r" % (rc, out, err))
    env.check(not [m for m in env.markers() if m[0] == str(t.pid)], "unsafe: the library ran")


def case_spinner(env, n=10):
    t = Target(env, "spinner", [env.spinner, "{DIR}"])
    tids = {name: tid for tid, name in t.tids().items()}
    before = status(t.p.pid, tids["spinner"])
    for i in range(n):
        rc, out, err = env.inject(t.p.pid, env.libs[i % len(env.libs)])
        m = INJECTED.match(out.strip())
        env.check(rc == 0 and m, "spinner injection %d: rc %d %r %r" % (i, rc, out, err))
        if m:
            env.check(int(m.group(3)) == tids["main"],
                      "spinner injection %d: thread %s chosen, not the sleeping main thread %d"
                      % (i, m.group(3), tids["main"]))
    after = status(t.p.pid, tids["spinner"])
    env.check(before == after,
              "the spinner was stopped: voluntary switches %s -> %s" % (before, after))
    print("  %d injections into thread %d (main); the spinner's voluntary switches: %s -> %s"
          % (n, tids["main"], before, after))
    rc, out, err = t.finish()
    env.check(rc == 0 and out == "spinner ok\n", "spinner: %d %r %r" % (rc, out, err))


def refused(env, what, rc, out, err, text):
    lines = err.splitlines()
    env.check(rc == 2 and not out and len(lines) == 1 and lines[0].startswith("ftrace-inject: ")
              and text in lines[0], "%s: rc %d, stdout %r, stderr %r (wanted %r)"
              % (what, rc, out, err, text))
    if lines:
        print("  %-9s %s" % (what + ":", lines[0]))


def case_computer(env):
    d = os.path.join(env.work, "computer")
    os.makedirs(d)
    ctl = os.path.join(d, "ctl")
    p = subprocess.Popen([env.computer, ctl], stdout=subprocess.PIPE, text=True)
    try:
        env.check(p.stdout.readline() == "ready\n", "computer: not ready")
        before = status(p.pid)
        rc, out, err = env.inject(p.pid, env.lib, wait_ms=500)
        refused(env, "computer", rc, out, err, "no thread of %d waits in a system call" % p.pid)
        env.check(p.poll() is None, "computer: ended")
        env.check(status(p.pid) == before, "computer: stopped (voluntary switches %s -> %s)"
                  % (before, status(p.pid)))
        with open(ctl, "r+b") as f:
            f.write(b"\1")
        out, _ = p.communicate(timeout=RUN_TIMEOUT)
        env.check(p.returncode == 0 and out == "computer ok\n",
                  "computer: %d %r" % (p.returncode, out))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def unharmed(env, what, t, tracer=0):
    """the target refused is still running, traced as before, and ends with zero counts"""
    pid = t.pid
    env.check(t.p.poll() is None, "%s: the program ended" % what)
    env.check(status(pid, key="TracerPid") == str(tracer), "%s: TracerPid %s after the refusal"
              % (what, status(pid, key="TracerPid")))
    rc, out, err = t.finish()
    env.check(rc == 0 and out and not zero_counts(out), "%s: the program: %d %r" % (what, rc, out))
    env.check(not [m for m in env.markers() if m[0] == str(pid)], "%s: the library ran" % what)


def traced(pid):
    """is any thread of pid traced?"""
    try:
        return any(status(pid, int(t), "TracerPid") not in (None, "0")
                   for t in os.listdir("/proc/%d/task" % pid))
    except (FileNotFoundError, ProcessLookupError):
        return False


def mapped(pid, path):
    try:
        with open("/proc/%d/maps" % pid) as f:
            return any(line.rstrip("\n").endswith(" " + path) for line in f)
    except (FileNotFoundError, ProcessLookupError):
        return False


def case_killed(env):
    for mode in ("simple", "regs", "only:accept"):
        base = Target(env, "killed-base-" + mode.replace(":", "-"), [env.sleeper, "{DIR}", mode])
        t = Target(env, "killed-" + mode.replace(":", "-"), [env.sleeper, "{DIR}", mode])
        pid = t.pid
        lib = os.path.join(env.bindir, "libslow_%s.so" % mode.replace(":", "-"))
        shutil.copyfile(env.slow, lib)
        inj = subprocess.Popen([env.inject_exe, str(pid), lib], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        # the library mapped: the call is under way, its constructor sleeping for 300 ms
        end = time.time() + 10
        while not mapped(pid, lib) and inj.poll() is None and time.time() < end:
            time.sleep(0.001)
        time.sleep(0.05)
        running = inj.poll() is None and traced(pid)
        inj.kill()
        out, err = inj.communicate(timeout=RUN_TIMEOUT)
        env.check(running, "killed %s: the injector had ended before its kill: %r %r"
                  % (mode, out, err))
        mk = []
        end = time.time() + 10
        while not mk and time.time() < end and t.p.poll() is None:
            mk = [x for x in env.markers() if x[2] == lib and x[0] == str(pid)]
            time.sleep(0.01)
        env.check(t.p.poll() is None, "killed %s: the program ended (status %s)"
                  % (mode, t.p.returncode))
        env.check(len(mk) == 1, "killed %s: the library's mark: %r" % (mode, mk))
        env.check(not traced(pid), "killed %s: still traced" % mode)
        time.sleep(0.1)  # a few more waits after the call
        rb, ob, eb = base.finish()
        rt, ot, et = t.finish()
        env.check(rt == 0 and rb == 0, "killed %s: exit status %s (uninjected: %s), stderr %r"
                  % (mode, rt, rb, et))
        env.check(ot == ob and ot and not zero_counts(ot)
                  and (mode != "regs" or "registers changed: 0\n" in ot),
                  "killed %s: stdout %r, uninjected %r" % (mode, ot, ob))
        print("  %-7s injector killed in the call; program: exit %s, %s; mark %s"
              % (mode + ":", rt, " ".join(ot.split("\n")).strip(), "seen" if mk else "missing"))


def case_dlerror(env):
    t = Target(env, "dlerror", [env.sleeper, "{DIR}", "simple"])
    rc, out, err = env.inject(t.pid, env.bad)
    refused(env, "dlerror", rc, out, err, "undefined symbol: inject_tests_no_such_function")
    env.check(("dlopen in %d failed: " % t.pid) in err, "dlerror: %r" % err)
    rc, out, err = env.inject(t.pid, env.lib)
    env.check(rc == 0 and INJECTED.match(out.strip()),
              "dlerror, then a good one: %d %r %r" % (rc, out, err))
    rc, out, err = t.finish()
    env.check(rc == 0 and not zero_counts(out), "dlerror: the program: %d %r" % (rc, out))


def case_refusals(env):
    # a dead pid, a zombie
    p = subprocess.Popen(["true"])
    p.wait(timeout=RUN_TIMEOUT)
    refused(env, "dead", *env.inject(p.pid, env.lib), "no such process %d" % p.pid)
    p = subprocess.Popen(["true"])
    for _ in range(500):
        if status(p.pid, key="State").startswith("Z"):
            break
        time.sleep(0.01)
    refused(env, "zombie", *env.inject(p.pid, env.lib), "zombie")
    p.wait(timeout=RUN_TIMEOUT)

    # stopped
    t = Target(env, "stopped", [env.sleeper, "{DIR}", "simple"])
    os.kill(t.pid, signal.SIGSTOP)
    for _ in range(500):
        if status(t.pid, key="State").startswith("T"):
            break
        time.sleep(0.01)
    refused(env, "stopped", *env.inject(t.pid, env.lib), "is stopped")
    os.kill(t.pid, signal.SIGCONT)
    unharmed(env, "stopped", t)

    # traced
    t = Target(env, "traced", [env.sleeper, "{DIR}", "simple"], prefix=[env.wrap, "trace"])
    refused(env, "traced", *env.inject(t.pid, env.lib), "already traced by process %d" % t.p.pid)
    unharmed(env, "traced", t, tracer=t.p.pid)
    if shutil.which("strace"):
        t = Target(env, "straced", [env.sleeper, "{DIR}", "simple"],
                   prefix=["strace", "-f", "-qq", "-o", "/dev/null"])
        refused(env, "strace", *env.inject(t.pid, env.lib),
                "already traced by process %d" % t.p.pid)
        unharmed(env, "strace", t, tracer=t.p.pid)
    else:
        print("  (no strace: traced by strace not tested)")

    # statically linked
    if env.static:
        t = Target(env, "static", [env.static, "{DIR}", "simple"])
        refused(env, "static", *env.inject(t.pid, env.lib), "statically linked")
        unharmed(env, "static", t)
    else:
        print("  (no libc.a: the statically linked case is skipped)")

    # seccomp
    t = Target(env, "seccomp", [env.sleeper, "{DIR}", "simple"], prefix=[env.wrap, "seccomp"])
    refused(env, "seccomp", *env.inject(t.pid, env.lib), "seccomp filter")
    unharmed(env, "seccomp", t)

    # no such library
    t = Target(env, "nolib", [env.sleeper, "{DIR}", "simple"])
    refused(env, "nolib", *env.inject(t.pid, "/no/such/lib.so"), "No such file")
    unharmed(env, "nolib", t)


def case_user(env):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        print("  (not root, or no setpriv: other users not tested)")
        return
    import pwd
    nobody = pwd.getpwnam("nobody").pw_uid
    other = 54321 if nobody != 54321 else 54322
    prefix = ["setpriv", "--reuid=%d" % nobody, "--regid=%d" % nobody, "--clear-groups"]
    t = Target(env, "user", [env.sleeper, "{DIR}", "simple"], prefix=prefix)
    pid = t.pid
    refused(env, "user", *env.inject(pid, env.lib, user=other), "runs as user")
    env.check(not env.markers() or all(m[0] != str(pid) for m in env.markers()),
              "user: library ran")
    # its owner may
    rc, out, err = env.inject(pid, env.lib, user=nobody)
    m = INJECTED.match(out.strip())
    env.check(rc == 0 and m, "the owner's injection: %d %r %r" % (rc, out, err))
    if m:
        print("  owner:    " + out.strip())
    rc, out, err = t.finish()
    env.check(rc == 0 and not zero_counts(out), "user: the program: %d %r" % (rc, out))
    env.check([x[0] for x in env.markers()].count(str(pid)) == 1, "user: the library's mark")


# libftrace.so's initial-exec TLS: glibc keeps 1664 bytes of static TLS for every library
# loaded after the start (glibc.rtld.optional_static_tls 512, and 4 x 192 for its own): the
# tracer takes well under half, leaving the rest to the program's other such libraries
TLS_BUDGET = 768


def tls_size(lib):
    r = subprocess.run(["readelf", "-lW", lib], capture_output=True, text=True, check=True)
    for line in r.stdout.splitlines():
        f = line.split()
        if f and f[0] == "TLS":
            return int(f[5], 16)
    return 0


def case_tracer(env):
    lib = os.path.join(env.bin, "libftrace.so")
    size = tls_size(lib)
    env.check(size <= TLS_BUDGET, "libftrace.so has %d bytes of initial-exec TLS (budget %d)"
              % (size, TLS_BUDGET))
    base = Target(env, "tracer-base", [env.sleeper, "{DIR}", "simple"])
    t = Target(env, "tracer", [env.sleeper, "{DIR}", "simple"])
    before = sorted(os.listdir("/proc/%d/task" % t.pid))
    rc, out, err = env.inject(t.pid, lib)
    env.check(rc == 0 and INJECTED.match(out.strip()) and not err,
              "libftrace.so: rc %d %r %r" % (rc, out, err))
    env.check(mapped(t.pid, lib), "libftrace.so not in the program's maps after the injection")
    after = sorted(os.listdir("/proc/%d/task" % t.pid))
    env.check(after == before, "threads %s, before %s" % (after, before))
    rb, ob, eb = base.finish()
    rt, ot, et = t.finish()
    if env.check(rt == rb == 0 and ot == ob and not eb and not et,
                 "the program: exit %d (uninjected %d), stdout %r (uninjected %r), stderr %r"
                 % (rt, rb, ot, ob, et)):
        print("  libftrace.so (%d bytes of TLS) loaded, dormant" % size)


CASES = ["sleepers", "registers", "each", "unsafe", "spinner", "computer", "killed", "dlerror",
         "refusals", "user", "tracer"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--injections", type=int, default=50)
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ftr-inject-")
    env = Env(args, work)
    failed = False
    try:
        env.build(max(args.injections, 1))
        for name in args.only.split(","):
            print("%s:" % name, flush=True)
            try:
                if name == "sleepers":
                    case_sleepers(env, args.injections)
                elif name == "registers":
                    case_registers(env, max(args.injections // 2, 1))
                else:
                    globals()["case_" + name](env)
            except (Fail, subprocess.TimeoutExpired) as e:
                env.check(False, "%s: %s" % (name, e))
    except Fail as e:
        print("FAIL: %s" % e)
        failed = True
    finally:
        for t in env.targets:
            t.kill()
        if args.keep:
            print("kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    if failed or env.problems:
        print("FAILED: %d problem(s)" % len(env.problems))
        return 1
    print("all inject tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
