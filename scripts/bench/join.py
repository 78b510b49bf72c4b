#!/usr/bin/python3
"""Nodes that join over TCP against nodes the master starts over MPI, on
this host, side by side in one run:

  - no-op tasks/s (N no-op tasks) and 600 x `true` through a joined agent
    of W slots against an MPI node of W workers (both clusters up at
    once, rounds alternating);
  - the time from `ftfarm join` to its first task (a task waits in a
    master with no node; the task writes when it starts);
  - the idle CPU of K joined agents of one slot each (and their slots)
    over a quiet spell, from /proc.

    /usr/bin/python3 scripts/bench/join.py [--rounds 5] [--noop 20000]
        [--slots 2] [--agents 16] [--idle 30]

Needs munged and mungekey (Debian's munge): a munged of its own runs for
the benchmark.  Prints markdown tables.
"""
import argparse
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))
import benchlib as bl  # noqa: E402
from remote_client import Munged  # noqa: E402


class Agents:
    """`ftfarm join` processes of a cluster."""

    def __init__(self, cluster):
        self.c = cluster
        self.procs = []

    def start(self, name, slots):
        log = open(os.path.join(self.c.dir, f"join-{name}.log"), "ab")
        p = subprocess.Popen([self.c.ftfarm, "join", "-c", self.c.cfg,
                              "--name", name, "--slots", str(slots)],
                             stdin=subprocess.DEVNULL, stdout=log,
                             stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(p)
        return p

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def up_workers(c):
    return sum(w["state"] in ("idle", "busy") for w in c.status()["workers"])


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise SystemExit(f"not within {timeout} s: {what}")
        time.sleep(0.05)


def run_batch(c, path, n):
    """Submit PATH, wait; (seconds inside the master, problems)."""
    bid, _ = c.submit(path)
    return c.summary(bid)["seconds"], c.check_results(bid, n)


def throughput(mpi, tcp, work, rounds, n):
    noop = bl.write_batch(os.path.join(work, "noop.json"), "noop",
                          [{"type": "sleep", "seconds": 0}] * n)
    true, _ = bl.short_commands(work, 600)
    res = {k: {"noop": [], "true": []} for k in ("mpi", "tcp")}
    problems = []
    for r in range(rounds):
        order = (("mpi", mpi), ("tcp", tcp)) if r % 2 == 0 else \
            (("tcp", tcp), ("mpi", mpi))
        for name, c in order:
            s, p = run_batch(c, noop, n)
            res[name]["noop"].append(n / s)
            problems += p
            s, p = run_batch(c, true, 600)
            res[name]["true"].append(s)
            problems += p
        bl.log(f"round {r + 1}: " + ", ".join(
            f"{k} {res[k]['noop'][-1]:,.0f}/s {res[k]['true'][-1]:.3f} s"
            for k in res))
    return res, problems


def first_task(c, agents, work, rounds):
    """Seconds from `ftfarm join` to the start of a task that waited."""
    out = []
    for r in range(rounds):
        stamp = os.path.join(work, f"stamp{r}")
        batch = bl.write_batch(os.path.join(work, f"first{r}.json"), "first",
                               [{"type": "exec", "argv": [
                                   "sh", "-c", "date +%s.%N > " + stamp]}])
        bid, _ = c.submit(batch, wait=False)
        t0 = time.time()
        p = agents.start(f"first{r}", 1)
        wait_for(lambda: os.path.exists(stamp) and
                 open(stamp).read().strip(), 30, "the first task")
        out.append(float(open(stamp).read()) - t0)
        c.wait(bid)
        p.send_signal(signal.SIGINT)
        p.wait(timeout=30)
    return out


def cpu_ticks(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total


def idle_cpu(c, agents, k, seconds):
    procs = [agents.start(f"idle{i}", 1) for i in range(k)]
    wait_for(lambda: up_workers(c) >= k, 120, f"{k} agents up")
    time.sleep(2)
    st = c.status()
    pids = [p.pid for p in procs] + [w["pid"] for w in st["workers"]
                                     if w["state"] == "idle"]
    hz = os.sysconf("SC_CLK_TCK")
    t0, c0 = time.monotonic(), cpu_ticks(pids)
    time.sleep(seconds)
    t1, c1 = time.monotonic(), cpu_ticks(pids)
    for p in procs:
        p.send_signal(signal.SIGINT)
    for p in procs:
        p.wait(timeout=60)
    return (c1 - c0) / hz / (t1 - t0) * 100, len(pids)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--noop", type=int, default=20000)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--agents", type=int, default=16)
    ap.add_argument("--idle", type=float, default=30)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    bl.install_signal_handlers()
    work = bl.make_workdir("ftfarm-join-")
    os.chmod(work, 0o755)
    bindir = bl.snapshot_bin(os.path.join(bl.REPO, "bin"), work)
    info = bl.machine_info()
    munged = Munged().start()
    control = {"listen": "127.0.0.1:0", "munge_socket": str(munged.socket)}
    quiet = {"task_events": False, "heartbeat_ms": 1000}
    mpi = bl.Cluster(bindir, work, "mpi", [{"name": "m1", "host":
                                             "localhost",
                                             "workers": a.slots}], **quiet)
    tcp = bl.Cluster(bindir, work, "tcp", [], control=control, **quiet)
    agents = Agents(tcp)
    try:
        mpi.start()
        tcp.start()
        agents.start("j1", a.slots)
        wait_for(lambda: up_workers(tcp) == a.slots, 60, "the joined agent")
        res, problems = throughput(mpi, tcp, work, a.rounds, a.noop)
        agents.stop()
        agents.procs = []
        firsts = first_task(tcp, agents, work, a.rounds)
        pct, nproc = idle_cpu(tcp, agents, a.agents, a.idle)
    finally:
        agents.stop()
        tcp.stop()
        mpi.stop()
        munged.stop()
    print(bl.machine_line(info))
    print(f"\nCommand: /usr/bin/python3 scripts/bench/join.py --rounds "
          f"{a.rounds} --noop {a.noop} --slots {a.slots} --agents "
          f"{a.agents} --idle {a.idle:g}\n")
    m, t = res["mpi"], res["tcp"]
    print(bl.table(
        ["measure", "MPI node", "joined agent (TCP)", "TCP / MPI"],
        [[f"{a.noop:,} no-op tasks, tasks/s (median)",
          bl.fmt_int(bl.median(m["noop"])), bl.fmt_int(bl.median(t["noop"])),
          bl.fmt(bl.median(m["noop"]) / bl.median(t["noop"]), 2) +
          " x the time"],
         ["600 x `true`, s (median)", bl.fmt(bl.median(m["true"])),
          bl.fmt(bl.median(t["true"])),
          bl.fmt(bl.median(t["true"]) / bl.median(m["true"]), 2) +
          " x the time"]]))
    print(f"\nFrom `ftfarm join` to its first task (a task waiting): median "
          f"{bl.fmt(bl.median(firsts))} s (runs: "
          f"{', '.join(bl.fmt(x) for x in firsts)})")
    print(f"\n{a.agents} joined agents of one slot, idle {a.idle:g} s: "
          f"{pct:.2f} % of a CPU for {nproc} processes (agents and slots)")
    bl.print_problems("\nProblems:", problems, 10)
    bl.finish(work, a.keep)


if __name__ == "__main__":
    main()
