#!/usr/bin/python3
"""ftfarm across emulated hosts (tests/integration/netns_hosts.py: network
namespaces with an sshd each, mpirun over ssh) against one host.

    /usr/bin/python3 scripts/bench/hosts.py [--reps 3] [--tasks 20000]

Per round, two clusters, each started, measured and stopped in turn:
  local   1 node on this machine x 3 workers
  hosts   3 nodes on h1..h3 x 1 worker
and measured:
  round trip   a batch of one no-op task: summary.json seconds (the
               master's clock from queueing it to its result)
  throughput   --tasks no-op tasks ({"type":"sleep","seconds":0})
  start        `ftfarm start` wall time, and the same with 3 hosts x 4
               workers ("hosts-3x4")
and, on the hosts cluster, a batch of 60 x 0.5 s tasks during which h2 is
cut off the network (after its 10th result): from the cut to its worker
declared dead (worker_dead event), and to the batch's last result; the
same batch without a cut, from its 10th result to its last, is the
baseline.  Every batch's
results.jsonl is checked (each task exactly once, all ok).  Medians of the
rounds, (min-max).  Needs root (namespaces).
"""
import argparse
import os
import sys
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import benchlib as B  # noqa: E402
from netns_hosts import NetnsHosts  # noqa: E402


def noop_batch(path, n):
    B.write_batch(path, f"noop{n}", [{"type": "sleep", "seconds": 0}] * n)


def host_keys(net):
    return {"ssh": f"ssh -F {net.ssh_config}", "network": net.cidr,
            "mpirun_args": ["--mca", "orte_tmpdir_base",
                            str(net.dir / "sess")]}


def measure_batch(c, path, n):
    bid, _ = c.submit(path)
    probs = c.check_results(bid, n)
    if probs:
        raise RuntimeError(f"{c.name}: batch {bid}: {probs[:3]}")
    return c.summary(bid)["seconds"]


def run_cluster(bindir, work, name, nodes, keys, batches):
    c = B.Cluster(bindir, work, name, nodes, heartbeat_ms=500, **keys)
    t0 = time.monotonic()
    try:
        c.start()
        out = {"start": time.monotonic() - t0}
        for label, path, n in batches:
            out[label] = measure_batch(c, path, n)
        return out, c
    except BaseException:
        c.stop()
        raise


def cut_recovery(c, net, work, cut=True):
    path = os.path.join(work, "cut.json")
    n = 60
    B.write_batch(path, "cut", [{"type": "exec", "argv":
                                 ["sh", "-c", "sleep 0.5; hostname"]}] * n)
    off = c.events_size()
    bid, _ = c.submit(path, wait=False)
    rdir = c.batch_dir(bid)
    res = os.path.join(rdir, "results.jsonl")
    while not os.path.exists(res) or \
            sum(1 for _ in open(res)) < 10:
        time.sleep(0.05)
    h2 = net.hosts[1]
    if cut:
        net.cut(h2)
    t_cut = time.monotonic()
    dead = None
    while sum(1 for _ in open(res)) < n:
        if cut and dead is None and "worker_dead" in open(os.path.join(
                c.state, "events.jsonl")).read()[off:]:
            dead = time.monotonic() - t_cut
        time.sleep(0.02)
    done = time.monotonic() - t_cut
    if cut:
        net.restore(h2)
    c.wait(bid)         # summary.json is written after the last result
    probs = c.check_results(bid, n)
    if probs:
        raise RuntimeError(f"cut batch: {probs[:3]}")
    return dead, done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=20000)
    a = ap.parse_args()
    B.install_signal_handlers()
    work = B.make_workdir("ftfarm-bench-hosts-")
    bindir = B.snapshot_bin(os.path.join(ROOT, "bin"), work)
    one, many = os.path.join(work, "one.json"), os.path.join(work, "many.json")
    noop_batch(one, 1)
    noop_batch(many, a.tasks)
    batches = [("warm", many, a.tasks), ("rtt", one, 1),
               ("noop", many, a.tasks)]
    rows = {k: [] for k in ("local", "hosts", "hosts-3x4")}
    cuts, base = [], []
    for r in range(a.reps):
        net = NetnsHosts(Path(work) / f"net{r}", 3)
        net.start()
        try:
            B.log(f"round {r + 1}: local")
            out, c = run_cluster(bindir, work, f"local{r}",
                                 [{"name": "n1", "workers": 3}], {}, batches)
            c.stop()
            rows["local"].append(out)
            B.log(f"round {r + 1}: hosts")
            nodes = [{"name": f"n{i}", "host": h, "workers": 1}
                     for i, h in enumerate(net.hosts, 1)]
            out, c = run_cluster(bindir, work, f"hosts{r}", nodes,
                                 host_keys(net), batches)
            try:
                base.append(cut_recovery(c, net, work, cut=False)[1])
                cuts.append(cut_recovery(c, net, work))
            finally:
                c.stop()
            rows["hosts"].append(out)
            B.log(f"round {r + 1}: hosts 3x4")
            nodes = [dict(n, workers=4) for n in nodes]
            out, c = run_cluster(bindir, work, f"big{r}", nodes,
                                 host_keys(net), [])
            c.stop()
            rows["hosts-3x4"].append(out)
        finally:
            net.teardown()

    def col(name, key, scale=1.0):
        xs = [o[key] * scale for o in rows[name] if key in o]
        if not xs:
            return "-"
        return f"{B.fmt(B.median(xs))} ({B.fmt(min(xs))}-{B.fmt(max(xs))})"

    print(B.machine_line(B.machine_info()))
    print(f"\nCommand: `/usr/bin/python3 scripts/bench/hosts.py --reps "
          f"{a.reps} --tasks {a.tasks}`; {time.strftime('%c %Z')}\n")
    out = []
    for name in rows:
        tput = [a.tasks / o["noop"] for o in rows[name] if "noop" in o]
        out.append([name, col(name, "start"), col(name, "rtt", 1000),
                    B.fmt_int(B.median(tput)) if tput else "-"])
    print(B.table(["cluster", "start s", "round trip ms (1-task batch)",
                   f"no-op tasks/s ({a.tasks})"], out))
    dead = [d for d, _ in cuts if d is not None]
    done = [d for _, d in cuts]
    print()
    print(B.table(["h2 cut mid-batch (60 x 0.5 s tasks)", "median s",
                   "(min-max)"],
                  [["cut to worker_dead", B.fmt(B.median(dead)),
                    f"{B.fmt(min(dead))}-{B.fmt(max(dead))}"],
                   ["cut to the batch's last result", B.fmt(B.median(done)),
                    f"{B.fmt(min(done))}-{B.fmt(max(done))}"],
                   ["no cut: 10th result to the last", B.fmt(B.median(base)),
                    f"{B.fmt(min(base))}-{B.fmt(max(base))}"]]))
    B.finish(work, False)


if __name__ == "__main__":
    main()
