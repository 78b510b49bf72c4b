#!/usr/bin/python3
"""Two builds side by side: no-op throughput, failure detection, word count
and relaxation, interleaved round by round.

    /usr/bin/python3 scripts/bench/compare.py --old DIR --new DIR
        [--rounds 5] [--only noop,recovery,wordcount,relax] [--mb 100]

DIR is a bin/ directory as `make` builds it (a checkout of the older tree
built with `make` gives one).  Each build gets its own clusters (copies of
its bin/, own configs and state dirs), all up for the whole run.  A round
runs every benchmark once on each build, the build order alternating from
round to round, so that the machine's noise hits both alike; the tables
give medians over the rounds and the median of the per-round ratios
new/old (for times, < 1 means the new build is faster).

  noop       200,000 no-op tasks on 1 node x 2 workers, task events off:
             the master's time (summary.json) and `submit --wait`'s
  shortcmd   600 x `true` (exec tasks) on 1 node x 2 workers, task events
             off: `submit --wait`'s time, and its ratio to `xargs -P2`
             run in the same round (speed.py's shortcmd)
  recovery   2 workers at a 100 ms heartbeat, 24 x 0.5 s sleeps, a busy
             worker SIGKILLed at a random moment: seconds from the kill to
             worker_dead (scripts/bench/recovery.py's trial)
  wordcount  `ftfarm submit --wait` of a word-count job over a --mb MB
             corpus (scripts/bench/wordcount.py's), 2 workers
  relax      a relax job n=2050, itmax 100, 2 blocks, checkpoints every 10
             sweeps in the work dir, 2 workers

Every batch is checked (each task exactly once, all ok; word-count output
byte-equal to the old build's first output).  Markdown on stdout, progress
on stderr.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import recovery  # noqa: E402
import wordcount  # noqa: E402

BENCHES = ("noop", "shortcmd", "recovery", "wordcount", "relax")


class Build:
    """One build's clusters and results."""

    def __init__(self, label, src, work):
        self.label = label
        self.src = src
        self.dir = os.path.join(work, label)
        os.makedirs(self.dir)
        self.bin = B.snapshot_bin(src, self.dir)
        self.id = B.bin_id(src, self.bin)
        self.clusters = {}
        self.times = {}         # bench -> metric -> [values]

    def cluster(self, name, nodes, **keys):
        if name not in self.clusters:
            c = B.Cluster(self.bin, self.dir, name, nodes, **keys)
            B.log(f"{self.label}: start {name}")
            c.start()
            self.clusters[name] = c
        return self.clusters[name]

    def add(self, bench, metric, value):
        self.times.setdefault(bench, {}).setdefault(metric, []).append(value)

    def stop(self):
        for c in self.clusters.values():
            c.stop()


def one_node(workers):
    return [{"name": "node1", "host": "localhost", "workers": workers}]


def run_noop(b, work, a, problems):
    c = b.cluster("noop", one_node(2), task_events=False)
    batch = os.path.join(work, "noop.json")
    if not os.path.exists(batch):
        B.write_batch(batch, "noop", [{"type": "sleep", "seconds": 0}]
                      * a.tasks)
    bid, dt = c.submit(batch)
    problems += [f"{b.label} noop: {p}" for p in c.check_results(bid, a.tasks)]
    b.add("noop", "master s", c.summary(bid)["seconds"])
    b.add("noop", "client s", dt)


def run_shortcmd(b, work, a, problems):
    n = 600
    c = b.cluster("shortcmd", one_node(2), task_events=False)
    batch, lines = B.short_commands(work, n)
    bid, dt = c.submit(batch)
    problems += [f"{b.label} shortcmd: {p}" for p in c.check_results(bid, n)]
    with open(lines) as f:
        t0 = time.perf_counter()
        subprocess.run(["xargs", "-P2", "-I{}", "true"], stdin=f, check=True)
        xargs = time.perf_counter() - t0
    b.add("shortcmd", "client s", dt)
    b.add("shortcmd", "x xargs -P2", dt / xargs)


def run_recovery(b, work, a, rng, problems):
    c = b.cluster("recovery", one_node(2), heartbeat_ms=100,
                  task_events=True, respawn_limit=1000)
    batch = os.path.join(work, "sleeps.json")
    if not os.path.exists(batch):
        B.write_batch(batch, "sleeps", [{"type": "sleep", "seconds": 0.5}]
                      * 24)
    opts = argparse.Namespace(min_delay=0.3, max_delay=2.5)
    r = recovery.trial(c, 100, batch, 24, rng, opts)
    problems += [f"{b.label} recovery: {p}" for p in r["problems"]]
    for key, metric in (("detect", "detect s"), ("done", "lost task done s")):
        if key in r:
            b.add("recovery", metric, r[key])


def run_wordcount(b, work, a, ref, problems):
    c = b.cluster("wordcount", one_node(2), task_events=False)
    out = os.path.join(b.dir, "counts.txt")
    batch = os.path.join(b.dir, "wc.json")
    if not os.path.exists(batch):
        with open(batch, "w") as f:
            json.dump({"name": "wc", "job": {
                "type": "wordcount", "inputs": [a.corpus_dir],
                "output": out}}, f)
    bid, dt = c.submit(batch)
    s = c.summary(bid)
    if s.get("failed") or s.get("error"):
        problems.append(f"{b.label} wordcount: {s}")
    with open(out, "rb") as f:
        data = f.read()
    if ref.setdefault("wc", data) != data:
        problems.append(f"{b.label} wordcount: output differs")
    b.add("wordcount", "client s", dt)
    b.add("wordcount", "master s", s["seconds"])


def run_relax(b, work, a, ref, problems):
    c = b.cluster("relax", one_node(2), task_events=False)
    jobdir = os.path.join(b.dir, "relaxdir")
    os.makedirs(jobdir, exist_ok=True)
    out = os.path.join(b.dir, "relax-out.json")
    batch = os.path.join(b.dir, "relax.json")
    if not os.path.exists(batch):
        with open(batch, "w") as f:
            json.dump({"name": "relax", "job": {
                "type": "relax", "n": 2050, "itmax": 100, "maxeps": 1e-8,
                "blocks": 2, "checkpoint_every": 10, "dir": jobdir,
                "output": out}}, f)
    bid, dt = c.submit(batch)
    s = c.summary(bid)
    if s.get("failed") or s.get("error"):
        problems.append(f"{b.label} relax: {s}")
    with open(out) as f:
        data = f.read()
    if ref.setdefault("relax", data) != data:
        problems.append(f"{b.label} relax: output differs: {data}")
    b.add("relax", "client s", dt)


def report(builds, a, info, problems):
    old, new = builds
    print("## Two builds side by side\n")
    print(B.machine_line(info) + "\n")
    print(f"old: `{old.src}` ({old.id}); new: `{new.src}` ({new.id})\n")
    print("Command: `/usr/bin/python3 scripts/bench/compare.py "
          f"{' '.join(sys.argv[1:])}`\n")
    print(f"{a.rounds} rounds, each running every benchmark once on each "
          "build (the order alternating); medians over the rounds, ratio = "
          "median of the per-round ratios new/old.\n")
    rows = []
    for bench in a.only:
        for metric in old.times.get(bench, {}):
            o = old.times[bench][metric]
            n = new.times.get(bench, {}).get(metric, [])
            ratios = [y / x for x, y in zip(o, n) if x > 0]
            rows.append([bench, metric, len(o), B.fmt(B.median(o)),
                         B.fmt(B.median(n)), B.fmt(B.median(ratios), 2),
                         f"{B.fmt(min(ratios), 2)}-{B.fmt(max(ratios), 2)}"
                         if ratios else "n/a"])
    print(B.table(["benchmark", "metric", "rounds", "old", "new",
                   "new/old", "(range)"], rows) + "\n")
    B.print_problems("Problems seen:", problems, 20)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", default=os.path.join(B.REPO, "bin"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default=",".join(BENCHES))
    ap.add_argument("--tasks", type=int, default=200000)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    a.only = [x for x in a.only.split(",") if x]
    for x in a.only:
        if x not in BENCHES:
            raise SystemExit(f"unknown benchmark {x}; know {BENCHES}")
    seed = a.seed if a.seed is not None else int(time.time())
    rng = random.Random(seed)
    B.install_signal_handlers()
    info = B.machine_info()
    work = B.make_workdir("ftfarm-bench-compare-")
    B.log(f"work dir {work}, seed {seed}")
    if "wordcount" in a.only:
        a.corpus_dir = os.path.join(work, "corpus")
        files, _ = wordcount.corpus(a.corpus_dir, a.mb)
        wordcount.warm(files)
    builds = [Build("old", a.old, work), Build("new", a.new, work)]
    problems, ref = [], {}
    try:
        for r in range(a.rounds):
            order = builds if r % 2 == 0 else builds[::-1]
            for bench in a.only:
                for b in order:
                    B.log(f"round {r + 1}: {bench} on {b.label}")
                    if bench == "noop":
                        run_noop(b, work, a, problems)
                    elif bench == "shortcmd":
                        run_shortcmd(b, work, a, problems)
                    elif bench == "recovery":
                        run_recovery(b, work, a, rng, problems)
                    elif bench == "wordcount":
                        run_wordcount(b, work, a, ref, problems)
                    else:
                        run_relax(b, work, a, ref, problems)
    finally:
        for b in builds:
            b.stop()
    for b in builds:
        for c in b.clusters.values():
            problems += c.log_problems(
                ignore=("worker_dead: no answer to a ping",))
    report(builds, a, info, problems)
    B.finish(work, a.keep)


if __name__ == "__main__":
    main()
