#!/usr/bin/python3
"""Dependencies: what planning a chain and a fan-in costs, and whether it
grows linearly.

    /usr/bin/python3 scripts/bench/deps.py [--sizes 100000,200000,400000]
        [--rounds 3] [--bin DIR]

For each size N, two batches of N no-op tasks ({"type": "sleep",
"seconds": 0}): a chain (task i after task i - 1) and a fan-in (task N - 1
after every other), and beside them a batch of N no-op tasks without
"after" for reference, on a cluster of 1 node x 2 slots, task events off:

  check    `ftfarm check` of the file: the client's parse, per-task
           check and the graph's range and cycle check
  accept   `ftfarm submit` until it prints the id: the master reads,
           checks and plans the batch (the graph again, the held tasks)
  run      from the id to `ftfarm wait`'s answer: a fan-in runs its N - 1
           tasks in parallel, then one; a chain runs one task at a time,
           each a round trip through the master
  cpu      the master's CPU seconds over accept + run

Every batch is checked: each task exactly once, all ok, and for a chain
in order (each task's result after its predecessor's).  Medians over the
rounds; markdown on stdout, progress on stderr.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

CLK = os.sysconf("SC_CLK_TCK")
NOOP = {"type": "sleep", "seconds": 0}


def batch(kind, n):
    if kind == "plain":
        tasks = [NOOP] * n
    elif kind == "chain":
        tasks = [NOOP] + [dict(NOOP, after=[i - 1]) for i in range(1, n)]
    else:
        tasks = [NOOP] * (n - 1) + [dict(NOOP, after=list(range(n - 1)))]
    return {"name": f"{kind}-{n}", "tasks": tasks}


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def run(args):
    ftfarm = os.path.join(args.bin, "ftfarm")
    base = tempfile.mkdtemp(prefix="ftfarm-deps-")
    cfg = os.path.join(base, "cluster.json")
    with open(cfg, "w") as f:
        json.dump({"name": "deps", "state_dir": os.path.join(base, "state"),
                   "nodes": [{"name": "n1", "host": "localhost",
                              "workers": 2}],
                   "task_events": False, "heartbeat_ms": 1000}, f)
    files = {}
    for n in args.sizes:
        for kind in ("plain", "chain", "fanin"):
            path = os.path.join(base, f"{kind}-{n}.json")
            with open(path, "w") as f:
                json.dump(batch(kind, n), f)
            files[kind, n] = path
    sh = lambda *a: subprocess.run([ftfarm, *a], capture_output=True,
                                   text=True, timeout=3600)
    r = sh("start", "-c", cfg)
    assert r.returncode == 0, r.stderr
    master = int(open(os.path.join(base, "state", "master.pid"))
                 .read().split()[0])
    rows = {}
    try:
        for rnd in range(args.rounds):
            for n in args.sizes:
                for kind in ("plain", "chain", "fanin"):
                    B.log(f"round {rnd + 1}: {kind} {n}")
                    path = files[kind, n]
                    t0 = time.monotonic()
                    r = sh("check", "-c", cfg, path)
                    t1 = time.monotonic()
                    assert r.returncode == 0, r.stderr
                    c0 = cpu_seconds(master)
                    t2 = time.monotonic()
                    r = sh("submit", "-c", cfg, path)
                    t3 = time.monotonic()
                    assert r.returncode == 0, r.stderr
                    bid = int(r.stdout.split()[0])
                    r = sh("wait", "-c", cfg, str(bid))
                    t4 = time.monotonic()
                    assert r.returncode == 0, r.stderr
                    c1 = cpu_seconds(master)
                    check(base, bid, n, kind)
                    rows.setdefault((kind, n), []).append(
                        (t1 - t0, t3 - t2, t4 - t3, c1 - c0))
                    sh("forget", "-c", cfg, str(bid))
    finally:
        sh("stop", "-c", cfg)
    print(f"| batch | tasks | check (s) | accept (s) | run (s) | "
          f"master CPU (s) |")
    print("|---|---|---|---|---|---|")
    for n in args.sizes:
        for kind in ("plain", "chain", "fanin"):
            v = rows[kind, n]
            med = [statistics.median(x[k] for x in v) for k in range(4)]
            print(f"| {kind} | {n:,} | {med[0]:.3f} | {med[1]:.3f} | "
                  f"{med[2]:.2f} | {med[3]:.2f} |")


def check(base, bid, n, kind):
    path = os.path.join(base, "state", "batches", str(bid), "results.jsonl")
    with open(path) as f:
        lines = [json.loads(x) for x in f]
    tasks = [x["task"] for x in lines]
    assert sorted(tasks) == list(range(n)), f"{kind}: not each task once"
    assert all(x["status"] == "ok" for x in lines)
    if kind == "chain":
        assert tasks == list(range(n)), "a chain ran out of order"
    if kind == "fanin":
        assert tasks[-1] == n - 1, "the fan-in ran before its tasks"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,200000,400000",
                    type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin"))
    run(ap.parse_args())


if __name__ == "__main__":
    main()
