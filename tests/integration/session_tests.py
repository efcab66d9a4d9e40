#!/usr/bin/env python3
"""A run's processes as a whole (progs/bsession.c, issue 29 items 8 and 10):

  daemon     a daemon's child still writes after ftrace-run returned (it waits for the test's
             word): ftrace-report says so in one line naming the child (not its parent, whose
             END is written), and with --wait shows all the child's calls; a plain program's
             report says nothing of the kind
  children   24 fork children at once that _exit, exit(i) or are killed by SIGKILL, all waited
             for: the report right after ftrace-run says nothing of writers and has every
             child's calls and how it ended (a fork child does not wait for its END's writing;
             the session's first process does, for every process that has ended)
  reexec     a program that execs itself 100 times: one summary line, with every image's calls
  exectrue   an exec of /bin/true (not instrumented) at the end: one summary line
  execstatic an exec of a static program (no preload runs there): one summary line
  execenv    a child exec'd with an environment its parent made ({"A=1"}; with an LD_PRELOAD
  execenv2   of its own; spawned) sees exactly that one, traced as untraced, and is traced
  spawnenv
  dlmopen    a library dlmopen()ed into new namespaces: one line naming it (none under -q)
  netns      fork children of a process that unshared its network namespace (where the
             recorder's abstract socket is not): every child's calls, nothing said under -q;
             after a chroot() too (where the recorder's path is not either), the children
             untraced and each says so in one line, but not under -q (skipped where
             unshare(CLONE_NEWNET) is not allowed)
  euid       a fork child of a process that changed its user (setresuid, as a server dropping
             its privileges does) after its start: the recorder takes no HELLO from another user,
             so the child runs untraced and says so in one line (none under -q); the parent's
             calls whole (skipped unless run as root)
and, after daemon and plain, the session's recorder process has ended (within 5 s)

in a -pg -mfentry build and a -mnop-mcount build, each run under a timeout.

usage: session_tests.py --bin DIR [--flagset NAME ...]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import buildcache  # noqa: E402
from behaviours import summary_calls  # noqa: E402
from run_integration import FLAGSETS, UNSEEN  # noqa: E402

PROGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs")
TIMEOUT = 60
# scripts/stress.sh's repeats loop a tenth as long (FTR_STRESS_DIV=10, as behaviours.py's):
# the runs, not the loops, are what is repeated
DIV = max(1, int(os.environ.get("FTR_STRESS_DIV", "1")))
REEXEC = max(2, 100 // DIV)
CHILD_WORK = 20000 // DIV
STILL = "is still being written by process"
SUMMARY = re.compile(r"^ftrace-run: (\d+) calls traced into ")


def run(cmd, cwd, env=None):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT,
                          env=dict(os.environ, **(env or {})))


def build(flagset, work):
    """bsession, its static form (not instrumented) and liblive_dl.so, in work"""
    cc, cflags, ldflags, libflags = FLAGSETS[flagset]
    exe = os.path.join(work, "bsession")
    lib = os.path.join(work, "liblive_dl.so")
    static = os.path.join(work, "bsession-static")
    src = os.path.join(PROGS, "bsession.c")
    for cmd, out in [
            ("%s -O2 -g -fno-omit-frame-pointer %s -I%s -o %s %s %s -ldl"
             % (cc, cflags, PROGS, exe, src, ldflags), exe),
            ("%s -O2 -g -fno-omit-frame-pointer -fPIC -shared %s -I%s -o %s %s"
             % (cc, libflags, PROGS, lib, os.path.join(PROGS, "liblive_dl.c")), lib),
            ("%s -O2 -static -I%s -o %s %s" % (cc, PROGS, static, src), static)]:
        r = buildcache.run(cmd, out, shell=True)
        if r.returncode:
            raise AssertionError("build: %s\n%s" % (cmd, r.stderr))
    return exe, lib, static


def summary_lines(stderr):
    return [int(m.group(1)) for m in map(SUMMARY.match, stderr.splitlines()) if m]


def report_calls(rb, trace, cwd, *args):
    rep = run([rb, "--summary", "--no-libcall"] + list(args) + [trace], cwd)
    assert rep.returncode == 0, "ftrace-report failed: %s" % rep.stderr.strip()
    return summary_calls(rep.stdout), rep.stderr


def case_daemon(exe, cwd, rr, rb):
    trace = os.path.join(cwd, "daemon.ftr")
    t = run([rr, "-q", "-o", trace, exe, "daemon"], cwd)
    assert t.returncode == 0 and not t.stderr, "traced: %d %r" % (t.returncode, t.stderr)
    rep = run([rb, "--summary", trace], cwd)
    with open(os.path.join(cwd, "bs_daemon.pid")) as f:
        child = int(f.read())
    want = "ftrace-report: %s %s %d: the report may lack its end; --wait waits for it" % (
        trace, STILL, child)
    open(os.path.join(cwd, "bs_daemon.go"), "w").close()  # the child goes on, and ends
    assert rep.returncode == 0 and want in rep.stderr.splitlines(), \
        "report right after ftrace-run (%d): stderr %r, want the line %r" % (
            rep.returncode, rep.stderr, want)
    calls, err = report_calls(rb, trace, cwd, "--wait")
    assert STILL not in err, "--wait: %r" % err
    assert calls.get("tick") == 30, "--wait: tick called %s times, want 30: %s" % (
        calls.get("tick"), calls)
    wait_recorder_gone(trace)


def recorders(trace):
    """The live recorder processes (comm ftrace-recorder) writing trace: a recorder is a copy
    of the process that started it, with its environment (FTRACE_OUTPUT names the file)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read()
            if "(ftrace-recorder)" not in stat or stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                if b"=" + trace.encode() + b"\0" in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def wait_recorder_gone(trace, seconds=5):
    """The session's recorder ends once its processes have (it lingers 2 s after an exec)"""
    for _ in range(seconds * 20):
        if not recorders(trace):
            return
        time.sleep(0.05)
    raise AssertionError("recorder %s still runs %d s after the session" % (
        recorders(trace), seconds))


def quiet_run(exe, cwd, rr, rb, mode, *args):
    """bsession MODE ARGS traced under -q, then its report at once: (trace, calls per
    function); both said nothing on stderr (the report: no writer it would have to wait for)"""
    trace = os.path.join(cwd, "%s.ftr" % mode)
    t = run([rr, "-q", "-o", trace, exe, mode] + list(args), cwd)
    assert t.returncode == 0 and not t.stderr, "traced: %d %r" % (t.returncode, t.stderr)
    calls, err = report_calls(rb, trace, cwd)
    assert not err, "report right after ftrace-run: stderr %r" % err
    return trace, calls


def case_plain(exe, cwd, rr, rb):
    trace, calls = quiet_run(exe, cwd, rr, rb, "plain")
    assert calls.get("tick") == 3, "tick: %s" % calls
    wait_recorder_gone(trace)


def case_children(exe, cwd, rr, rb):
    trace, calls = quiet_run(exe, cwd, rr, rb, "children", str(CHILD_WORK))
    assert calls.get("child_work") == 24 * CHILD_WORK, "child_work: %s" % calls
    info = run([rb, "--info", trace], cwd)
    ends = sorted(line.split("ended", 1)[1].strip() for line in info.stdout.splitlines()
                  if line.startswith("  ended "))
    want = sorted(["exited with status 0"] * 9 + ["exited with status %d" % i
                                                  for i in range(1, 24, 3)])
    killed = [e for e in ends if e not in want]
    assert len(ends) == 25 and len(killed) == 8 and all(
        e in ("killed by signal 9 (SIGKILL)", UNSEEN)
        for e in killed), "ends: %s" % ends
    wait_recorder_gone(trace)


def one_line(exe, cwd, rr, rb, args, images, out_want=""):
    """traced without -q, library calls off: stdout as untraced, and stderr exactly one summary
    line, whose count is every image's calls: main and tick in each of images (the report
    counts every tick; a main left open by its exec it does not count)"""
    calls_want = 2 * images
    trace = os.path.join(cwd, "%s.ftr" % args[0])
    env = {"FTRACE_LIBCALL": "0"}
    base = run([exe] + args, cwd)
    t = run([rr, "-o", trace, exe] + args, cwd, env)
    assert t.returncode == base.returncode == 0, "exit %d, untraced %d; stderr %r" % (
        t.returncode, base.returncode, t.stderr[-300:])
    assert t.stdout == base.stdout == out_want, "stdout %r, untraced %r, want %r" % (
        t.stdout, base.stdout, out_want)
    lines = t.stderr.splitlines()
    counts = summary_lines(t.stderr)
    assert len(lines) == 1 and counts == [calls_want], \
        "want one summary line of %d calls, got %d lines: %r" % (
            calls_want, len(lines), lines[:3] + (["..."] if len(lines) > 3 else []))
    calls, _ = report_calls(rb, trace, cwd)
    assert calls.get("tick") == images, "report: %s" % calls


def case_reexec(exe, cwd, rr, rb):
    one_line(exe, cwd, rr, rb, ["reexec", str(REEXEC)], REEXEC + 1)


def case_exectrue(exe, cwd, rr, rb):
    one_line(exe, cwd, rr, rb, ["exectrue"], 1)


def case_execstatic(exe, cwd, rr, rb, static):
    one_line(exe, cwd, rr, rb, ["execstatic", static], 1, "static ran\n")


def env_case(mode, want):
    def check(exe, cwd, rr, rb):
        trace = os.path.join(cwd, "%s.ftr" % mode)
        base = run([exe, mode], cwd)
        t = run([rr, "-q", "-o", trace, exe, mode], cwd)
        assert base.stdout == want, "untraced: %r, want %r" % (base.stdout, want)
        assert t.stdout == want, "traced: the child saw %r, want %r" % (t.stdout, want)
        assert t.returncode == base.returncode == 0 and not t.stderr, "exit %d: %r" % (
            t.returncode, t.stderr)
        calls, _ = report_calls(rb, trace, cwd)
        assert calls.get("child_work") == 1 and calls.get("tick") == 1, \
            "the child's calls are not in the trace: %s" % calls
    return check


def case_dlmopen(exe, cwd, rr, rb, lib):
    base = run([exe, "dlmopen", lib], cwd)
    want = "dlmopen: sum 25\n" * 2
    assert base.returncode == 0 and base.stdout == want, "untraced: %r" % base.stdout
    trace = os.path.join(cwd, "dlmopen.ftr")
    t = run([rr, "-o", trace, exe, "dlmopen", lib], cwd, {"FTRACE_LIBCALL": "0"})
    assert t.returncode == 0 and t.stdout == want, "traced: %d %r" % (t.returncode, t.stdout)
    lines = t.stderr.splitlines()
    said = [l for l in lines if "dlmopen()" in l]
    assert len(said) == 1 and lib in said[0] and "not traced" in said[0], \
        "want one line naming %s as not traced: %r" % (lib, lines)
    assert summary_lines(t.stderr) == [2] and len(lines) == 2, "stderr: %r" % lines
    q = run([rr, "-q", "-o", trace, exe, "dlmopen", lib], cwd)
    assert q.returncode == 0 and not q.stderr, "-q: %r" % q.stderr


def case_netns(exe, cwd, rr, rb):
    untraced = run([exe, "netns"], cwd)
    if "unavailable" in untraced.stdout:
        print("skip netns: unshare(CLONE_NEWNET) not allowed here")
        return
    trace, calls = quiet_run(exe, cwd, rr, rb, "netns")
    assert calls.get("child_work") == 3000 and calls.get("tick") == 1, "calls: %s" % calls
    info = run([rb, "--info", trace], cwd)
    ends = [line for line in info.stdout.splitlines() if line.startswith("  ended ")]
    assert len(ends) == 4 and all("exited with status 0" in e for e in ends), "ends: %s" % ends
    wait_recorder_gone(trace)
    root = os.path.join(cwd, "root")
    os.makedirs(root)
    for quiet in ([], ["-q"]):
        t = run([rr] + quiet + ["-o", trace, exe, "netns", root], cwd)
        lines = t.stderr.splitlines()
        said = [line for line in lines if "running untraced" in line and "fork child" in line]
        want = 0 if quiet else 3
        assert t.returncode == 0 and t.stdout == "" and len(said) == want and len(lines) == (
            want + (0 if quiet else 1)), "chroot%s: %d %r" % (quiet, t.returncode, t.stderr)
        calls, _ = report_calls(rb, trace, cwd)
        assert "child_work" not in calls and calls.get("tick") == 1, "calls: %s" % calls
        wait_recorder_gone(trace)


def case_euid(exe, cwd, rr, rb):
    if os.geteuid() != 0:
        print("skip euid: not root")
        return
    trace = os.path.join(cwd, "euid.ftr")
    open(trace, "w").close()
    os.chmod(trace, 0o666)  # the child could write it: it must not believe it is traced
    os.chmod(cwd, 0o777)
    for quiet in ([], ["-q"]):
        t = run([rr] + quiet + ["-o", trace, exe, "euid"], cwd)
        said = [ln for ln in t.stderr.splitlines() if "fork child" in ln and "uid 65534" in ln]
        assert t.returncode == 0 and "unavailable" not in t.stdout and len(said) == (
            0 if quiet else 1), "euid%s: %d %r %r" % (quiet, t.returncode, t.stdout, t.stderr)
        calls, _ = report_calls(rb, trace, cwd)
        assert "child_work" not in calls and calls.get("tick") == 1, "calls: %s" % calls
    wait_recorder_gone(trace)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--flagset", action="append", choices=sorted(FLAGSETS))
    ap.add_argument("--only", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--repeat", type=int, default=1, help="run each case this many times")
    a = ap.parse_args()
    only = [n for n in a.only.split(",") if n]
    buildcache.use(a.bin)
    a.bin = os.path.abspath(a.bin)
    rr = os.path.join(a.bin, "ftrace-run")
    rb = os.path.join(a.bin, "ftrace-report")
    failed = 0
    for fs in a.flagset or ["gcc-pgfentry", "gcc-nop"]:
        work = tempfile.mkdtemp(prefix="ftr-session-")
        try:
            exe, lib, static = build(fs, work)
            cases = [("daemon", case_daemon), ("plain", case_plain),
                     ("children", case_children), ("reexec", case_reexec),
                     ("exectrue", case_exectrue),
                     ("execstatic", lambda *x: case_execstatic(*x, static)),
                     ("execenv", env_case("execenv", "A=1\n")),
                     ("execenv2", env_case("execenv2", "A=1\nLD_PRELOAD=libm.so.6\nB=2\n")),
                     ("spawnenv", env_case("spawnenv", "A=1\n")),
                     ("dlmopen", lambda *x: case_dlmopen(*x, lib)),
                     ("netns", case_netns), ("euid", case_euid)]
            unknown = set(only) - {n for n, _ in cases}
            if unknown:
                ap.error("no case %s" % ", ".join(sorted(unknown)))
            for name, case in cases:
                if only and name not in only:
                    continue
                try:
                    for i in range(a.repeat):
                        cwd = os.path.join(work, "%s.%d" % (name, i))
                        os.makedirs(cwd)
                        case(exe, cwd, rr, rb)
                        shutil.rmtree(cwd, ignore_errors=True)
                    print("ok   %s/%s%s" % (fs, name, " x%d" % a.repeat if a.repeat > 1 else ""))
                except (AssertionError, subprocess.TimeoutExpired, OSError, ValueError) as e:
                    print("FAIL %s/%s: %s" % (fs, name, e))
                    failed += 1
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
