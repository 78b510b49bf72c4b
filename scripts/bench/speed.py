#!/usr/bin/python3
"""Speed and scale: short commands against xargs and GNU parallel, start
time by cluster size, the cost of an idle cluster, the master's memory over
many batches, and submission.

    /usr/bin/python3 scripts/bench/speed.py [--rounds 5]
        [--only shortcmd,outside,start,idle,memory,submit] [--bin DIR]
        [--short-n N]

shortcmd  600 x `true`: ftfarm (exec tasks, argv ["true"], task events off)
          on 1 node x 1 and x 2 workers, `xargs -P N -I{} true` and
          `parallel -j N true` over the same 600 lines; each round runs
          every configuration once, in rotating order; ratios are medians
          of per-round ratios ftfarm/xargs (ftfarm's time is the wall time
          of `ftfarm submit --wait`)
outside   the outside check of short commands, as it is run: the cluster
          of config/local.json unchanged but for its state_dir (3 nodes x
          1 worker, task events on), --short-n x `true` (default 600)
          by `ftfarm submit -c CFG BATCH --wait` against `xargs -P2 -I{}
          true` over as many lines, each timed around the whole command
          (the client's start, submit and wait inside), no warm-up batch;
          beside them in the same rounds the shortcmd cluster (1 node x 2
          workers, task events off); reported: medians, the best of each
          group of 3 rounds and its ratio to xargs, and the load average
start     `ftfarm start` of N workers (N = 4, 8, 16, 32, 64) on 8 logical
          nodes of this machine (4 nodes for N = 4), until every worker has
          registered, then `ftfarm stop`
idle      32 workers (8 nodes x 4) and their master left idle: CPU time of
          the launcher's whole process tree over --idle-seconds, as a share
          of one CPU
memory    the master's RSS after each of --batches batches of 200,000
          no-op tasks on 2 workers, and 2.5 s after the last
submit    client-timed `ftfarm submit --wait` of 200,000 no-op tasks on 2
          workers, task events off (from the memory runs; --task-events:
          on, as in a default config)

Every batch's results are checked (each task exactly once, all ok).
Markdown on stdout, progress on stderr.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

TESTS = ("shortcmd", "outside", "start", "idle", "memory", "submit")
CLK = os.sysconf("SC_CLK_TCK")


def nodes(n_nodes, per):
    return [{"name": f"node{i + 1}", "host": "localhost", "workers": per}
            for i in range(n_nodes)]


def timed(cmd, **kw):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, **kw)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{cmd!r}: exit {p.returncode}: {p.stderr}")
    return dt


# ---- short commands ----

def shortcmd(a, bindir, work, out, problems):
    n = 600
    batch, lines = B.short_commands(work, n)
    clusters = {}
    times = {}
    try:
        for w in (1, 2):
            c = B.Cluster(bindir, work, f"sc{w}", nodes(1, w),
                          task_events=False)
            c.start()
            c.submit(batch)         # warm-up
            clusters[w] = c
        configs = [("ftfarm", 1), ("ftfarm", 2), ("xargs", 1), ("xargs", 2),
                   ("parallel", 1), ("parallel", 2)]
        for r in range(a.rounds):
            k = r % len(configs)
            for tool, w in configs[k:] + configs[:k]:
                if tool == "ftfarm":
                    bid, dt = clusters[w].submit(batch)
                    problems += [f"shortcmd w{w}: {p}" for p in
                                 clusters[w].check_results(bid, n)]
                elif tool == "xargs":
                    with open(lines) as f:
                        dt = timed(["xargs", f"-P{w}", "-I{}", "true"],
                                   stdin=f)
                else:
                    with open(lines) as f:
                        dt = timed(["parallel", f"-j{w}", "true"], stdin=f)
                times.setdefault((tool, w), []).append(dt)
                B.log(f"shortcmd round {r + 1}: {tool} x{w}: {dt:.3f} s")
    finally:
        for c in clusters.values():
            c.stop()
    rows = []
    for w in (1, 2):
        for tool in ("ftfarm", "xargs", "parallel"):
            ts = times[(tool, w)]
            ratio = [x / y for x, y in zip(times[("ftfarm", w)],
                                           times[("xargs", w)])]
            rows.append([tool, w, len(ts), B.fmt(B.median(ts)),
                         f"{B.fmt(min(ts))}-{B.fmt(max(ts))}",
                         B.fmt(B.median(ts) / n * 1000, 2),
                         B.fmt(B.median(ratio), 2) if tool == "ftfarm"
                         else ""])
    out.append("### Short commands: 600 x `true`\n")
    out.append(B.table(["tool", "workers", "rounds", "median s", "(range)",
                        "ms per command", "ftfarm/xargs"], rows) + "\n")


# ---- the outside check of short commands ----

def local_cluster(bindir, work, name):
    """The cluster of config/local.json as a user starts it: only its
    state_dir moves into WORK."""
    with open(os.path.join(B.REPO, "config", "local.json")) as f:
        cfg = json.load(f)
    keys = {k: v for k, v in cfg.items()
            if k not in ("name", "state_dir", "nodes")}
    return B.Cluster(bindir, work, name, cfg["nodes"], **keys)


def run_xargs(lines, p):
    with open(lines) as f:
        return timed(["xargs", f"-P{p}", "-I{}", "true"], stdin=f)


def outside(a, bindir, work, out, problems):
    n = a.short_n
    batch, lines = B.short_commands(work, n)
    names = ("local.json", "1 node x 2, no task events", "xargs -P2")
    clusters = {names[0]: local_cluster(bindir, work, "outside"),
                names[1]: B.Cluster(bindir, work, "outside2", nodes(1, 2),
                                    task_events=False)}
    times = {k: [] for k in names}
    loads = [os.getloadavg()[0]]
    try:
        for c in clusters.values():
            c.start()
        for r in range(a.rounds):
            k = r % len(names)
            for name in names[k:] + names[:k]:
                if name in clusters:
                    bid, dt = clusters[name].submit(batch)
                    problems += [f"outside {name}: {p}" for p in
                                 clusters[name].check_results(bid, n)]
                else:
                    dt = run_xargs(lines, 2)
                times[name].append(dt)
            loads.append(os.getloadavg()[0])
            B.log(f"outside round {r + 1}: " + ", ".join(
                f"{x} {times[x][-1]:.3f} s" for x in names) +
                f"; load {loads[-1]:.1f}")
    finally:
        for c in clusters.values():
            c.stop()
    xa = times[names[2]]
    rows = []
    for name in names:
        ts = times[name]
        best3 = [min(ts[i:i + 3]) / min(xa[i:i + 3])
                 for i in range(0, len(ts) - 2, 3)]
        ratio = [x / y for x, y in zip(ts, xa)]
        rows.append([name, len(ts), B.fmt(B.median(ts)),
                     f"{B.fmt(min(ts))}-{B.fmt(max(ts))}",
                     B.fmt(B.median(ratio), 2),
                     ", ".join(B.fmt(x, 2) for x in best3) or "n/a"])
    out.append(f"### The outside check: {n} x `true`, `submit --wait` "
               "against `xargs -P2`\n")
    out.append(f"Load average (1 min) over the rounds: {min(loads):.1f}-"
               f"{max(loads):.1f}.\n")
    out.append(B.table(["", "rounds", "median s", "(range)",
                        "/ xargs (median of rounds)",
                        "/ xargs, best of each 3 rounds"], rows) + "\n")


# ---- start time ----

def start(a, bindir, work, out, problems):
    sizes = [int(x) for x in a.start_sizes.split(",")]
    times = {s: [] for s in sizes}
    floor = {s: [] for s in sizes}
    for r in range(a.rounds):
        for s in (sizes if r % 2 == 0 else sizes[::-1]):
            nn = 4 if s <= 4 else 8
            c = B.Cluster(bindir, work, f"st{s}-{r}", nodes(nn, s // nn),
                          task_events=False, start_timeout_s=120)
            t0 = time.perf_counter()
            try:
                c.start()
                dt = time.perf_counter() - t0
                st = c.status()
                up = sum(w["state"] == "idle" for w in st["workers"])
                if up != s:
                    problems.append(f"start {s}: {up} workers idle")
            finally:
                c.stop()
            times[s].append(dt)
            floor[s].append(mpi_floor(bindir, s + 1))
            B.log(f"start round {r + 1}: {s} workers in {dt:.2f} s; "
                  f"mpirun -np {s + 1}: {floor[s][-1]:.2f} s")
    rows = [[s, len(times[s]), B.fmt(B.median(times[s]), 2),
             f"{B.fmt(min(times[s]), 2)}-{B.fmt(max(times[s]), 2)}",
             B.fmt(B.median(times[s]) / s * 1000, 0),
             B.fmt(B.median(floor[s]), 2),
             B.fmt(B.median(times[s]) / B.median(floor[s]), 2)]
            for s in sizes]
    out.append("### Start: `ftfarm start` until every worker registered\n")
    out.append("Beside it, the floor: `mpirun -np N+1` of a program that "
               "only initialises MPI and leaves (`ftfarm-master --probe`), "
               "one static world of as many processes.\n")
    out.append(B.table(["workers", "rounds", "median s", "(range)",
                        "ms per worker", "mpirun -np N+1 s",
                        "ftfarm/mpirun"], rows) + "\n")


def mpi_floor(bindir, n):
    """Seconds for `mpirun -np N` of MPI_Init and out, with the transports
    `ftfarm start` picks."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    t0 = time.perf_counter()
    subprocess.run(["mpirun.openmpi", "--oversubscribe", "--bind-to", "none",
                    "-np", str(n), "--mca", "btl", "self,vader,tcp",
                    "--mca", "pml", "ob1",
                    os.path.join(bindir, "ftfarm-master"), "--probe"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env, check=True, timeout=300)
    return time.perf_counter() - t0


# ---- idle cost ----

def tree(root):
    """ROOT and its descendants' pids."""
    kids = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def cpu_ticks(pids):
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total


def idle(a, bindir, work, out, problems):
    shares = []
    c = B.Cluster(bindir, work, "idle", nodes(8, 4), task_events=False)
    try:
        c.start()
        time.sleep(3)           # past the start's activity
        launcher = B.read_pid(os.path.join(c.state, "mpirun.pid"))
        for r in range(a.rounds):
            pids = tree(launcher)
            t0, c0 = time.perf_counter(), cpu_ticks(pids)
            time.sleep(a.idle_seconds)
            dt, dc = time.perf_counter() - t0, cpu_ticks(pids) - c0
            shares.append(100.0 * dc / CLK / dt)
            B.log(f"idle round {r + 1}: {len(pids)} processes, "
                  f"{shares[-1]:.2f} % of one CPU")
        st = c.status()
        if sum(w["state"] == "idle" for w in st["workers"]) != 32:
            problems.append(f"idle: not all 32 workers idle: {st['workers']}")
    finally:
        c.stop()
    out.append("### Idle cost: 32 workers (8 nodes x 4) and their master\n")
    out.append(B.table(["rounds", "seconds each", "median % of one CPU",
                        "(range)"],
                       [[len(shares), a.idle_seconds,
                         B.fmt(B.median(shares), 2),
                         f"{B.fmt(min(shares), 2)}-{B.fmt(max(shares), 2)}"]])
               + "\n")


# ---- memory and submission ----

def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


IDLE_TRIM_WAIT = 2.5    # seconds: the master's trim comes 1-2 s after a batch


def memory(a, bindir, work, out, problems, want):
    n = 200000
    batch = B.write_batch(os.path.join(work, "noop.json"), "noop",
                          [{"type": "sleep", "seconds": 0}] * n)
    c = B.Cluster(bindir, work, "mem", nodes(1, 2),
                  task_events=a.task_events)
    rows, rates = [], []
    try:
        c.start()
        master = B.read_pid(os.path.join(c.state, "master.pid"))
        base = rss_kib(master)
        for i in range(a.batches):
            bid, dt = c.submit(batch)
            problems += [f"memory batch {i + 1}: {p}"
                         for p in c.check_results(bid, n)]
            rss = rss_kib(master)
            rates.append(n / dt)
            rows.append([i + 1, B.fmt(rss / 1024.0, 1),
                         B.fmt(dt, 3), B.fmt_int(n / dt),
                         B.fmt(c.summary(bid)["seconds"], 3)])
            B.log(f"memory batch {i + 1}: RSS {rss / 1024:.1f} MiB, "
                  f"{n / dt:,.0f} tasks/s")
        # The master keeps what a batch freed for the next one and gives
        # it back once no batch has finished for a second (or two).
        time.sleep(IDLE_TRIM_WAIT)
        idle_rss = rss_kib(master)
    finally:
        c.stop()
    if "memory" in want:
        out.append(f"### Memory: master RSS over {a.batches} batches of "
                   f"{n:,} no-op tasks (2 workers)\n")
        out.append(f"RSS before the first batch: {base / 1024:.1f} MiB\n")
        out.append(B.table(["batch", "RSS MiB", "client s", "client tasks/s",
                            "master s"], rows) + "\n")
        out.append(f"RSS {IDLE_TRIM_WAIT:g} s after the last batch: "
                   f"{idle_rss / 1024:.1f} MiB\n")
    if "submit" in want:
        out.append(f"### Submission: client-timed `submit --wait` of {n:,} "
                   "no-op tasks, 2 workers, task events "
                   f"{'on' if a.task_events else 'off'}\n")
        out.append(f"Median over {len(rates)} batches: "
                   f"{B.fmt_int(statistics.median(rates))} tasks/s "
                   f"(range {B.fmt_int(min(rates))}-"
                   f"{B.fmt_int(max(rates))})\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default=",".join(TESTS))
    ap.add_argument("--bin", default=os.path.join(B.REPO, "bin"))
    ap.add_argument("--short-n", type=int, default=600,
                    help="commands per batch of the outside check")
    ap.add_argument("--start-sizes", default="4,8,16,32,64")
    ap.add_argument("--idle-seconds", type=float, default=20)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--task-events", action="store_true",
                    help="memory and submit with task events on (the "
                    "default config's setting)")
    a = ap.parse_args()
    want = [x for x in a.only.split(",") if x]
    for x in want:
        if x not in TESTS:
            raise SystemExit(f"unknown test {x}; know {TESTS}")
    B.install_signal_handlers()
    info = B.machine_info()
    work = B.make_workdir("ftfarm-bench-speed-")
    bindir = B.snapshot_bin(a.bin, work)
    binid = B.bin_id(a.bin, bindir)
    out, problems = [], []
    if "shortcmd" in want:
        shortcmd(a, bindir, work, out, problems)
    if "outside" in want:
        outside(a, bindir, work, out, problems)
    if "start" in want:
        start(a, bindir, work, out, problems)
    if "idle" in want:
        idle(a, bindir, work, out, problems)
    if "memory" in want or "submit" in want:
        memory(a, bindir, work, out, problems, want)
    print("## Speed and scale\n")
    print(B.machine_line(info) + f"; {binid}\n")
    print("Command: `/usr/bin/python3 scripts/bench/speed.py "
          f"{' '.join(sys.argv[1:])}".rstrip() + "`\n")
    print("\n".join(out))
    B.print_problems("Problems seen:", problems, 20)
    B.finish(work, a.keep)


if __name__ == "__main__":
    main()
