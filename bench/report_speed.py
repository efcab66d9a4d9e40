#!/usr/bin/env python3
"""report_speed.py - how fast ftrace-report renders big traces, next to uftrace.

Builds the shared workloads (/work/shared/workloads or --workloads) with -pg -mfentry, records
each once with ftrace-run and once with `uftrace record` (the same binary and arguments), then
times every view on both recordings, best of --runs:

    view      ftrace-report               uftrace 0.13
    graph     ftrace-report T             uftrace replay -d D
    summary   ftrace-report --summary T   uftrace report -d D
    chrome    ftrace-report --chrome T    uftrace dump --chrome -d D
    folded    ftrace-report --folded T    uftrace dump --flame-graph -d D

Output goes to /dev/null. Reports wall time, events per second (the events of the trace:
entries + exits, from the END record of ftrace-run's trace; the same program makes the same
calls under both tracers), the ratio to uftrace, and the peak resident memory of the
reporting process (GNU time's %M, else os.wait4's ru_maxrss). See the section
"Speed and memory" of docs/report.md.

    python3 bench/report_speed.py --build-dir build                # ~100 M events per trace
    python3 bench/report_speed.py --build-dir build --quick        # smoke test, ~2 M events
    python3 bench/report_speed.py --build-dir build --json out.json

stdlib only. Needs gcc; the uftrace rows need uftrace (left out otherwise).
"""
import argparse, json, os, re, shutil, subprocess, sys, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ["-O2", "-g", "-fno-inline", "-fno-omit-frame-pointer", "-pg", "-mfentry"]

# name: (source, argv, --quick argv)
WORKLOADS = {
    "calls": ("calls.c", ["50000000"], ["1000000"]),      # 100 M events
    "fib": ("fib.c", ["35"], ["20"]),                     # 60 M events
}

VIEWS = [
    ("graph", [], ["replay"]),
    ("summary", ["--summary"], ["report"]),
    ("chrome", ["--chrome"], ["dump", "--chrome"]),
    ("folded", ["--folded"], ["dump", "--flame-graph"]),
]

TARGET_RATIO = 3.0        # at least 3x uftrace's speed, each view
TARGET_GRAPH_MIB = 64     # peak memory of the graph view


GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def run_timed(cmd, cwd=None):
    """Runs cmd with stdout to /dev/null: (wall seconds, peak RSS in KiB, exit status).
    The peak comes from GNU time when there is one: a child forked from this Python process
    would otherwise count Python's own pages, touched before the exec, in its ru_maxrss."""
    rss_file = None
    if GNU_TIME:
        fd, rss_file = tempfile.mkstemp(prefix="rss_")
        os.close(fd)
        cmd = [GNU_TIME, "-f", "%M", "-o", rss_file] + cmd
    with open(os.devnull, "wb") as null:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=null, stderr=subprocess.PIPE, cwd=cwd)
        err = p.stderr.read().decode(errors="replace")
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit("failed (%d): %s\n%s" % (code, " ".join(cmd), err))
    rss = ru.ru_maxrss
    if rss_file:
        with open(rss_file) as f:
            rss = int(f.read().split()[-1])
        os.unlink(rss_file)
    return wall, rss, code


def events_of(report, trace):
    out = subprocess.run([report, "--info", "--no-pager", trace], capture_output=True,
                         text=True, check=True).stdout
    m = re.findall(r"events +(\d+) recorded", out)
    if not m:
        sys.exit("no END record in %s:\n%s" % (trace, out))
    return sum(int(x) for x in m)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", required=True, help="build tree with ftrace-run, ftrace-report")
    ap.add_argument("--workloads", default=os.path.join(os.path.dirname(REPO), "shared",
                                                        "workloads"))
    ap.add_argument("--work", help="directory for binaries and traces (default: a temporary one)")
    ap.add_argument("--runs", type=int, default=3, help="runs per measurement (best is kept)")
    ap.add_argument("--quick", action="store_true", help="small traces: a smoke test")
    ap.add_argument("--only", help="comma-separated workloads (default: all)")
    ap.add_argument("--no-uftrace", action="store_true")
    ap.add_argument("--json", help="write the figures here too")
    a = ap.parse_args()

    run_bin = os.path.join(a.build_dir, "ftrace-run")
    report = os.path.join(a.build_dir, "ftrace-report")
    for b in (run_bin, report):
        if not os.access(b, os.X_OK):
            sys.exit("%s not found: build first" % b)
    uftrace = None if a.no_uftrace else shutil.which("uftrace")
    work = a.work or tempfile.mkdtemp(prefix="report_speed_")
    os.makedirs(work, exist_ok=True)
    names = a.only.split(",") if a.only else list(WORKLOADS)

    results = []
    for name in names:
        src, argv, qargv = WORKLOADS[name]
        argv = qargv if a.quick else argv
        exe = os.path.join(work, name)
        subprocess.run(["gcc"] + FLAGS + ["-I", a.workloads, "-o", exe,
                        os.path.join(a.workloads, src)], check=True)
        trace = os.path.join(work, name + ".ftr")
        subprocess.run([run_bin, "-q", "-o", trace, exe] + argv, check=True,
                       stdout=subprocess.DEVNULL)
        nev = events_of(report, trace)
        udir = os.path.join(work, name + ".uftrace")
        if uftrace:
            shutil.rmtree(udir, ignore_errors=True)
            subprocess.run([uftrace, "record", "-d", udir, exe] + argv, check=True,
                           stdout=subprocess.DEVNULL)
        size = os.path.getsize(trace)
        usize = sum(os.path.getsize(os.path.join(udir, f)) for f in os.listdir(udir)) \
            if uftrace else 0
        print("%s %s: %d events; trace %.1f MiB (uftrace: %.1f MiB)"
              % (name, " ".join(argv), nev, size / 2**20, usize / 2**20), flush=True)
        for view, fargs, uargs in VIEWS:
            best = min((run_timed([report, "--no-pager"] + fargs + [trace])
                        for _ in range(a.runs)), key=lambda r: r[0])
            row = {"workload": name, "args": argv, "events": nev, "view": view,
                   "ftrace_s": best[0], "ftrace_rss_kib": best[1],
                   "ftrace_evps": nev / best[0]}
            if uftrace:
                ub = min((run_timed([uftrace] + uargs + ["-d", udir]) for _ in range(a.runs)),
                         key=lambda r: r[0])
                row.update({"uftrace_s": ub[0], "uftrace_rss_kib": ub[1],
                            "uftrace_evps": nev / ub[0], "ratio": ub[0] / best[0]})
            results.append(row)
            print("  %-8s ftrace-report %6.2f s %7.1f M ev/s %6.1f MiB" %
                  (view, best[0], row["ftrace_evps"] / 1e6, best[1] / 1024), end="")
            if uftrace:
                print("   uftrace %6.2f s %6.1f M ev/s %6.1f MiB   x%.1f" %
                      (row["uftrace_s"], row["uftrace_evps"] / 1e6, row["uftrace_rss_kib"] / 1024,
                       row["ratio"]), end="")
            print(flush=True)

    # the markdown table of docs/report.md
    print()
    print("| workload | events | view | ftrace-report | M events/s | peak RSS | uftrace 0.13 "
          "| M events/s | peak RSS | speed-up |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    fails = []
    for r in results:
        u = ("%.2f s | %.1f | %.0f MiB | **%.1fx**" % (r["uftrace_s"], r["uftrace_evps"] / 1e6,
                                                      r["uftrace_rss_kib"] / 1024, r["ratio"])
             if "ratio" in r else "- | - | - | -")
        print("| %s %s | %.1f M | %s | %.2f s | %.1f | %.1f MiB | %s |" %
              (r["workload"], " ".join(r["args"]), r["events"] / 1e6, r["view"], r["ftrace_s"],
               r["ftrace_evps"] / 1e6, r["ftrace_rss_kib"] / 1024, u))
        if "ratio" in r and r["ratio"] < TARGET_RATIO:
            fails.append("%s/%s: %.1fx uftrace (target %.0fx)" % (r["workload"], r["view"],
                                                                r["ratio"], TARGET_RATIO))
        if r["view"] == "graph" and r["ftrace_rss_kib"] / 1024 > TARGET_GRAPH_MIB:
            fails.append("%s/graph: %.1f MiB peak (target %d MiB)" % (
                r["workload"], r["ftrace_rss_kib"] / 1024, TARGET_GRAPH_MIB))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "targets": {"ratio": TARGET_RATIO,
                                                       "graph_mib": TARGET_GRAPH_MIB}}, f,
                      indent=1)
    print()
    print("targets: " + ("all met" if not fails else "MISSED: " + "; ".join(fails)))
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
