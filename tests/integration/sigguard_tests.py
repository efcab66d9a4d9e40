#!/usr/bin/env python3
"""preload/interpose/sigguard.c: the guarded signals (SIGTRAP, SIGRTMIN+7) stay unblocked and
ours while the program believes what it asked for.

Nothing in libftrace.so calls it yet in every build, so this builds a test-only preload from
preload/interpose/sigguard.c, sigview.c and progs/sigguard_shim.c (its constructor guards both
signals and installs a handler that counts and chains to the program's action), and runs
progs/sigguard_prog.c in each mode untraced ("plain") and with the shim preloaded ("shim").
Where the program must not tell the difference the two outputs (and how the process ended) must
be identical; elsewhere the shim's output must differ exactly as documented (guarded signals
never blocked in the kernel, /proc's SigBlk; a signalfd never told of one).

usage: sigguard_tests.py [--cc CC] [--keep]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import buildcache  # noqa: E402
TOP = os.path.dirname(os.path.dirname(HERE))
PROGS = os.path.join(HERE, "progs")
PRELOAD = os.path.join(TOP, "preload")
INTERPOSE = os.path.join(PRELOAD, "interpose")
TIMEOUT = 30
RT7 = signal.SIGRTMIN + 7
GUARDED_BITS = (1 << (signal.SIGTRAP - 1)) | (1 << (RT7 - 1))

failures = []


def check(cond, what, detail=""):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)
        if detail:
            print("      " + detail.replace("\n", "\n      "))


def build(cc, tmp):
    flags = ["-std=gnu11", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-pthread"]
    shim = os.path.join(tmp, "sigguard_shim.so")
    prog = os.path.join(tmp, "sigguard_prog")
    for cmd in ([cc] + flags + ["-shared", "-fPIC", "-fvisibility=hidden", "-I", PRELOAD,
                                "-I", INTERPOSE, "-I", os.path.join(PRELOAD, "hot"),
                                "-I", os.path.join(PRELOAD, "runtime"),
                                os.path.join(INTERPOSE, "sigguard.c"),
                                os.path.join(INTERPOSE, "sigview.c"),
                                os.path.join(PROGS, "sigguard_shim.c"), "-o", shim, "-ldl"],
                [cc] + flags + [os.path.join(PROGS, "sigguard_prog.c"), "-o", prog, "-ldl"]):
        r = buildcache.run(cmd, capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or r.stderr.strip():
            sys.exit("build failed: %s\n%s" % (" ".join(cmd), r.stderr))
    return shim, prog


class Runner:
    def __init__(self, shim, prog):
        self.shim, self.prog = shim, prog

    def run(self, mode, traced, *args, late=False):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env.pop("SIGGUARD_SHIM_LATE", None)
        if traced:
            env["LD_PRELOAD"] = self.shim
        if late:
            env["SIGGUARD_SHIM_LATE"] = "1"
        try:
            r = subprocess.run([self.prog, mode] + list(args), capture_output=True, text=True,
                               timeout=TIMEOUT, env=env)
        except subprocess.TimeoutExpired:
            check(False, "%s (%s): finishes within %d s" % (mode, "shim" if traced else "plain",
                                                            TIMEOUT))
            return None, []
        return r.returncode, r.stdout.splitlines()

    def both(self, mode, *args):
        return self.run(mode, False, *args), self.run(mode, True, *args)


def ended(rc):
    if rc is None:
        return "timeout"
    return "signal %d" % -rc if rc < 0 else "exit %d" % rc


def same(what, plain, shim):
    check(plain == shim, what, "plain: %r\nshim:  %r" % (plain, shim))


def unguard(line):
    """What a line about blocked signals reads under the shim: guarded signals never blocked."""
    return re.sub(r"\b(trap|rt7)=1\b", r"\1=0", line)


def test_blocked_trap(r):
    (prc, pout), (src, sout) = r.both("blocked-trap")
    # The kernel kills a thread that traps with SIGTRAP blocked. The guard keeps it open in the
    # kernel (the int3 of a rewrite in progress must be survivable), and the program's own int3
    # meets the program's view, which blocks it: the same death.
    check(prc == -signal.SIGTRAP, "blocked-trap plain: dies of SIGTRAP (%s)" % ended(prc))
    same("blocked-trap shim: SIGTRAP never blocked in the kernel", sout, [unguard(l) for l in pout])
    check(src == -signal.SIGTRAP, "blocked-trap shim: the program's own int3, blocked in its "
          "view, kills it as without the shim (%s)" % ended(src))


def test_handler_mask(r):
    (_, pout), (src, sout) = r.both("handler-mask")
    same("handler-mask plain", pout, ["in-handler hits=1 usr2=1 trap=1 shim=-1", "after usr2=0",
                                      "end"])
    # the program's sa_mask applies during its handler, and SIGTRAP itself is blocked in the
    # program's view (not in the kernel's mask)
    same("handler-mask shim: sa_mask applied for the call, then restored", sout,
         ["in-handler hits=1 usr2=1 trap=1 shim=1", "after usr2=0", "end"])


def test_readback(r):
    (prc, pout), (src, sout) = r.both("readback")
    check(prc == 0 and src == 0, "readback: both exit 0 (%s, %s)" % (ended(prc), ended(src)))
    expected = []
    for line in pout:
        m = re.match(r"usr1-mask0 (0x[0-9a-f]+)$", line)
        if m:  # a signal we do not guard: its sa_mask loses the guarded ones
            line = "usr1-mask0 %#x" % (int(m.group(1), 16) & ~GUARDED_BITS)
        expected.append(line)
    same("readback: every disposition call reads back as without the shim (USR1's mask less "
         "the guarded signals)", sout, expected)
    check(any(l.startswith("trap-signal handler=on_plain") for l in sout),
          "readback: signal(SIGTRAP) is recorded")


def test_masks(r):
    (prc, pout), (src, sout) = r.both("masks")
    check(prc == 0 and src == 0, "masks: both exit 0 (%s, %s)" % (ended(prc), ended(src)))
    expected = []
    for line in pout:
        if re.match(r"\S+-blk ", line):  # what the kernel has: SigBlk
            line = unguard(line)
        elif line.startswith("signalfd got"):  # RT7 is held (blocked in the view), not read
            check(line == "signalfd got usr1 rt7 handler=0 shim=-1", "masks plain: signalfd",
                  line)
            line = "signalfd got usr1 handler=0 shim=1"
        expected.append(line)
    same("masks: the kernel never has a guarded signal blocked; the program reads its own mask "
         "(old masks, caller's set, errors)", sout, expected)


def test_waits(r):
    names = ["ppoll", "__ppoll_chk", "pselect", "epoll_pwait", "epoll_pwait2"]
    prc, pout = r.run("waits", False)
    src, sout = r.run("waits", True, "suspend")
    same("waits plain: RT7 stays pending during the call, handled after it",
         pout, ["%s ret=0 eintr=0 handler=1" % n for n in names] + ["end"])
    same("waits shim: RT7 interrupts every call with a full mask (sigsuspend too)",
         sout, ["%s ret=-1 eintr=1 handler=1" % n for n in names + ["sigsuspend"]] + ["end"])


def test_raise_rt(r):
    (prc, pout), (src, sout) = r.both("raise-rt")
    same("raise-rt plain", pout, ["raise hits=1 code=-6 shim=-1", "end"])
    same("raise-rt shim: raise(SIGRTMIN+7) reaches the program's handler exactly once", sout,
         ["raise hits=1 code=-6 shim=1", "end"])


def test_held_value(r):
    (_, pout), (_, sout) = r.both("held-value")
    same("held-value plain", pout,
         ["held-value before=0 hits=1 code=-6 value=43 pid=1234 uid=5678 errno=7", "end"])
    same("held-value shim: a held SI_TKILL signal keeps what it was sent", pout, sout)


def test_held_wait(r):
    (_, pout), (_, sout) = r.both("held-wait")
    same("held-wait plain", pout[:1],
         ["held-wait raise=5/0 tgsigqueue=5/0 kill=5/0 sigqueue=5/-1"])
    same("held-wait shim: a held SIGTRAP taken by sigwaitinfo()/sigtimedwait() has the "
         "si_code glibc gives", pout, sout)


def test_endings(r):
    for mode, rc in [("trap-default", -signal.SIGTRAP), ("trap-ign", -signal.SIGTRAP),
                     ("trap-resethand", -signal.SIGTRAP), ("rt-default", -RT7), ("rt-ign", 0),
                     ("raw-reinstall", -signal.SIGTRAP)]:
        (prc, pout), (src, sout) = r.both(mode)
        check(prc == rc, "%s plain: %s" % (mode, ended(prc)))
        same("%s: shim ends the same way (%s) with the same output" % (mode, ended(src)),
             (ended(src), sout), (ended(prc), pout))


def test_processes(r):
    (prc, pout), (src, sout) = r.both("processes")
    check(prc == 0 and src == 0, "processes: both exit 0 (%s, %s)" % (ended(prc), ended(src)))
    vf = lambda out: [l for l in out if l.startswith("Sig") or "vfork" in l]  # noqa: E731
    same("processes: a vfork child's sigaction and mask reach exec unchanged, the parent's "
         "view is its own", vf(sout), vf(pout))
    check(len(vf(pout)) == 3, "processes: vfork lines", repr(pout))
    check("parent-int3 hits=1 shim=1" in sout, "processes: the parent still handles SIGTRAP",
          repr(sout))
    for f in ["fork", "_Fork"]:
        check("%s-child status=0x5" % f in pout, "processes plain: %s child blocking SIGTRAP "
              "dies of its int3" % f, repr(pout))
        check("%s-child status=0x5" % f in sout, "processes shim: %s child blocking SIGTRAP in "
              "its view dies of its own int3 too" % f, repr(sout))


def test_late(r):
    rc, out = r.run("late", True, late=True)
    # before ftr_sigguard_init SIGTRAP is stripped already (a library constructor that runs
    # before ours may start threads); init captures the disposition and strips handlers' masks
    same("late: SIGTRAP stripped before ftr_sigguard_init too; init captures the disposition",
         out,
         ["before-init-blk usr1=1 trap=0 rt7=0",
          "trap-before-init handler=on_info flags=0x4000004 mask0=0xfffffffe7ffbfeef "
          "restorer=glibc",
          "after-init-blk usr1=1 trap=0 rt7=0",
          "usr1-mask trap=0 rt7=0 usr2=1",
          "trap-after-init handler=on_info flags=0x4000004 mask0=0xfffffffe7ffbfeef "
          "restorer=glibc",
          "trap-view blocked=1",
          "late-int3 hits=1 shim=1", "end"])


def test_stress(r):
    (prc, pout), (src, sout) = r.both("stress")
    same("stress plain", pout, ["stress traps=20000 hits=20000 shim=-1", "end"])
    same("stress shim: handlers replaced concurrently, every int3 chained once", sout,
         ["stress traps=20000 hits=20000 shim=20000", "end"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--bin", help="ignored (the build directory, as for the other tests)")
    ap.add_argument("--keep", action="store_true", help="keep the build directory")
    a = ap.parse_args()
    if a.bin:
        buildcache.use(a.bin)
    tmp = tempfile.mkdtemp(prefix="sigguard.")
    try:
        r = Runner(*build(a.cc, tmp))
        for t in [test_blocked_trap, test_handler_mask, test_readback, test_masks, test_waits,
                  test_raise_rt, test_held_value, test_held_wait, test_endings, test_processes,
                  test_late, test_stress]:
            t(r)
    finally:
        if a.keep:
            print("kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % len(failures) if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
