#!/usr/bin/python3
"""The node ladder: from a node's second failure to its workers running
tasks again, over a real ipmitool and simulated BMCs (scripts/bmc-sim).

    /usr/bin/python3 scripts/bench/ladder.py [--trials 5] [--boot-delay 1]

One cluster of 2 nodes x 1 worker, each node with a simulated BMC on a
free UDP port of 127.0.0.1 (`bmc-sim start`, boot delay --boot-delay s)
and its `bmc-sim ready` as ready command; heartbeat 200 ms (a ping may
take --ping-timeout ms), min_gap_s --gap between two commands to one BMC,
failure_window_s 3 and max_reboots high so that each trial starts clean.
A trial:

  1. SIGKILL node2's worker while idle; wait for its respawn (the ladder's
     first step);
  2. SIGKILL the respawned worker before it has finished a task (t_kill):
     the second failure in a row; then submit (no --wait) 300 tasks of
     `sleep 0.05`, which node1 runs meanwhile;
  3. wait for node_back of node2 and the first task_assigned to its worker
     after it; `ftfarm wait` the batch and check its results (each task
     exactly once, all ok); then wait out the failure window.

From events.jsonl and the simulator's hook.log:
  detection   = worker_dead - t_kill
  drain       = node_power_cycle - worker_dead (the ladder takes the node's
                tasks back at once)
  power cycle = node_power_on - node_power_cycle (ipmitool cycle, then
                `power status` until on)
  ready wait  = node_ready - node_power_on (`bmc-sim ready` until it says
                booted)
  respawn     = node_back - node_ready (MPI_Comm_spawn and hello)
  tasks       = first task_assigned to the worker - node_back
  total       = first task_assigned - t_kill
  simulated   = the simulator's own cycle: from `set power 0` to power on
                plus the boot delay (hook.log)
Goal: total <= simulated + 2 s.

Prints markdown tables on stdout, progress on stderr.
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

BMC_SIM = os.path.join(B.REPO, "scripts", "bmc-sim")
TASKS = 300


def free_udp_ports(n):
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def bmc_sim(cfg, *args, env=None):
    return subprocess.run([BMC_SIM, args[0], "-c", cfg, *args[1:]],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=env, timeout=60,
                          stdin=subprocess.DEVNULL)


def make_cluster(bindir, work, args):
    pw = os.path.join(work, "bmc-password")
    with open(pw, "w") as f:
        f.write("bench-pass\n")
    ports = free_udp_ports(2)
    nodes = []
    for i, port in enumerate(ports):
        name = f"node{i + 1}"
        nodes.append({"name": name, "host": "localhost", "workers": 1,
                      "bmc": {"host": "127.0.0.1", "port": port,
                              "user": "admin", "password_file": pw,
                              "min_gap_s": args.gap},
                      "ready_command": [BMC_SIM, "ready", "-c",
                                        os.path.join(work, "ladder",
                                                     "config.json"), name]})
    return B.Cluster(bindir, work, "ladder", nodes, heartbeat_ms=200,
                     heartbeat_timeout_ms=args.ping_timeout,
                     failure_window_s=3, max_reboots=100,
                     reboot_wait_s=60, task_events=True)


def read_events(c, offset):
    with open(os.path.join(c.state, "events.jsonl")) as f:
        f.seek(offset)
        return [json.loads(line) for line in f if line.endswith("\n")]


def worker(c, node):
    """(slot, pid) of NODE's live worker, or (None, None)."""
    for w in c.status()["workers"]:
        if w["node"] == node and w["state"] in ("idle", "busy") and \
                w["pid"] > 0:
            return w["id"], w["pid"]
    return None, None


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def first(evs, pred):
    return next((e for e in evs if pred(e)), None)


def sim_cycle(c, since):
    """The simulator's last cycle after SINCE (epoch): seconds from `set
    power 0` to power on plus the boot delay."""
    d = os.path.join(c.state, "bmc-sim", "node2")
    off = on = None
    with open(os.path.join(d, "hook.log")) as f:
        for line in f:
            m = re.match(r"([0-9.]+) hook: set power (0|1): (\S+)", line)
            if not m or float(m.group(1)) < since:
                continue
            if m.group(2) == "0" and off is None:
                off = float(m.group(1))
            elif m.group(2) == "1" and m.group(3) == "on,":
                on = float(m.group(1))
    with open(os.path.join(d, "boot_delay")) as f:
        delay = float(f.read().split()[0])
    return on - off + delay if off and on else float("nan")


def trial(c, k, work):
    """One trial: the figures of the second failure, and problems."""
    slot, pid = wait_for(lambda: worker(c, "node2")[1] and
                         worker(c, "node2"), 30, "node2's worker")
    off = c.events_size()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: any(e["event"] == "worker_respawned" and
                         e["node"] == "node2"
                         for e in read_events(c, off)), 30, "the respawn")
    _, pid = wait_for(lambda: worker(c, "node2")[1] and
                      worker(c, "node2"), 30, "the respawned worker")
    batch = B.write_batch(os.path.join(work, f"batch{k}.json"), f"t{k}",
                          [{"type": "exec", "argv": ["sleep", "0.05"]}] *
                          TASKS)
    off2 = c.events_size()
    t_kill = time.time()
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:  # it died by itself meanwhile: try again
        time.sleep(3.5)
        return None, [f"trial {k}: the respawned worker died by itself"]
    bid, _ = c.submit(batch, wait=False)

    def back():
        evs = read_events(c, off2)
        b = first(evs, lambda e: e["event"] == "node_back" and
                  e["node"] == "node2")
        if b is None:
            return None
        a = first(evs, lambda e: e["event"] == "task_assigned" and
                  e["worker"] == slot and e["ts"] >= b["ts"])
        return evs if a else None
    evs = wait_for(back, 60, "node2 back and running tasks")
    c.wait(bid)
    problems = c.check_results(bid, TASKS)
    ts = {}
    for name in ("worker_dead", "node_power_cycle", "node_power_on",
                 "node_ready", "node_back"):
        e = first(evs, lambda e, n=name: e["event"] == n and
                  e.get("node") == "node2")
        ts[name] = e["ts"] if e else float("nan")
    ts["task"] = first(evs, lambda e: e["event"] == "task_assigned" and
                       e["worker"] == slot and
                       e["ts"] >= ts["node_back"])["ts"]
    row = {
        "detection": ts["worker_dead"] - t_kill,
        "drain": ts["node_power_cycle"] - ts["worker_dead"],
        "power cycle": ts["node_power_on"] - ts["node_power_cycle"],
        "ready wait": ts["node_ready"] - ts["node_power_on"],
        "respawn": ts["node_back"] - ts["node_ready"],
        "tasks": ts["task"] - ts["node_back"],
        "total": ts["task"] - t_kill,
        "simulated": sim_cycle(c, t_kill),
        "load": os.getloadavg()[0],
    }
    others = [e for e in evs if e.get("node") == "node1" and
              e["event"] in ("worker_dead", "node_suspect")]
    if others:
        problems.append(f"trial {k}: node1 failed too: {others[:2]}")
    time.sleep(3.5)             # the failure window: the next trial is clean
    return row, problems


COLS = ("detection", "drain", "power cycle", "ready wait", "respawn",
        "tasks", "total", "simulated")


def report(info, bid, args, rows, problems):
    print("## Node ladder: second failure to tasks again\n")
    print(B.machine_line(info) + f"; {bid}\n")
    print(f"Command: `/usr/bin/python3 scripts/bench/ladder.py --trials "
          f"{args.trials} --boot-delay {args.boot_delay} --gap {args.gap} "
          f"--ping-timeout {args.ping_timeout}`\n")
    loads = [r["load"] for r in rows]
    print(f"1-minute load average during the trials: {min(loads):.1f} to "
          f"{max(loads):.1f} (2 CPUs).\n")
    print("Seconds, per trial, then the median:\n")
    header = ["trial", *COLS, "goal (simulated + 2 s)"]
    out = []
    for k, r in enumerate(rows, 1):
        out.append([k, *(B.fmt(r[c], 2) for c in COLS),
                    "met" if r["total"] <= r["simulated"] + 2 else "missed"])
    med = {c: B.median([r[c] for r in rows]) for c in COLS}
    out.append(["median", *(B.fmt(med[c], 2) for c in COLS),
                "met" if med["total"] <= med["simulated"] + 2 else "missed"])
    print(B.table(header, out) + "\n")
    B.print_problems("Problems seen:", problems, 20)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--boot-delay", type=float, default=1.0)
    ap.add_argument("--gap", type=float, default=0.2,
                    help="min_gap_s between two commands to one BMC")
    ap.add_argument("--ping-timeout", type=int, default=500,
                    help="heartbeat_timeout_ms")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    B.install_signal_handlers()
    work = B.make_workdir("ftfarm-bench-ladder-")
    bindir = B.snapshot_bin(os.path.join(B.REPO, "bin"), work)
    bid = B.bin_id(os.path.join(B.REPO, "bin"), bindir)
    c = make_cluster(bindir, work, args)
    env = dict(os.environ, BMC_SIM_BOOT_DELAY=str(args.boot_delay))
    rows, problems = [], []
    try:
        r = bmc_sim(c.cfg, "start", env=env)
        if r.returncode != 0:
            raise SystemExit(f"bmc-sim start: {r.stdout}")
        c.start()
        info = B.machine_info()
        k = 0
        while len(rows) < args.trials and k < 2 * args.trials:
            k += 1
            row, p = trial(c, k, work)
            problems += p
            if row is None:
                continue
            B.log(f"trial {k}: " + ", ".join(f"{n} {row[n]:.2f}"
                                             for n in COLS))
            rows.append(row)
        problems += c.log_problems(ignore=("worker_dead", "node node2",
                                           "worker 1", "ping"))
        report(info, bid, args, rows, problems)
    finally:
        c.stop()
        bmc_sim(c.cfg, "stop", env=env)
        B.finish(work, args.keep)


if __name__ == "__main__":
    main()
