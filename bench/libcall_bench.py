#!/usr/bin/env python3
"""libcall_bench.py - what a library call costs traced, beside uftrace, in one interleaved run.

The shared workload `mixed` (malloc, free, memcmp, memcpy, qsort, strtod among its functions),
gcc -pg -mfentry, run untraced and under: ftrace-run --no-libcall, ftrace-run (library calls on,
the default), ftrace-run --auto-args, uftrace --no-libcall, uftrace (its default: library calls
on) and uftrace --auto-args. Rounds interleave every configuration in a shuffled order (run_bench.py's
machinery: CPU time = user+sys of the whole process tree, medians), each at N and at a near-zero
N to subtract the fixed start-up cost. Reported: the whole-run CPU and wall time over the
untraced build, and per library call the CPU added by turning them on, i.e.
(cpu(libcalls on) - cpu(--no-libcall)) / library calls, the count being ftrace-run's (calls
traced with them minus without); uftrace's is divided by the same count. --auto-args rows: the
CPU the values add per call (library calls included) over the same tool's default.

    python3 bench/libcall_bench.py --build-dir build [--rounds 5] [--n 20000]
"""
import argparse, os, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench as rb  # noqa: E402


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build-dir", default=os.path.join(rb.REPO, "build"))
    p.add_argument("--work-dir", default="/tmp/ftrace-bench")
    p.add_argument("--workloads-dir", default=os.environ.get(
        "FTR_WORKLOADS", os.path.join(rb.REPO, "..", "shared", "workloads")))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--n", type=int, default=20000, help="mixed's NOBJ (default 20000)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    a.build_dir, a.work_dir = os.path.abspath(a.build_dir), os.path.abspath(a.work_dir)
    a.workloads_dir = os.path.abspath(a.workloads_dir)
    a.quick, a.n = False, {"mixed": a.n}
    os.makedirs(os.path.join(a.work_dir, "out"), exist_ok=True)
    C = rb.Config
    cfgs = [C("none", "pgfentry"), C("ftrace-run", "pgfentry", ["--no-libcall"]),
            C("ftrace-run", "pgfentry"), C("ftrace-run", "pgfentry", ["--auto-args"])]
    if rb.shutil.which("uftrace"):
        cfgs += [C("uftrace", "pgfentry", ["--no-libcall"]), C("uftrace", "pgfentry"),
                 C("uftrace", "pgfentry", ["--auto-args"])]
    minhook = rb.build(a, cfgs, ["mixed"])
    sizes, samples = rb.collect(a, cfgs, ["mixed"], minhook)

    def get(c, s, key):
        return med([x[key] for x in samples.get(f"{c.name}|mixed|{s}", [])])

    def extra(c, key):  # over the untraced build, the fixed cost subtracted
        n, z = get(c, "N", key), get(c, "0", key)
        bn, bz = get(cfgs[0], "N", key), get(cfgs[0], "0", key)
        return (n - z) - (bn - bz)

    fcalls_off = get(cfgs[1], "N", "calls") - get(cfgs[1], "0", "calls")
    fcalls_on = get(cfgs[2], "N", "calls") - get(cfgs[2], "0", "calls")
    nlib = fcalls_on - fcalls_off
    base = get(cfgs[0], "N", "cpu") - get(cfgs[0], "0", "cpu")
    print(f"mixed {sizes['mixed']['N']}: {fcalls_off:.0f} function calls, {nlib:.0f} library "
          f"calls; untraced {base * 1e3:.1f} ms CPU; {a.rounds} rounds, medians")
    print()
    print("| configuration | CPU over untraced (ms) | wall over untraced (ms) | "
          "CPU ns per traced call | CPU ns added per library call | CPU ns added per call "
          "by the values |")
    print("|---|---:|---:|---:|---:|---:|")
    ref = {}
    for c in cfgs[1:]:
        cpu, wall = extra(c, "cpu"), extra(c, "wall")
        ncalls = fcalls_off if c.extra == ["--no-libcall"] else fcalls_on
        lib = vals = "-"
        if c.extra == ["--no-libcall"]:
            ref[c.tool, "off"] = cpu
        elif not c.extra:
            ref[c.tool, "on"] = cpu
            if (c.tool, "off") in ref:
                lib = f"{(cpu - ref[c.tool, 'off']) / nlib * 1e9:.1f}"
        elif (c.tool, "on") in ref:
            vals = f"{(cpu - ref[c.tool, 'on']) / fcalls_on * 1e9:.1f}"
        print(f"| {c.tool} {' '.join(c.extra)} | {cpu * 1e3:.1f} | {wall * 1e3:.1f} | "
              f"{cpu / ncalls * 1e9:.1f} | {lib} | {vals} |")
    print()
    print("building blocks, ns (bench/blocks.c): " +
          ", ".join(rb.sh([os.path.join(a.work_dir, "bin", "blocks")]).splitlines()))


if __name__ == "__main__":
    main()
