#!/usr/bin/python3
"""Durability: what the journal costs, how fast a killed master is back,
and how fast a standby takes over.

    /usr/bin/python3 scripts/bench/durable.py --old DIR [--rounds 5]
        [--only noop,restart,takeover] [--restart-tasks 1000000]

noop      200,000 no-op tasks on 1 node x 2 workers, task events off, with
          fsync none, batch (the default) and always, against the build in
          --old (a bin/ of a tree without the journal); each round runs
          every configuration once in rotating order; ratios are medians of
          per-round ratios of the master's tasks/s to the old build's
restart   one batch of --restart-tasks no-op tasks then 400 sleeps of
          0.05 s on 2 workers; once every no-op task is done, the master is
          killed (SIGKILL); the supervisor restarts the job, the new master
          reads the journal back and runs the rest.  Times from the kill to
          the new master's master_up, to its journal_replayed, and to the
          first result line written after the kill
takeover  a cluster with a standby (`ftfarm start --standby`), a batch of
          sleeps running; the supervisor and the master are killed
          (SIGKILL) or paused (SIGSTOP); time to the standby's master_up
          and to the next result line, at the default lease_ms

Every batch is checked (each task exactly once, all ok).  Markdown on
stdout, progress on stderr.
"""
import argparse
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

TESTS = ("noop", "restart", "takeover")
POLICIES = ("none", "batch", "always")


def one_node(n):
    return [{"name": "node1", "host": "localhost", "workers": n}]


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return 0


def events_after(c, offset, name, **match):
    """The first event NAME past byte OFFSET of events.jsonl whose keys
    equal MATCH, or None."""
    try:
        with open(os.path.join(c.state, "events.jsonl")) as f:
            f.seek(offset)
            for line in f:
                if f'"{name}"' not in line:
                    continue
                e = json.loads(line)
                if e.get("event") == name and all(
                        e.get(k) == v for k, v in match.items()):
                    return e
    except (OSError, ValueError):
        pass
    return None


def poll(pred, timeout, step=0.005):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return None


def master_pid(c):
    return B.read_pid(os.path.join(c.state, "master.pid"))


# ---- no-op throughput by fsync policy ----

def noop(a, old, new, work, out, problems):
    batch = B.write_batch(os.path.join(work, "noop.json"), "noop",
                          [{"type": "sleep", "seconds": 0}] * a.tasks)
    clusters = {"old": B.Cluster(old, work, "old", one_node(2),
                                 task_events=False)}
    for p in POLICIES:
        clusters[p] = B.Cluster(new, work, f"fsync-{p}", one_node(2),
                                task_events=False, fsync=p)
    names = list(clusters)
    rate = {n: [] for n in names}
    client = {n: [] for n in names}
    try:
        for c in clusters.values():
            c.start()
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                c = clusters[n]
                bid, dt = c.submit(batch)
                problems += [f"noop {n}: {p}"
                             for p in c.check_results(bid, a.tasks)]
                rate[n].append(a.tasks / c.summary(bid)["seconds"])
                client[n].append(a.tasks / dt)
                B.log(f"noop round {r + 1} {n}: {rate[n][-1]:,.0f} tasks/s")
    finally:
        for c in clusters.values():
            c.stop()
    rows = []
    for n in names:
        ratio = [x / o for x, o in zip(rate[n], rate["old"])]
        cratio = [x / o for x, o in zip(client[n], client["old"])]
        rows.append([n if n == "old" else f"fsync {n}",
                     B.fmt_int(B.median(rate[n])),
                     f"[{B.fmt_int(min(rate[n]))}-{B.fmt_int(max(rate[n]))}]",
                     B.fmt(B.median(ratio), 2),
                     B.fmt_int(B.median(client[n])),
                     B.fmt(B.median(cratio), 2)])
    out.append(f"### No-op throughput by fsync policy\n\n{a.tasks:,} no-op "
               f"tasks per batch, 1 node x 2 workers, task events off, "
               f"{a.rounds} rounds; old = the build in `--old` (no "
               f"journal).\n")
    out.append(B.table(["build", "master tasks/s", "(range)",
                        "ratio to old", "client tasks/s",
                        "client ratio to old"], rows))
    batch_ratio = B.median([x / o for x, o in zip(rate["batch"],
                                                  rate["old"])])
    out.append(f"\nGoal: the default policy (batch) within 10 % of the old "
               f"build: ratio {batch_ratio:.2f}, "
               f"{'met' if batch_ratio >= 0.9 else 'not met'}.\n")


# ---- restart after kill -9 ----

def restart_trial(a, new, work, r, problems):
    n, sleeps = a.restart_tasks, 400
    c = B.Cluster(new, work, f"restart{r}", one_node(2), task_events=False)
    path = os.path.join(work, "restart.json")
    if not os.path.exists(path):
        B.write_batch(path, "restart",
                      [{"type": "sleep", "seconds": 0}] * n +
                      [{"type": "sleep", "seconds": 0.05}] * sleeps)
    res = {}
    try:
        c.start()
        bid, _ = c.submit(path, wait=False)
        results = os.path.join(c.batch_dir(bid), "results.jsonl")
        if not poll(lambda: count_lines(results) >= n + 20, 600, 0.05):
            problems.append(f"restart {r}: the no-op tasks never finished")
            return res
        old = master_pid(c)
        off = c.events_size()
        lines = count_lines(results)
        t0 = time.monotonic()
        os.kill(old, signal.SIGKILL)
        up = poll(lambda: events_after(c, off, "master_up"), 60, 0.002)
        res["up"] = time.monotonic() - t0 if up else float("nan")
        rep = poll(lambda: events_after(c, off, "journal_replayed"), 60,
                   0.002)
        res["replayed"] = time.monotonic() - t0 if rep else float("nan")
        res["read"] = rep["seconds"] if rep else float("nan")
        # Lines written after the kill by the dying job are cut or kept;
        # a line past the count at the kill, written by the new master.
        first = poll(lambda: master_pid(c) not in (None, old) and
                     count_lines(results) > lines + 2, 60, 0.002)
        res["first"] = time.monotonic() - t0 if first else float("nan")
        c.wait(bid, timeout=600)
        problems += [f"restart {r}: {p}"
                     for p in c.check_results(bid, n + sleeps)]
    finally:
        c.stop()
    return res


def restart(a, new, work, out, problems):
    trials = []
    for r in range(a.rounds):
        res = restart_trial(a, new, work, r, problems)
        B.log(f"restart round {r + 1}: {res}")
        trials.append(res)
    rows = []
    for key, what in (("up", "kill to the new master's master_up"),
                      ("replayed", "kill to journal_replayed"),
                      ("read", "journal read and checked (its seconds)"),
                      ("first", "kill to the first task done by the new "
                                "master")):
        xs = [t[key] for t in trials if key in t and t[key] == t[key]]
        rows.append([what, B.fmt(B.median(xs)),
                     f"[{B.fmt(min(xs)) if xs else 'n/a'}-"
                     f"{B.fmt(max(xs)) if xs else 'n/a'}]"])
    out.append(f"### Restart after kill -9\n\nOne batch of "
               f"{a.restart_tasks:,} no-op tasks then 400 x 0.05 s sleeps, "
               f"2 workers, fsync batch, default restart_backoff_ms (100); "
               f"the master is killed once every no-op task is done. "
               f"{a.rounds} trials, seconds.\n")
    out.append(B.table(["", "median s", "(range)"], rows))
    first = B.median([t["first"] for t in trials if "first" in t])
    out.append(f"\nGoal: under 2 s from the kill to the first task done: "
               f"{first:.2f} s, {'met' if first < 2 else 'not met'}.\n")


# ---- standby takeover ----

def takeover_trial(a, new, work, r, how, problems):
    c = B.Cluster(new, work, f"takeover-{how}{r}", one_node(2))
    path = B.write_batch(os.path.join(work, "sleeps.json"), "sleeps",
                         [{"type": "sleep", "seconds": 0.05}] * 600)
    res = {}
    sb = None
    try:
        c.start()
        sb = c.run("start", "--standby", timeout=60)
        bid, _ = c.submit(path, wait=False)
        results = os.path.join(c.batch_dir(bid), "results.jsonl")
        poll(lambda: count_lines(results) >= 40, 60, 0.01)
        sup = B.read_pid(os.path.join(c.state, "supervisor.pid"))
        master = master_pid(c)
        off = c.events_size()
        sig = signal.SIGKILL if how == "kill" else signal.SIGSTOP
        t0 = time.monotonic()
        os.kill(sup, sig)
        os.kill(master, sig)
        lines = count_lines(results)
        up = poll(lambda: events_after(c, off, "master_up"), 120, 0.005)
        res["up"] = time.monotonic() - t0 if up else float("nan")
        first = poll(lambda: master_pid(c) not in (None, master) and
                     count_lines(results) > lines + 2, 120, 0.005)
        res["first"] = time.monotonic() - t0 if first else float("nan")
        c.wait(bid, timeout=600)
        problems += [f"takeover {how} {r}: {p}"
                     for p in c.check_results(bid, 600)]
        if how == "stop":
            for pid in (sup, master):
                try:
                    os.kill(pid, signal.SIGCONT)
                except OSError:
                    pass
    finally:
        c.stop()
    del sb
    return res


def takeover(a, new, work, out, problems):
    rows = []
    for how, what in (("kill", "supervisor and master SIGKILLed"),
                      ("stop", "supervisor and master SIGSTOPped")):
        trials = []
        for r in range(a.rounds):
            res = takeover_trial(a, new, work, r, how, problems)
            B.log(f"takeover {how} round {r + 1}: {res}")
            trials.append(res)
        for key, label in (("up", "to master_up"),
                           ("first", "to the first task done")):
            xs = [t[key] for t in trials if t.get(key) == t.get(key)
                  and key in t]
            rows.append([what, label, B.fmt(B.median(xs)),
                         f"[{B.fmt(min(xs)) if xs else 'n/a'}-"
                         f"{B.fmt(max(xs)) if xs else 'n/a'}]"])
    out.append(f"### Standby takeover\n\nA cluster of 2 workers and a standby "
               f"supervisor on this host, default lease_ms (5000), 600 x "
               f"0.05 s sleeps running; {a.rounds} trials each, seconds "
               f"from the signal.\n")
    out.append(B.table(["fault", "", "median s", "(range)"], rows))
    out.append("")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", help="bin/ of a build without the journal")
    ap.add_argument("--bin", default=os.path.join(B.REPO, "bin"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tasks", type=int, default=200000)
    ap.add_argument("--restart-tasks", type=int, default=1000000)
    ap.add_argument("--only", default=",".join(TESTS))
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    only = a.only.split(",")
    if "noop" in only and not a.old:
        ap.error("noop needs --old")
    B.install_signal_handlers()
    work = B.make_workdir("ftfarm-durable-")
    new = B.snapshot_bin(a.bin, os.path.join(work, "new"))
    old = B.snapshot_bin(a.old, os.path.join(work, "old")) if a.old else None
    info = B.machine_info()
    out, problems = [], []
    try:
        if "noop" in only:
            noop(a, old, new, work, out, problems)
        if "restart" in only:
            restart(a, new, work, out, problems)
        if "takeover" in only:
            takeover(a, new, work, out, problems)
    finally:
        print(B.machine_line(info) + "\n")
        print(f"Command: `/usr/bin/python3 scripts/bench/durable.py "
              f"{' '.join(sys.argv[1:])}`\n")
        print("\n".join(out))
        B.print_problems("Problems seen:", problems, 20)
        B.finish(work, a.keep)


if __name__ == "__main__":
    main()
