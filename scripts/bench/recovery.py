#!/usr/bin/python3
"""Failure detection and recovery: SIGKILL a busy worker, read events.jsonl.

    /usr/bin/python3 scripts/bench/recovery.py [--trials 7] [--heartbeats 1000,100]
        [--signal KILL|STOP]

One cluster per heartbeat setting (1 node x 2 workers, "heartbeat_ms" H,
task_events on, respawn_limit raised so that every trial can respawn), each
with its own config and state dir under a temp dir; all are up for the whole
run and the trials alternate between them.  A trial:

  1. submit (no --wait) a batch of --tasks {"type":"sleep","seconds":0.5}
     tasks, enough to keep both workers busy for the whole trial;
  2. sleep a random delay (uniform in [--min-delay, --max-delay] s);
  3. `ftfarm status --json`, pick a busy worker at random, t_kill =
     time.time(), SIGKILL its pid (--signal STOP: SIGSTOP, a hang, which
     only a request deadline finds; a killed process on the master's
     machine is seen through its pidfd);
  4. `ftfarm wait` for the batch, then read the events of the trial:
       detect  = ts(worker_dead of that pid) - t_kill
       running = the task the worker was running: the first task_reassigned
                 from it after its death (the oldest of its in-flight tasks;
                 if a result the worker sent just before the kill reaches
                 the master after it, this is the task it was given next);
       done    = ts(task_done of that task, attempt > the lost one) - t_kill
       all     = ts(last task_done of every task reassigned from it) - t_kill
       respawn = ts(worker_respawned of that slot) - t_kill
     and check results.jsonl: every task exactly once, all ok; that the
     tasks reassigned are the ones assigned to the worker and not done when
     it was declared dead (from task_assigned / task_done); and that no
     other worker was declared dead, slow or inactive.
  5. wait until the slot is back (a live worker with a new pid) and idle.

Prints markdown tables on stdout, progress on stderr.
"""
import argparse
import json
import os
import random
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402


def read_events(path, offset):
    evs = []
    with open(path) as f:
        f.seek(offset)
        for line in f:
            if line.endswith("\n"):
                evs.append(json.loads(line))
    return evs


def wait_ready(c, nworkers, old_pid, timeout=60):
    """Until NWORKERS workers are live, none with OLD_PID, and all idle."""
    end = time.time() + timeout
    while time.time() < end:
        st = c.status()
        ws = st["workers"]
        if (len(ws) == nworkers and all(w["state"] == "idle" for w in ws)
                and all(w["pid"] != old_pid for w in ws)):
            return st
        time.sleep(0.1)
    raise RuntimeError(f"{c.name}: workers not back after {timeout} s: {ws}")


def trial(c, hb, batch, ntasks, rng, a):
    ev_path = os.path.join(c.state, "events.jsonl")
    offset = os.path.getsize(ev_path)
    bid, _ = c.submit(batch, wait=False)
    time.sleep(rng.uniform(a.min_delay, a.max_delay))
    st = c.status()
    busy = [w for w in st["workers"] if w["state"] == "busy" and w["pid"] > 0]
    if not busy:
        raise RuntimeError(f"{c.name}: no busy worker to kill: {st['workers']}")
    victim = rng.choice(busy)
    pid, slot = victim["pid"], victim["id"]
    if "ftfarm-worker" not in B.pid_cmdline(pid):
        raise RuntimeError(f"pid {pid} is not an ftfarm-worker")
    t_kill = time.time()
    os.kill(pid, getattr(signal, "SIG" + a.signal))
    c.wait(bid, timeout=300)
    evs = read_events(ev_path, offset)
    r = {"hb": hb, "batch": bid, "pid": pid, "slot": slot, "problems": []}
    P = r["problems"]

    dead = [e for e in evs if e["event"] == "worker_dead" and e.get("pid") == pid]
    if len(dead) != 1:
        P.append(f"{len(dead)} worker_dead events for pid {pid}")
        return r
    other = [e for e in evs if e["event"] in ("worker_dead", "worker_slow",
                                                "worker_spawn_failed", "worker_inactive",
                                                "node_inactive")
             and e.get("pid") != pid]
    r["spurious"] = len(other)
    for e in other:
        P.append(f"unexpected event: {json.dumps(e)}")
    t_dead = dead[0]["ts"]
    r["detect"] = t_dead - t_kill
    r["reason"] = dead[0].get("reason")
    after = [e for e in evs if e["ts"] >= t_dead]
    re = [e for e in after if e["event"] == "task_reassigned"
          and e.get("worker") == slot and e.get("batch") == bid]
    r["nreassigned"] = len(re)
    if re:
        r["reassign"] = re[0]["ts"] - t_kill
    # Consistency of the event log: what the master lost with the worker is
    # what it had assigned to it and not seen done before declaring it dead.
    # (A result the worker sent just before the kill may arrive after it, and
    # the master may then assign the next task to the dead worker.)
    assigned, done_before, done_after_kill = {}, set(), []
    for e in evs:
        if e.get("batch") != bid or e["ts"] > t_dead:
            continue
        if e["event"] == "task_assigned" and e.get("worker") == slot:
            assigned[(e["task"], e["attempt"])] = e["ts"]
        elif e["event"] == "task_done":
            done_before.add((e["task"], e["attempt"]))
            if e.get("worker") == slot and e["ts"] > t_kill:
                done_after_kill.append(e["task"])
    inflight = {k for k in assigned if k not in done_before}
    lost = {(e["task"], e["attempt"]) for e in re}
    r["late_results"] = len(done_after_kill)
    if inflight != lost:
        P.append(f"assigned to the worker and not done at its death "
                 f"{sorted(inflight)} != reassigned {sorted(lost)}")
    if not re:
        P.append("no task_reassigned from the killed worker")
    else:
        dones = {}
        for e in after:
            if e["event"] == "task_done" and e.get("batch") == bid:
                dones.setdefault(e["task"], []).append(e)
        first = re[0]
        d = [e for e in dones.get(first["task"], [])
             if e["attempt"] > first["attempt"]]
        if d:
            r["task"] = first["task"]
            r["done"] = d[0]["ts"] - t_kill
        else:
            P.append(f"no task_done for reassigned task {first['task']}")
        last = []
        for e in re:
            d = [x for x in dones.get(e["task"], [])
                 if x["attempt"] > e["attempt"]]
            if d:
                last.append(d[0]["ts"])
        if len(last) == len(re):
            r["all"] = max(last) - t_kill
    resp = [e for e in after if e["event"] == "worker_respawned"
            and e.get("worker") == slot]
    if resp:
        r["respawn"] = resp[0]["ts"] - t_kill
    else:
        P.append("no worker_respawned")
    bd = [e for e in evs if e["event"] == "batch_done" and e.get("batch") == bid]
    if bd:
        r["batch_s"] = bd[0]["seconds"]
    P += c.check_results(bid, ntasks)
    wait_ready(c, 2, pid)
    return r


def stats(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "n/a", "n/a"
    return B.fmt(B.median(xs)), B.fmt(max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--heartbeats", default="1000,100", help="ms, comma list")
    ap.add_argument("--tasks", type=int, default=24)
    ap.add_argument("--task-seconds", type=float, default=0.5)
    ap.add_argument("--min-delay", type=float, default=0.3)
    ap.add_argument("--max-delay", type=float, default=2.5)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--bin", default=os.path.join(B.REPO, "bin"))
    ap.add_argument("--signal", choices=("KILL", "STOP"), default="KILL",
                    help="what hits the worker (default KILL)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    a = ap.parse_args()
    hbs = [int(x) for x in a.heartbeats.split(",")]
    seed = a.seed if a.seed is not None else int(time.time())
    rng = random.Random(seed)

    B.install_signal_handlers()
    info = B.machine_info()
    work = B.make_workdir("ftfarm-bench-recovery-")
    B.log(f"work dir {work}, seed {seed}")
    bindir = B.snapshot_bin(a.bin, work)
    binid = B.bin_id(a.bin, bindir)
    batch = B.write_batch(os.path.join(work, "batch.json"), "sleeps",
                          [{"type": "sleep", "seconds": a.task_seconds}]
                          * a.tasks)
    clusters, results, problems = {}, {h: [] for h in hbs}, []
    try:
        for h in hbs:
            c = B.Cluster(bindir, work, f"hb{h}",
                          [{"name": "n1", "host": "localhost", "workers": 2}],
                          heartbeat_ms=h, task_events=True, respawn_limit=1000)
            B.log(f"start {c.name}")
            c.start()
            clusters[h] = c
        for i in range(a.trials):
            order = hbs if i % 2 == 0 else hbs[::-1]
            for h in order:
                r = trial(clusters[h], h, batch, a.tasks, rng, a)
                results[h].append(r)
                B.log(f"trial {i + 1} hb {h}: slot {r['slot']} pid {r['pid']}: "
                      + ", ".join(f"{k} {r[k]:.3f}" for k in
                                  ("detect", "reassign", "done", "all",
                                   "respawn") if k in r)
                      + f", {r.get('nreassigned')} reassigned, reason "
                      f"{r.get('reason')!r}"
                      + (f"; PROBLEMS {r['problems']}" if r["problems"] else ""))
                problems += [f"hb {h} batch {r['batch']}: {p}"
                             for p in r["problems"]]
    finally:
        for c in clusters.values():
            B.log(f"stop {c.name}")
            c.stop()
    for c in clusters.values():
        problems += c.log_problems(ignore=("worker_dead: no answer to a ping",
                                             "worker_dead: its process exited"))

    print("## Failure detection and recovery\n")
    print(B.machine_line(info) + f"; {binid}\n")
    print("Command: `/usr/bin/python3 scripts/bench/recovery.py "
          f"{' '.join(sys.argv[1:])}".rstrip() + "`" + f" (seed {seed})\n")
    hit = "SIGKILLed" if a.signal == "KILL" else "SIGSTOPped"
    print(f"2 workers (1 node), batches of {a.tasks} x sleep "
          f"{a.task_seconds} s, one busy worker {hit} per trial at a "
          f"random moment ({a.min_delay}-{a.max_delay} s after submission); "
          f"times in seconds from the kill, median and max over "
          f"{a.trials} trials per setting.\n")
    rows = []
    for h in hbs:
        rs = results[h]
        det = [r.get("detect") for r in rs]
        dm, dx = stats(det)
        ok = [d for d in det if d is not None]
        within = sum(1 for d in ok if d <= 2 * h / 1000)
        row = [h, len(rs), dm, dx,
               B.fmt(B.median(ok) / (h / 1000), 2) if ok else "n/a",
               B.fmt(max(ok) / (h / 1000), 2) if ok else "n/a",
               f"{within}/{len(rs)}"]
        for k in ("reassign", "done", "all", "respawn", "batch_s"):
            row += list(stats([r.get(k) for r in rs]))
        rows.append(row)
    print(B.table(["heartbeat ms", "trials", "detect med", "detect max",
                   "detect/hb med", "detect/hb max", "detect <= 2 hb",
                   "reassigned med", "reassigned max",
                   "task done med", "task done max",
                   "all lost tasks done med", "all lost tasks done max",
                   "respawned med", "respawned max",
                   "batch s med", "batch s max"], rows))
    print()
    rows = []
    for h in hbs:
        for i, r in enumerate(results[h]):
            rows.append([h, i + 1, r["slot"], B.fmt(r.get("detect", float("nan"))),
                         B.fmt(r.get("done", float("nan"))),
                         r.get("nreassigned"), r.get("late_results"),
                         r.get("reason")])
    print("Per trial:\n")
    print(B.table(["heartbeat ms", "trial", "worker", "detect s",
                   "task done s", "tasks reassigned",
                   "results of the victim received after the kill",
                   "reason"], rows))
    print()
    nb = a.tasks * a.task_seconds / 2
    print(f"(A batch without a fault takes about {nb:.1f} s of sleeping on 2 "
          f"workers.)\n")
    for h in hbs:
        ok = [r["detect"] for r in results[h] if "detect" in r]
        if not ok:
            continue
        worst = max(ok)
        lim = 2 * h / 1000
        verdict = ("met" if worst <= lim else
                   f"missed: worst {worst:.3f} s is {worst - lim:.3f} s "
                   f"({100 * (worst / lim - 1):.0f}%) over")
        print(f"Goal: detection within 2 x heartbeat ({lim:.1f} s) at "
              f"{h} ms: {verdict}; median {B.median(ok):.3f} s.  ")
    print()
    B.print_problems("Problems seen (event/result checks, mpirun.log, master.log warnings):", problems, 80)
    B.finish(work, a.keep)


if __name__ == "__main__":
    main()
