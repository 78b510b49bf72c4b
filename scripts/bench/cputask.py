#!/usr/bin/python3
"""CPU time per no-op task of two builds side by side: the master's and the
workers' (user + system, from /proc/PID/stat), which a loaded machine
disturbs less than wall time.

    /usr/bin/python3 scripts/bench/cputask.py --old DIR [--new DIR]
        [--rounds 5] [--tasks 200000] [--workers 2]

DIR is a bin/ directory as `make` builds it.  Each build gets one cluster
(1 node x --workers workers, task_events false), a warm-up batch, then
every round submits --tasks {"type":"sleep","seconds":0} tasks with
`ftfarm submit --wait` to each build, the order alternating.  Every batch
is checked (each task exactly once, all ok).  Markdown on stdout: medians
of CPU microseconds per task and of the per-round ratios new/old.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

NOOP = {"type": "sleep", "seconds": 0}
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def pids(c):
    st = c.status()
    master = B.read_pid(os.path.join(c.state, "master.pid"))
    return master, [w["pid"] for w in st["workers"] if w.get("pid", 0) > 0]


def one_batch(c, path, ntasks):
    master, workers = pids(c)
    m0, w0 = cpu_seconds(master), sum(cpu_seconds(p) for p in workers)
    bid, wall = c.submit(path)
    m1, w1 = cpu_seconds(master), sum(cpu_seconds(p) for p in workers)
    problems = c.check_results(bid, ntasks)
    if problems:
        raise RuntimeError(f"{c.name}: batch {bid}: {problems[:3]}")
    return (m1 - m0) / ntasks * 1e6, (w1 - w0) / ntasks * 1e6, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", default=os.path.join(B.REPO, "bin"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tasks", type=int, default=200000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", action="store_true")
    o = ap.parse_args()
    B.install_signal_handlers()
    work = B.make_workdir("ftfarm-bench-cputask-")
    path = os.path.join(work, "noop.json")
    B.write_batch(path, "noop", [NOOP] * o.tasks)
    warm = os.path.join(work, "warm.json")
    B.write_batch(warm, "warm", [NOOP] * 10000)
    nodes = [{"name": "n1", "host": "localhost", "workers": o.workers}]
    builds = {}
    try:
        for name, src in (("old", o.old), ("new", o.new)):
            snap = B.snapshot_bin(src, os.path.join(work, name + "-bin"))
            c = B.Cluster(snap, work, name, nodes, task_events=False)
            c.start()
            c.submit(warm)
            builds[name] = (c, [])
        for r in range(o.rounds):
            order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
            for name in order:
                c, got = builds[name]
                got.append(one_batch(c, path, o.tasks))
                B.log(f"round {r + 1} {name}: master {got[-1][0]:.2f} us, "
                      f"workers {got[-1][1]:.2f} us per task, wall "
                      f"{got[-1][2]:.3f} s")
    finally:
        for c, _ in builds.values():
            c.stop()
    old, new = builds["old"][1], builds["new"][1]
    print(f"| {o.tasks} no-op tasks, 1 node x {o.workers} workers | old | "
          "new | new/old (median of rounds) |")
    print("|---|---|---|---|")
    for k, what in enumerate(("master CPU us/task", "workers CPU us/task",
                              "submit --wait s")):
        ratio = statistics.median(n[k] / b[k] for n, b in zip(new, old))
        print(f"| {what} | {statistics.median(x[k] for x in old):.3f} | "
              f"{statistics.median(x[k] for x in new):.3f} | {ratio:.2f} |")
    B.finish(work, o.keep)


if __name__ == "__main__":
    main()
