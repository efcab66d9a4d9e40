#!/usr/bin/env python3
"""ab_builds.py - a traced call's cost under two builds of ftrace-run, side by side.

Builds the shared workloads (../shared/workloads: calls, calls 3, fib, mt) with -pg (mcount:
every return hooked) and -pg -mfentry (called through where DWARF allows), then runs, in
interleaved rounds (each round every configuration once, shuffled), each workload untraced and
under the ftrace-run of each build dir, with a real N and a near-zero one. Reports medians of
the CPU time of the whole process tree (user+sys, the writer thread included) and of the wall
time, per call with start-up subtracted: (median(N) - median(small)) / (calls(N) -
calls(small)), and the ratio of the second build to the first. See docs/performance.md.

    python3 bench/ab_builds.py --a build-old --b build --rounds 7
stdlib only.
"""
import argparse, os, random, statistics, subprocess, sys, tempfile, time

sys.dont_write_bytecode = True
from blocks import blocks_line  # noqa: E402
import tree  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WL = os.path.join(os.path.dirname(REPO), "shared", "workloads")
COMMON = ["-O2", "-g", "-fno-inline", "-fno-omit-frame-pointer"]
FLAGS = {"pg": ["-pg"], "pgfentry": ["-pg", "-mfentry"]}
# workload: (source, args for N, args for the near-zero run, calls(N) - calls(small))
WORKLOADS = {
    "calls": ("calls.c", ["20000000"], ["1"], 20000000 - 1),
    "calls3": ("calls.c", ["6000000", "3"], ["1", "3"], 3 * (6000000 - 1)),
    "fib": ("fib.c", ["30"], ["1"], None),
    "mt": ("mt.c", ["20000000"], ["2"], 20000000 - 2),
}


def fib_calls(n):
    a, b = 1, 1
    for _ in range(n):
        a, b = b, a + b
    return 2 * a - 1  # 2 * fib(n + 1) - 1


def timed(cmd, env):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    status, cpu = tree.wait_tree(p.pid)
    wall = time.monotonic() - t0
    if status != 0:
        sys.exit("failed (%d): %s" % (status, " ".join(cmd)))
    return cpu, wall


def main():
    tree.subreaper()  # the recorder's CPU too
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="first build dir (the reference)")
    ap.add_argument("--b", required=True, help="second build dir")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ftr-ab-")
    exes = {}
    for fl, flags in FLAGS.items():
        for src in sorted({WORKLOADS[w][0] for w in a.workloads.split(",")}):
            exe = os.path.join(work, "%s-%s" % (src[:-2], fl))
            subprocess.run(["gcc"] + COMMON + flags + ["-I", WL, "-o", exe,
                                                    os.path.join(WL, src), "-pthread"], check=True)
            exes[(src, fl)] = exe
    trace = os.path.join(work, "t.ftr")
    runners = {"untraced": None, "a": os.path.join(os.path.abspath(a.a), "ftrace-run"),
               "b": os.path.join(os.path.abspath(a.b), "ftrace-run")}
    configs = [(w, fl, r, size) for w in a.workloads.split(",") for fl in FLAGS
               for r in runners for size in ("N", "small")]
    res = {c: [] for c in configs}
    env = dict(os.environ, FTRACE_QUIET="1")
    for _ in range(a.rounds):
        random.shuffle(configs)
        for c in configs:
            w, fl, r, size = c
            src, big, small, _ = WORKLOADS[w]
            cmd = [exes[(src, fl)]] + (big if size == "N" else small)
            if runners[r]:
                cmd = [runners[r], "-q", "-o", trace] + cmd
            res[c].append(timed(cmd, env))
    print("%-8s %-9s %-9s %10s %10s %8s" % ("workload", "flags", "run", "cpu ns/call",
                                              "wall ns/call", "b/a cpu"))
    for w in a.workloads.split(","):
        calls = WORKLOADS[w][3] or (fib_calls(30) - fib_calls(1))
        for fl in FLAGS:
            per = {}
            for r in runners:
                cpu = [statistics.median(x[i] for x in res[(w, fl, r, "N")]) -
                       statistics.median(x[i] for x in res[(w, fl, r, "small")]) for i in (0, 1)]
                per[r] = [v * 1e9 / calls for v in cpu]
            for r in runners:
                ratio = "%.2f" % ((per["b"][0] - per["untraced"][0]) /
                                  (per["a"][0] - per["untraced"][0])) if r == "b" else ""
                print("%-8s %-9s %-9s %10.1f %10.1f %8s" % (w, fl, r, per[r][0], per[r][1], ratio))
    print(blocks_line(work))
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
