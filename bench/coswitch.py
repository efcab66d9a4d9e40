#!/usr/bin/env python3
"""coswitch.py - what a coroutine switch costs under ftrace-run, for 10, 1 000 and 100 000
coroutines each suspended 3 traced frames deep (bench/coswitch.c), untraced and traced by each
build dir given, in interleaved rounds; medians of the program's own ns per switch (set-up
excluded) and of the whole run's CPU time (user+sys, the writer thread included).

    python3 bench/coswitch.py --build build [--build build-old] [--rounds 5]
stdlib only. See docs/performance.md.
"""
import argparse, os, random, statistics, subprocess, sys, tempfile

sys.dont_write_bytecode = True
from blocks import blocks_line  # noqa: E402
import tree  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {10: 50000, 1000: 500, 100000: 3}  # coroutines: rounds (5 x 10^5 resumes, 3 x 10^5)


def run(cmd, env):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                         text=True)
    out = p.stdout.read()
    status, cpu = tree.wait_tree(p.pid)
    if status != 0:
        sys.exit("failed (%d): %s" % (status, " ".join(cmd)))
    return float(out.split()[0]), cpu


def main():
    tree.subreaper()  # the recorder's CPU too
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", action="append", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--flags", default="-pg -mfentry")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)),
                    help="coroutine counts to run (a build from before parking takes minutes "
                         "per run of 100000)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ftr-cosw-")
    exe = os.path.join(work, "coswitch")
    subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer"] + a.flags.split() +
                   ["-o", exe, os.path.join(HERE, "coswitch.c")], check=True)
    runners = [("untraced", None)] + [(b, os.path.join(os.path.abspath(b), "ftrace-run"))
                                      for b in a.build]
    sizes = [int(x) for x in a.sizes.split(",")]
    configs = [(n, r) for n in sizes for r in range(len(runners))]
    res = {c: [] for c in configs}
    env = dict(os.environ, FTRACE_QUIET="1")
    for _ in range(a.rounds):
        random.shuffle(configs)
        for n, r in configs:
            cmd = [exe, str(n), str(SIZES[n])]
            if runners[r][1]:
                cmd = [runners[r][1], "-q", "-o", os.path.join(work, "t.ftr")] + cmd
            res[(n, r)].append(run(cmd, env))
    print("%-11s %-12s %12s %12s" % ("coroutines", "run", "ns/switch", "cpu s"))
    for n in sizes:
        for r, (name, _) in enumerate(runners):
            ns = statistics.median(x[0] for x in res[(n, r)])
            cpu = statistics.median(x[1] for x in res[(n, r)])
            print("%-11d %-12s %12.1f %12.2f" % (n, name, ns, cpu))
    print(blocks_line(work))
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
