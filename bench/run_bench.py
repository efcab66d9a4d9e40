#!/usr/bin/env python3
"""run_bench.py - what a traced call costs under ftrace-run, uftrace and a minimal hook.

Builds the shared workloads (../shared/workloads: calls, calls3, fib, mt, mixed) in every
instrumentation flag set, then runs every configuration in interleaved rounds (each round runs
every configuration once, in a shuffled order), each with a real argument N and with a
near-zero one. Measures the CPU time (user+sys of the whole process tree: os.wait4 returns the
child's rusage including every descendant it reaped, so uftrace's recorder and forked program
count, and so do ftrace-run's writer thread), the wall time, and the bytes of trace on disk.
Reports medians over rounds, and per call: (median(N) - median(near-zero)) / (calls(N) -
calls(near-zero)), i.e. with the fixed start-up cost subtracted. See docs/performance.md.

    python3 bench/run_bench.py --build-dir build            # full run, 5 rounds
    python3 bench/run_bench.py --build-dir build --quick    # smoke test, ~15 s
    python3 bench/run_bench.py --build-dir build --disabled --only disabled  # --disabled alone

stdlib only. Needs gcc (clang with --clang) and, for its rows, uftrace.
"""
import argparse, json, os, platform, random, re, shutil, statistics, subprocess, sys, time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tree  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(REPO, "bench")

# peers.md (/work/shared/peers.md), "Cost per traced call": the minimal `__fentry__` +
# return-address hook (rdtsc, 16-byte record, raw write() of full buffers), ns per call.
# Measured on another machine; bench/minhook.c is the same idea measured here, in the same run.
PEERS_MINIMAL_HOOK_NS = {"calls": 36, "calls3": 38, "fib": 40, "mt": 38, "mixed": 34}
TARGET_VS_MINIMAL = 1.5    # (a) a traced call costs at most 1.5x the minimal hook
TARGET_VS_UFTRACE = 0.10   # (b) at most a tenth of uftrace's per-call cost
TARGET_BYTES_PER_CALL = 1  # (d) on fib and calls
# (e) `ftrace-run --disabled` (every site a NOP) runs within noise of the uninstrumented build.
# --disabled runs these builds so; each is compared with baseline(build) run untraced, and with
# the same build run untraced (for -pg builds that one pays glibc's mcount).
DISABLED_BUILDS = ["pgnop", "pfe5", "pg", "pgfentry", "clang_pfe5", "clang_pgfentry"]

COMMON = ["-O2", "-g", "-fno-inline", "-fno-omit-frame-pointer"]
# flag set: (compiler, compile flags, link flags), as in shared/workloads/README.md; the NOP
# variants link without -pg (no gmon); base_nopie is the fair baseline of the non-PIE ones.
FLAGSETS = {
    "base": ("gcc", [], []),
    "base_nopie": ("gcc", ["-fno-pie"], ["-no-pie"]),
    "pg": ("gcc", ["-pg"], ["-pg"]),
    "pgfentry": ("gcc", ["-pg", "-mfentry"], ["-pg"]),
    "pgfentry_nopie": ("gcc", ["-pg", "-mfentry", "-fno-pie"], ["-pg", "-no-pie"]),
    "pgnop": ("gcc", ["-pg", "-mfentry", "-mnop-mcount", "-mrecord-mcount", "-fno-pie"], ["-no-pie"]),
    "pfe5": ("gcc", ["-fpatchable-function-entry=5"], []),
    "clang_base": ("clang", [], []),
    "clang_pg": ("clang", ["-pg"], ["-pg"]),
    "clang_pgfentry": ("clang", ["-pg", "-mfentry"], ["-pg"]),
    "clang_pfe5": ("clang", ["-fpatchable-function-entry=5"], []),
}


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


# name: source, default N, --quick N, near-zero N, argv(N), exact calls(N) with main (None: ask
# ftrace-run). mt: main, 2 workers, N/2 leaf calls each.
WORKLOADS = {
    "calls": ("calls.c", 10_000_000, 300_000, 1, lambda n: [str(n)], lambda n: n + 1),
    "calls3": ("calls.c", 3_000_000, 100_000, 1, lambda n: [str(n), "3"], lambda n: 3 * n + 1),
    "fib": ("fib.c", 33, 24, 1, lambda n: [str(n)], lambda n: 2 * fib(n + 1)),
    "mt": ("mt.c", 10_000_000, 300_000, 2, lambda n: [str(n)], lambda n: 2 * (n // 2) + 3),
    "mixed": ("mixed.c", 20_000, 600, 1, lambda n: [str(n)], None),
}


class Config:
    def __init__(self, tool, build, extra=(), env=None):
        self.tool, self.build, self.extra, self.env = tool, build, list(extra), env or {}
        label = "".join(f" {k.replace('FTRACE_', '')}={v}" for k, v in self.env.items())
        self.name = f"{tool}{''.join(' ' + x for x in self.extra)}{label}:{build}"


def make_configs(a):
    untraced = ["base", "base_nopie", "pg", "pgfentry", "pgnop", "pfe5"]
    traced = ["pgfentry", "pgfentry_nopie", "pg", "pgnop", "pfe5"]
    if a.clang:
        untraced += ["clang_base", "clang_pg", "clang_pgfentry", "clang_pfe5"]
        traced += ["clang_pg", "clang_pgfentry", "clang_pfe5"]
    cfgs = [Config("none", b) for b in untraced] + [Config("ftrace-run", b) for b in traced]
    for kv in a.ftrace_env:  # e.g. FTRACE_BUFSIZE=256: a tuning variant beside the default
        cfgs.append(Config("ftrace-run", "pgfentry", env=dict([kv.split("=", 1)])))
    if a.disabled:  # every site a NOP: compared with the uninstrumented build (DISABLED_BUILDS)
        cfgs += [Config("ftrace-run", b, ["--disabled"]) for b in DISABLED_BUILDS
                 if a.clang or not b.startswith("clang")]
    if a.values:  # arg1 and the return value of every call (docs/arguments.md), both tools
        cfgs.append(Config("ftrace-run", "pgfentry", ["-A", "*@arg1", "-R", "*"]))
        if shutil.which("uftrace"):
            cfgs.append(Config("uftrace", "pgfentry", ["-A", ".*@arg1", "-R", ".*@retval"]))
    cfgs.append(Config("minhook", "pgfentry"))
    if shutil.which("uftrace"):
        cfgs.append(Config("uftrace", "pgfentry"))
        if a.uftrace_no_libcall:
            cfgs.append(Config("uftrace", "pgfentry", ["--no-libcall"]))
    else:
        print("warning: uftrace not found, its rows are left out", file=sys.stderr)
    if a.only:  # the references, and what a kept --disabled run is compared with, stay
        keep = {"none:base", "ftrace-run:pgfentry"}
        for c in cfgs:
            if re.search(a.only, c.name) and c.extra == ["--disabled"]:
                keep |= {"none:" + baseline(c.build), "none:" + c.build}
        cfgs = [c for c in cfgs if re.search(a.only, c.name) or c.name in keep]
    return cfgs


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def build(a, cfgs, wls):
    bindir = os.path.join(a.work_dir, "bin")
    os.makedirs(bindir, exist_ok=True)
    builds = sorted({c.build for c in cfgs})
    for w in wls:
        src = os.path.join(a.workloads_dir, WORKLOADS[w][0])
        for b in builds:
            cc, cflags, lflags = FLAGSETS[b]
            exe = exe_path(a, w, b)
            if os.path.exists(exe) and os.path.getmtime(exe) >= os.path.getmtime(src):
                continue
            obj = exe + ".o"
            subprocess.run([cc, *COMMON, *cflags, "-I", a.workloads_dir, "-c", "-o", obj, src], check=True)
            subprocess.run([cc, *lflags, "-o", exe, obj, "-pthread"], check=True)
    mh = os.path.join(bindir, "minhook.so")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-mgeneral-regs-only", "-o", mh,
                    os.path.join(HERE, "minhook.c")], check=True)
    subprocess.run(["gcc", "-O2", "-mno-red-zone", "-o", os.path.join(bindir, "blocks"),
                    os.path.join(HERE, "blocks.c")], check=True)
    return mh


def exe_path(a, w, b):
    stem = os.path.splitext(WORKLOADS[w][0])[0]
    return os.path.join(a.work_dir, "bin", f"{stem}_{b}")


def du(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def remove(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.unlink(path)


def run_one(a, cfg, w, n, minhook):
    """Run once; return cpu s, wall s, trace bytes, calls seen by ftrace-run, exit status."""
    argv = [exe_path(a, w, cfg.build)] + WORKLOADS[w][4](n)
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith(("FTRACE_", "MINHOOK_"))}
    env["LC_ALL"] = "C"
    env.update(cfg.env)
    out = os.path.join(a.work_dir, "out", "trace")
    err = os.path.join(a.work_dir, "out", "stderr")
    if cfg.tool == "ftrace-run":
        cmd = [os.path.join(a.build_dir, "ftrace-run"), "-o", out] + cfg.extra + argv
    elif cfg.tool.startswith("uftrace"):
        cmd = ["uftrace", "record", "-d", out] + cfg.extra + argv
    elif cfg.tool == "minhook":
        cmd, env["LD_PRELOAD"], env["MINHOOK_OUTPUT"] = argv, minhook, out
    else:
        cmd, out = argv, None
    fa = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
          (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
          (os.POSIX_SPAWN_OPEN, 2, err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)]
    exe = shutil.which(cmd[0]) or cmd[0]
    t0 = time.perf_counter()
    pid = os.posix_spawn(exe, cmd, env, file_actions=fa)
    status, cpu = tree.wait_tree(pid)
    wall = time.perf_counter() - t0
    res = {"cpu": cpu, "wall": wall, "status": status,
           "bytes": du(out) if out and os.path.exists(out) else None}
    with open(err, errors="replace") as f:
        text = f.read()
    m = re.search(r"ftrace-run: (\d+) calls traced", text)
    res["calls"] = int(m.group(1)) if m else None
    res["lost"] = bool(re.search(r"lost|LOST", text))
    if status != 0:
        res["stderr"] = text[-500:]
    if out:
        remove(out)
    remove("gmon.out")
    os.sync()  # the next run must not pay for this one's writeback
    return res


def collect(a, cfgs, wls, minhook):
    sizes = {w: {"N": a.n.get(w, WORKLOADS[w][2] if a.quick else WORKLOADS[w][1]),
                 "0": WORKLOADS[w][3]} for w in wls}
    jobs = [(c, w, s) for c in cfgs for w in wls for s in ("N", "0")]
    samples = {}
    rng = random.Random(a.seed)
    print(f"{len(jobs)} runs per round, {a.rounds} rounds", file=sys.stderr)
    for c, w, s in jobs:  # warm-up: page cache, loader caches; not measured
        run_one(a, c, w, sizes[w]["0"], minhook)
    for r in range(a.rounds):
        t0 = time.time()
        order = jobs[:]
        rng.shuffle(order)
        for c, w, s in order:
            res = run_one(a, c, w, sizes[w][s], minhook)
            if res["status"] != 0:
                print(f"  {c.name} {w} {s}: exit status {res['status']}: {res.get('stderr', '')}",
                      file=sys.stderr)
            samples.setdefault(f"{c.name}|{w}|{s}", []).append(res)
        print(f"round {r + 1}/{a.rounds}: {time.time() - t0:.0f} s", file=sys.stderr)
    return sizes, samples


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def analyse(cfgs, wls, sizes, samples):
    """Per config and workload: per-call cpu/wall ns, fixed costs, bytes per call, spread."""
    calls, notes = {}, []
    for w in wls:
        f = WORKLOADS[w][5]
        seen = {s: med([x["calls"] for k, v in samples.items() if k.startswith("ftrace-run:")
                        and k.endswith(f"|{w}|{s}") for x in v]) for s in ("N", "0")}
        for s in ("N", "0"):
            exact = f(sizes[w][s]) if f else None
            if exact and seen[s] and seen[s] != exact:
                notes.append(f"{w} {s}: ftrace-run counted {seen[s]:.0f} calls, expected {exact}")
            calls[w, s] = seen[s] if seen[s] else exact
    r = {}
    for c in cfgs:
        for w in wls:
            sN, s0 = samples.get(f"{c.name}|{w}|N", []), samples.get(f"{c.name}|{w}|0", [])
            if not sN or not s0 or not calls.get((w, "N")) or any(x["status"] for x in sN + s0):
                continue
            dc = calls[w, "N"] - (calls[w, "0"] or 0)
            cpuN, cpu0 = med([x["cpu"] for x in sN]), med([x["cpu"] for x in s0])
            wallN, wall0 = med([x["wall"] for x in sN]), med([x["wall"] for x in s0])
            bN, b0 = med([x["bytes"] for x in sN]), med([x["bytes"] for x in s0])
            cpus = [x["cpu"] for x in sN]
            r[c.name, w] = {
                "cpu_ns": (cpuN - cpu0) / dc * 1e9, "wall_ns": (wallN - wall0) / dc * 1e9,
                "cpu0_ms": cpu0 * 1e3, "wall0_ms": wall0 * 1e3, "cpuN_s": cpuN, "wallN_s": wallN,
                "spread": (max(cpus) - min(cpus)) / 2 / cpuN if cpuN else 0, "dc": dc,
                "bpc": (bN - b0) / dc if bN is not None and b0 is not None else None,
                "lost": sum(x["lost"] for x in sN + s0)}
    return calls, notes, r


def baseline(b):
    """The uninstrumented build that b is compared with: same compiler, same PIE-ness."""
    return ("clang_base" if b.startswith("clang") else
            "base_nopie" if b in ("pgnop", "pgfentry_nopie") else "base")


def disabled_rows(cfgs, wls, r):
    """(e): ftrace-run --disabled against the uninstrumented build, per call and whole run."""
    dis = [c for c in cfgs if "--disabled" in c.extra]
    if not dis:
        return []
    L = ["### --disabled against the uninstrumented build", "",
         "Per call: CPU ns per call over the uninstrumented baseline (fixed cost subtracted); in "
         "brackets the noise, half the range of the baseline's own CPU(N) samples in ns per call, "
         "and the same build run untraced (for -pg builds: glibc's mcount). Whole run: median "
         "CPU(N) and wall(N) over the baseline's, start-up included.", "",
         "| configuration (baseline) | " + " | ".join(wls) + " |", "|---|" + "---|" * len(wls)]
    for c in dis:
        bn = "none:" + baseline(c.build)
        cells = []
        for w in wls:
            x, b, u = r.get((c.name, w)), r.get((bn, w)), r.get(("none:" + c.build, w))
            if not x or not b:
                cells.append("–")
                continue
            noise = b["spread"] * b["cpuN_s"] / b["dc"] * 1e9
            cell = f"{x['cpu_ns'] - b['cpu_ns']:+.2f} (±{noise:.2f}"
            if u and c.build != baseline(c.build):
                cell += f"; untraced {u['cpu_ns'] - b['cpu_ns']:+.2f}"
            cells.append(cell + ")")
        L.append(f"| {c.name} ({baseline(c.build)}) per call | " + " | ".join(cells) + " |")
        cells = []
        for w in wls:
            x, b = r.get((c.name, w)), r.get((bn, w))
            cells.append(f"{x['cpuN_s'] / b['cpuN_s']:.2f} / {x['wallN_s'] / b['wallN_s']:.2f}"
                         if x and b else "–")
        L.append(f"| {c.name} ({baseline(c.build)}) whole run, CPU / wall | "
                 + " | ".join(cells) + " |")
    return L + [""]


def fmt(x, d=1):
    return "–" if x is None else f"{x:.{d}f}"


def table(title, cfgs, wls, cell, r, note=""):
    rows = [f"### {title}", ""] + ([note, ""] if note else [])
    rows += ["| configuration | " + " | ".join(wls) + " |", "|---|" + "---|" * len(wls)]
    for c in cfgs:
        cells = [cell(r[c.name, w], w) if (c.name, w) in r else "–" for w in wls]
        if any(x != "–" for x in cells):
            rows.append(f"| {c.name} | " + " | ".join(cells) + " |")
    return rows + [""]


def ratio_rows(wls, r, title, num, den_fn, target, better="≤"):
    rows = []
    for w in wls:
        a = r.get((num, w))
        d = den_fn(w)
        rows.append(fmt(a["cpu_ns"] / d, 2) if a and d else "–")
    return f"| {title} ({better} {target}) | " + " | ".join(rows) + " |"


def report(a, cfgs, wls, sizes, calls, notes, r, machine):
    get = lambda name, w: r[name, w]["cpu_ns"] if (name, w) in r else None
    L = ["# ftrace-run benchmark", "", "## Machine and run", ""]
    L += [f"- {k}: {v}" for k, v in machine.items()]
    L += [f"- rounds: {a.rounds} (interleaved, shuffled order, seed {a.seed}); medians",
          "- N per workload: " + ", ".join(f"{w} {sizes[w]['N']} ({calls[w, 'N']:.0f} calls)"
                                           for w in wls),
          "- near-zero run: " + ", ".join(f"{w} {sizes[w]['0']}" for w in wls), ""]
    if notes:
        L += ["Call-count warnings:", ""] + [f"- {n}" for n in notes] + [""]
    L += ["## Results", ""]
    L += table("CPU ns per call (user+sys of the process tree; fixed cost subtracted)", cfgs,
               wls, lambda x, w: f"{x['cpu_ns']:.1f} ±{100 * x['spread']:.0f}%", r,
               "± is half the range of the CPU(N) samples, relative to their median.")
    L += table("Wall ns per call (fixed cost subtracted)", cfgs, wls,
               lambda x, w: f"{x['wall_ns']:.1f}", r)
    L += table("Fixed start-up cost: CPU ms of the near-zero run", cfgs, wls,
               lambda x, w: f"{x['cpu0_ms']:.1f}", r)
    L += table("Fixed start-up cost: wall ms of the near-zero run", cfgs, wls,
               lambda x, w: f"{x['wall0_ms']:.1f}", r)
    traced = [c for c in cfgs if c.tool != "none"]
    L += table("Trace bytes on disk per call", traced, wls,
               lambda x, w: fmt(x["bpc"], 2) + (" (lost!)" if x["lost"] else ""), r)
    # instrumentation alone: an untraced instrumented build minus its baseline
    L += ["### Instrumentation cost, untraced: CPU ns per call over the baseline build", "",
          "| build (baseline) | " + " | ".join(wls) + " |", "|---|" + "---|" * len(wls)]
    for c in cfgs:
        if c.tool != "none" or c.build.endswith("base") or c.build == "base_nopie":
            continue
        basename = baseline(c.build)
        cells = [fmt(get(c.name, w) - get("none:" + basename, w), 2)
                 if get(c.name, w) is not None and get("none:" + basename, w) is not None
                 else "–" for w in wls]
        L.append(f"| {c.build} ({basename}) | " + " | ".join(cells) + " |")
    L += [""] + disabled_rows(cfgs, wls, r)
    L += ["### Ratios (CPU per call, ftrace-run on the pgfentry build)", "",
          "| ratio (target) | " + " | ".join(wls) + " |", "|---|" + "---|" * len(wls)]
    fr = "ftrace-run:pgfentry"
    L.append(ratio_rows(wls, r, "ftrace-run / peers.md minimal hook", fr,
                        lambda w: PEERS_MINIMAL_HOOK_NS.get(w), TARGET_VS_MINIMAL))
    L.append(ratio_rows(wls, r, "ftrace-run / minhook measured here", fr,
                        lambda w: get("minhook:pgfentry", w), TARGET_VS_MINIMAL))
    L.append(ratio_rows(wls, r, "ftrace-run / uftrace", fr,
                        lambda w: get("uftrace:pgfentry", w), TARGET_VS_UFTRACE))
    for c in cfgs:
        if c.tool == "ftrace-run" and c.name != fr and not c.extra:
            L.append(ratio_rows(wls, r, f"{c.name} / {fr}", c.name, lambda w: get(fr, w), "–", ""))
    return "\n".join(L) + "\n"


def machine_info(a):
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    # the commit ftrace-run was built from: the build's source tree, not this script's
    src = REPO
    try:
        with open(os.path.join(a.build_dir, "CMakeCache.txt")) as f:
            src = next(l.split("=", 1)[1].strip() for l in f
                       if l.startswith("CMAKE_HOME_DIRECTORY:"))
    except (OSError, StopIteration):
        pass
    rev = sh(["git", "-C", src, "rev-parse", "--short", "HEAD"])
    dirty = " (+ uncommitted changes)" if sh(["git", "-C", src, "status", "--porcelain",
                                              "--untracked-files=no", "--", ".", ":!docs",
                                              ":!bench/*.py"]) else ""
    info = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cpu": f"{cpu}, {os.cpu_count()} cpus",
            "kernel": platform.release(), "gcc": sh(["gcc", "--version"]).splitlines()[0],
            "uftrace": sh(["uftrace", "--version"]) or "not found",
            "ftrace-run": f"{rev}{dirty}, {a.build_dir} (from {src})",
            "trace files on": f"{a.work_dir} ({sh(['stat', '-f', '-c', '%T', a.work_dir])})",
            "command": "python3 bench/run_bench.py " + " ".join(sys.argv[1:])}
    blocks = sh([os.path.join(a.work_dir, "bin", "blocks")]).splitlines()
    info["building blocks, ns (bench/blocks.c)"] = ", ".join(blocks)
    if a.clang:
        info["clang"] = sh(["clang", "--version"]).splitlines()[0]
    return info


def main():
    tree.subreaper()  # the recorder's CPU too
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build-dir", default=os.path.join(REPO, "build"),
                   help="where ftrace-run and libftrace.so are (default: build/)")
    p.add_argument("--work-dir", default="/tmp/ftrace-bench", help="workload builds and traces")
    p.add_argument("--workloads-dir", default=os.environ.get(
        "FTR_WORKLOADS", os.path.join(REPO, "..", "shared", "workloads")))
    p.add_argument("--results-dir", default=os.path.join(HERE, "results"))
    p.add_argument("--rounds", type=int, help="default 5, or 2 with --quick")
    p.add_argument("--quick", action="store_true", help="small N, 2 rounds: a smoke test")
    p.add_argument("--clang", action="store_true", help="also the clang builds")
    p.add_argument("--uftrace-no-libcall", action="store_true", help="also uftrace --no-libcall")
    p.add_argument("--ftrace-env", action="append", default=[], metavar="VAR=VALUE",
                   help="also run ftrace-run on pgfentry with this variable set (repeatable)")
    p.add_argument("--values", action="store_true",
                   help="also -A '*@arg1' -R '*' (ftrace-run) beside uftrace -A/-R, every call")
    p.add_argument("--disabled", action="store_true",
                   help="also ftrace-run --disabled on the NOP and -pg builds, against the "
                        "uninstrumented build")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset")
    p.add_argument("--only", help="regex: configurations to run (plus the two references)")
    p.add_argument("--n", action="append", default=[], metavar="WL=N", help="override N")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    a.rounds = a.rounds or (2 if a.quick else 5)
    a.n = {k: int(v) for k, v in (x.split("=", 1) for x in a.n)}
    a.build_dir = os.path.abspath(a.build_dir)
    a.work_dir = os.path.abspath(a.work_dir)
    a.workloads_dir = os.path.abspath(a.workloads_dir)
    if not os.access(os.path.join(a.build_dir, "ftrace-run"), os.X_OK):
        sys.exit(f"no ftrace-run in {a.build_dir}: build it first, e.g.\n"
                 f"  cmake -S {REPO} -B {a.build_dir} -DCMAKE_BUILD_TYPE=RelWithDebInfo && "
                 f"cmake --build {a.build_dir} -j2")
    wls = [w for w in a.workloads.split(",") if w]
    for w in wls:
        if w not in WORKLOADS:
            sys.exit(f"unknown workload {w}")
    cfgs = make_configs(a)
    os.makedirs(os.path.join(a.work_dir, "out"), exist_ok=True)
    os.makedirs(os.path.join(a.work_dir, "run"), exist_ok=True)
    minhook = build(a, cfgs, wls)
    os.chdir(os.path.join(a.work_dir, "run"))  # gmon.out of the -pg builds lands here
    machine = machine_info(a)
    t0 = time.time()
    sizes, samples = collect(a, cfgs, wls, minhook)
    calls, notes, r = analyse(cfgs, wls, sizes, samples)
    text = report(a, cfgs, wls, sizes, calls, notes, r, machine)
    text += f"\nTotal time {time.time() - t0:.0f} s.\n"
    print(text)
    os.makedirs(a.results_dir, exist_ok=True)
    stem = os.path.join(a.results_dir, time.strftime("bench-%Y%m%d-%H%M%S"))
    with open(stem + ".md", "w") as f:
        f.write(text)
    with open(stem + ".json", "w") as f:
        json.dump({"machine": machine, "sizes": sizes, "calls": {f"{w}|{s}": v for (w, s), v in
                   calls.items()}, "samples": samples,
                   "results": {f"{c}|{w}": v for (c, w), v in r.items()}}, f, indent=1)
    print(f"written {stem}.md and .json", file=sys.stderr)


if __name__ == "__main__":
    main()
