#!/usr/bin/env python3
"""forkexec.py - what a new process costs a program traced by ftrace-run (issue 9, item 13).

Builds bench/forkexec.c with -O2 -pg -mfentry and runs each of its modes (exec, fork,
forkrec, vfork, spawn, system, self: see forkexec.c) untraced and under `ftrace-run -q`, in
interleaved rounds (each round runs every configuration once, in a shuffled order), with N
children and with none. Reports medians over rounds, per child:
  - wall: the program's own time for its loop of N children, divided by N;
  - CPU: user+sys of the whole process tree (os.wait4 of the program, which reaps every child
    it made, so their CPU time is counted), (median(N) - median(0)) / N, i.e. with the fixed
    start-up cost taken out;
and the traced/untraced ratio of each. See docs/performance.md, "Fork and exec".

    python3 bench/forkexec.py --build-dir build                 # 7 rounds, N=300
    python3 bench/forkexec.py --build-dir build --quick         # smoke test, a few seconds
    python3 bench/forkexec.py --build-dir build --modes exec,fork --n 1000

stdlib only. Needs gcc.
"""
import argparse, os, random, statistics, subprocess, sys, tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tree  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ["exec", "fork", "forkrec", "vfork", "spawn", "system", "self"]


def measure(cmd, env):
    """Runs cmd once; returns (wall ns per child as the program measured it, CPU seconds of
    the whole tree: wait4's rusage counts every descendant the program reaped, and tree.py adds
    the recorder's)."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env)
        out = p.stdout.read()
        p.stdout.close()
        status, cpu = tree.wait_tree(p.pid)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            raise SystemExit("%s failed (%d): %s" % (" ".join(cmd), p.returncode,
                                                      err.read().decode()[-500:]))
    return float(out.decode().split()[2]), cpu


def main():
    tree.subreaper()  # the recorder's CPU too
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", required=True, action="append",
                    help="holds ftrace-run and libftrace.so; repeat it to compare builds (before "
                         "and after a change) in the same interleaved rounds")
    ap.add_argument("--work-dir", default="/tmp/ftrace-bench-forkexec")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=300, help="children per run")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--quick", action="store_true", help="3 rounds, N=50")
    ap.add_argument("--also", action="append", default=[], metavar="OPTION",
                    help="also ftrace-run OPTION (of the first build), e.g. --also=--no-libcall")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.n = 3, 50
    modes = [m for m in a.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            ap.error("no mode %s (modes: %s)" % (m, ", ".join(MODES)))
    tools = ["untraced"] + ["ftrace-run" if len(a.build_dir) == 1 else "ftrace-run@%s" % b
                            for b in a.build_dir]
    run_bin = {t: [os.path.join(os.path.abspath(b), "ftrace-run")]
               for t, b in zip(tools[1:], a.build_dir)}
    for opt in a.also:
        tools.append("ftrace-run " + opt)
        run_bin[tools[-1]] = [os.path.join(os.path.abspath(a.build_dir[0]), "ftrace-run"), opt]
    os.makedirs(a.work_dir, exist_ok=True)
    exe = os.path.join(a.work_dir, "forkexec")
    subprocess.run(["gcc", "-O2", "-g", "-pg", "-mfentry", "-o", exe,
                    os.path.join(REPO, "bench", "forkexec.c")], check=True)
    trace = os.path.join(a.work_dir, "forkexec.ftr")
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("FTRACE_") or k == "LD_PRELOAD":
            del env[k]

    configs = [(tool, mode, n) for tool in tools for mode in modes for n in (a.n, 0)]
    samples = {c: [] for c in configs}
    for r in range(a.rounds):
        order = list(configs)
        random.shuffle(order)
        for tool, mode, n in order:
            cmd = [exe, mode, str(n)]
            if tool != "untraced":
                cmd = run_bin[tool] + ["-q", "-o", trace] + cmd
            samples[(tool, mode, n)].append(measure(cmd, env))
        print("round %d/%d done" % (r + 1, a.rounds), file=sys.stderr)

    def med(tool, mode, n, i):
        return statistics.median(s[i] for s in samples[(tool, mode, n)])

    print("N = %d children per run, %d rounds, medians; CPU = user+sys of the whole process "
          "tree, start-up (N = 0) taken out\n" % (a.n, a.rounds))
    head = "| mode | wall µs per child: " + " | ".join(tools) + " | CPU µs per child: " + \
        " | ".join(tools) + " | start-up CPU ms: " + " | ".join(tools) + " |"
    print(head)
    print("|---" * (1 + 3 * len(tools)) + "|")
    for mode in modes:
        w = [med(t, mode, a.n, 0) / 1e3 for t in tools]
        c = [(med(t, mode, a.n, 1) - med(t, mode, 0, 1)) / a.n * 1e6 for t in tools]
        st = [med(t, mode, 0, 1) * 1e3 for t in tools]

        def cells(v, fmt):
            return " | ".join([fmt % v[0]] + [(fmt + " (%.2f×)") % (x, x / v[0] if v[0] else 0)
                                              for x in v[1:]])
        print("| %s | %s | %s | %s |" % (mode, cells(w, "%.0f"), cells(c, "%.0f"),
                                         " | ".join("%.1f" % x for x in st)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
