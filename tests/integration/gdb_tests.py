#!/usr/bin/env python3
"""A debugger walks through traced frames: gdb's backtrace at a breakpoint in leaf() of
tests/integration/progs/tree.c (main -> top -> mid -> leaf), under libftrace.so.

With call-through exits (the default, sites at the function's first byte) every caller is the
real one, each behind one ftr_tramp_through frame: the backtrace names leaf, mid, top, main in
that order and nothing else of the program (where gdb's breakpoint lands on leaf's site, that
site is left alone, so leaf itself is untraced; its callers are). With the return hook (FTRACE_EXIT=hook) gdb meets
the hooked return address and stops at the pseudo-frame, cleanly ("Backtrace stopped"), as
docs/design.md says; the program still runs to its end (its own output says so). With
scripts/ftrace-gdb.py sourced, gdb walks through hooked frames too, and its frame filter hides
the trampolines: in both modes the backtrace is leaf, mid, top, main and nothing else.

usage: gdb_tests.py --bin DIR
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import buildcache  # noqa: E402

PROGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs")
FLAGSETS = {"gcc-pgfentry": "-pg -mfentry", "gcc-nop": "-pg -mfentry -mnop-mcount "
            "-mrecord-mcount -fno-pie -no-pie", "gcc-pg": "-pg"}
MCOUNT = {"gcc-pg"}  # always the return hook: only the runs with the script apply


SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "ftrace-gdb.py")


def backtrace(exe, lib, mode, work, script=False):
    cmd = ["gdb", "-q", "-nx", "-batch", "-ex", "set startup-with-shell off",
           "-ex", "source " + SCRIPT if script else "echo",
           "-ex", "set environment LD_PRELOAD " + lib,
           "-ex", "set environment FTRACE_EXIT " + mode,
           "-ex", "set environment FTRACE_QUIET 1",
           "-ex", "set environment FTRACE_OUTPUT " + os.path.join(work, "t.ftr"),
           "-ex", "break leaf", "-ex", "run", "-ex", "bt", "-ex", "delete", "-ex", "continue",
           "--args", exe, "2"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=work)
    frames = re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+) \(", p.stdout, re.M)
    return p, frames


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    lib = os.path.join(os.path.abspath(a.bin), "libftrace.so")
    buildcache.use(a.bin)
    if not shutil.which("gdb"):
        print("FAIL gdb is not installed (scripts/setup.sh installs it)")
        return 1
    failed = 0
    with tempfile.TemporaryDirectory(prefix="ftr-gdb-") as work:
        for fs, flags in FLAGSETS.items():
            for opt in ("O0", "O2"):
                exe = os.path.join(work, "tree-%s-%s" % (fs, opt))
                buildcache.run("gcc -%s -g -fno-omit-frame-pointer %s -I%s -o %s %s" % (
                    opt, flags, PROGS, exe, os.path.join(PROGS, "tree.c")), shell=True,
                    check=True)
                for mode, script in (("through", 0), ("hook", 0), ("through", 1), ("hook", 1)):
                    if fs in MCOUNT and not script:
                        continue
                    tag = "%s/%s/%s%s" % (fs, opt, mode, "+script" if script else "")
                    p, frames = backtrace(exe, lib, mode, work, script)
                    ours = [f for f in frames if f.startswith("ftr_")]
                    prog = [f for f in frames if not f.startswith("ftr_")]
                    if script:
                        ok = prog == ["leaf", "mid", "top", "main"] and not ours and \
                            "Python Exception" not in p.stdout + p.stderr
                    elif mode == "through":
                        ok = prog == ["leaf", "mid", "top", "main"] and \
                            set(ours) == {"ftr_tramp_through"}
                    else:
                        ok = prog[:1] == ["leaf"] and "Backtrace stopped" in p.stdout
                    # the program ran on to its end (gdb itself may then lose the race with
                    # the exiting threads: "Couldn't get registers: No such process")
                    ok = ok and "tree " in p.stdout and "tree: done" in p.stdout + p.stderr
                    print("%s %s: %s" % ("ok  " if ok else "FAIL", tag, " <- ".join(frames)))
                    if not ok:
                        failed += 1
                        print("     gdb said: %r" % (p.stdout[-800:] + p.stderr[-400:]))
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
