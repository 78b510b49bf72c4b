#!/usr/bin/python3
"""Automatic allocation on a Slurm cluster of network namespaces (the
tests' slurm_cluster.py; root), side by side in one run:

  - from a backlog to the first task on a new allocation: a batch is
    submitted to a master whose queue has nothing running; the time to
    its first task, and of it what Slurm took itself (from the sbatch to
    the job's start, scontrol's SubmitTime/StartTime) and what ftfarm
    took (the rest: deciding and sbatch, the agent's start and join, the
    first dispatch);
  - a campaign of short tasks as allocations come and go (a queue of
    1-node allocations, max 3) against the same campaign on a fixed
    allocation of the same size (3 nodes joined for the whole run).

    /usr/bin/python3 scripts/bench/alloc.py [--rounds 3] [--tasks 3000]
        [--seconds 0.02]

Prints markdown tables.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))
import benchlib as bl  # noqa: E402
from slurm_cluster import SlurmCluster  # noqa: E402


def events(c, name):
    out = []
    with open(os.path.join(c.state, "events.jsonl")) as f:
        for line in f:
            if f'"{name}"' in line:
                out.append(json.loads(line))
    return out


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise SystemExit(f"not within {timeout} s: {what}")
        time.sleep(0.05)


def slurm_times(sl, jid):
    """(SubmitTime, StartTime) of job JID, epoch seconds."""
    out = sl.cmd(["scontrol", "-o", "show", "job", str(jid)]).stdout
    got = {}
    for word in out.split():
        if "=" in word:
            k, v = word.split("=", 1)
            got[k] = v
    return tuple(time.mktime(time.strptime(got[k], "%Y-%m-%dT%H:%M:%S"))
                 for k in ("SubmitTime", "StartTime"))


def cluster(bindir, work, name, sl, queues):
    keys = {"heartbeat_ms": 500, "task_events": True, "network": sl.cidr,
            "control": {"listen": "0.0.0.0:0",
                        "munge_socket": str(sl.sockdir / "munge.socket.2")}}
    if queues:
        keys["allocations"] = queues
    c = bl.Cluster(bindir, work, name, [], **keys)
    c.env = dict(os.environ, SLURM_CONF=sl.env["SLURM_CONF"])
    return c


def first_task(bindir, work, sl, r):
    """One round: (to the first task, Slurm's own part) in seconds."""
    c = cluster(bindir, work, f"first{r}", sl, [
        {"name": "q", "nodes": 1, "time_limit_s": 600, "max_nodes": 1,
         "idle_s": 2, "slots": 1}])
    try:
        c.start()
        time.sleep(2)           # the dry run and the first squeue
        batch = bl.write_batch(os.path.join(c.dir, "one.json"), "one",
                               [{"type": "exec", "argv": ["true"]}])
        t0 = time.time()
        bid, _ = c.submit(batch, wait=False)
        c.wait(bid, timeout=120)
        start = [e["ts"] for e in events(c, "task_assigned")][0]
        jid = events(c, "alloc_submitted")[0]["allocation"]
        sub, run = slurm_times(sl, jid)
        return start - t0, max(0.0, run - sub)
    finally:
        c.stop()


def campaign(bindir, work, sl, name, n, seconds, queue):
    """Seconds a campaign of N tasks of SECONDS took (client-timed)."""
    c = cluster(bindir, work, name, sl, [queue] if queue else [])
    jid = None
    try:
        c.start()
        if queue is None:       # a fixed allocation of 3 nodes
            script = os.path.join(c.dir, "fixed.sh")
            with open(script, "w") as f:
                # Each node names itself (sh -c under srun).
                f.write(f"#!/bin/sh\nexec srun --kill-on-bad-exit=0 sh -c "
                        f"'exec {c.ftfarm} join -c {c.cfg} --slots 2 --name "
                        f"\"$(hostname -s).$SLURM_JOB_ID\"'\n")
            os.chmod(script, 0o755)
            r = sl.cmd(["sbatch", "--parsable", "-N3", "--ntasks-per-node=1",
                        "--cpus-per-task=2", "-o", "/dev/null", script],
                       check=True)
            jid = r.stdout.strip().split(";")[0]
            wait_for(lambda: sum(w["state"] == "idle" for w in
                                 c.status()["workers"]) == 6, 120,
                     "the fixed allocation joined")
        batch = bl.write_batch(os.path.join(c.dir, "camp.json"), "camp",
                               [{"type": "exec", "argv": [
                                   "sleep", str(seconds)]}] * n)
        bid, dt = c.submit(batch, wait=True, timeout=1800)
        problems = c.check_results(bid, n)
        return dt, problems
    finally:
        c.stop()
        if jid:
            sl.cmd(["scancel", jid])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=3000)
    ap.add_argument("--seconds", type=float, default=0.02)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    bl.install_signal_handlers()
    work = bl.make_workdir("ftfarm-alloc-")
    os.chmod(work, 0o755)
    bindir = bl.snapshot_bin(os.path.join(bl.REPO, "bin"), work)
    info = bl.machine_info()
    sl = SlurmCluster(tempfile.mkdtemp(prefix="fa", dir="/tmp"), 3,
                      slurmd_timeout=60)
    sl.start()
    firsts, problems = [], []
    grow, fixed = [], []
    queue = {"name": "q", "nodes": 1, "time_limit_s": 600, "max_nodes": 3,
             "backlog": 2, "idle_s": 5, "slots": 2}
    try:
        for r in range(a.rounds):
            firsts.append(first_task(bindir, work, sl, r))
            bl.log(f"first task: {firsts[-1][0]:.3f} s, Slurm's "
                   f"{firsts[-1][1]:.3f} s")
            for name, q, out in ((f"grow{r}", queue, grow),
                                 (f"fixed{r}", None, fixed)):
                dt, p = campaign(bindir, work, sl, name, a.tasks, a.seconds,
                                 q)
                out.append(dt)
                problems += p
                bl.log(f"{name}: {dt:.2f} s")
    finally:
        sl.teardown()
    print(bl.machine_line(info))
    print(f"\nCommand: /usr/bin/python3 scripts/bench/alloc.py --rounds "
          f"{a.rounds} --tasks {a.tasks} --seconds {a.seconds:g}\n")
    tot = [f[0] for f in firsts]
    own = [f[0] - f[1] for f in firsts]
    print(bl.table(["measure", "median", "runs"], [
        ["backlog to first task on a new allocation, s",
         bl.fmt(bl.median(tot)), ", ".join(bl.fmt(x) for x in tot)],
        ["  of it Slurm's own (sbatch to the job's start), s",
         bl.fmt(bl.median([f[1] for f in firsts])),
         ", ".join(bl.fmt(f[1]) for f in firsts)],
        ["  less Slurm's own, s", bl.fmt(bl.median(own)),
         ", ".join(bl.fmt(x) for x in own)],
    ]))
    print()
    print(bl.table(["campaign", "seconds (median)", "tasks/s", "runs"], [
        [f"{a.tasks} x sleep {a.seconds:g}, allocations come and go (1 node "
         "each, up to 3)", bl.fmt(bl.median(grow)),
         bl.fmt_int(a.tasks / bl.median(grow)),
         ", ".join(bl.fmt(x) for x in grow)],
        ["the same on a fixed allocation of 3 nodes",
         bl.fmt(bl.median(fixed)), bl.fmt_int(a.tasks / bl.median(fixed)),
         ", ".join(bl.fmt(x) for x in fixed)],
    ]))
    print(f"\ncome-and-go / fixed: "
          f"{bl.median(grow) / bl.median(fixed):.2f} x the time")
    bl.print_problems("\nProblems:", problems, 10)
    bl.finish(work, a.keep)


if __name__ == "__main__":
    main()
