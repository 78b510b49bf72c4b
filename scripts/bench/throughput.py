#!/usr/bin/python3
"""Throughput of no-op tasks: ftfarm vs mpi4py.futures.MPIPoolExecutor.

    /usr/bin/python3 scripts/bench/throughput.py [--tasks 200000] [--reps 5]

ftfarm configurations (each its own cluster, config and state dir under a
temp dir, all up for the whole run, idle when not measured):
  w1        1 node  x 1 worker,  task_events false
  w1-ev     1 node  x 1 worker,  task_events true
  w2        1 node  x 2 workers, task_events false
  w2-ev     1 node  x 2 workers, task_events true
  w2-2n     2 nodes x 1 worker,  task_events false
Each cluster gets a warm-up batch, then every round submits one batch of
--tasks no-op tasks ({"type":"sleep","seconds":0}) with `ftfarm submit
--wait` to each cluster in turn.  Two times per batch: "master" is
summary.json's "seconds" (the master's clock from queueing the batch to its
last result); "client" is the wall time of `ftfarm submit --wait` (reading
and sending the batch file, validation, batch.json, the run, the reply).
results.jsonl is checked after each batch: every task exactly once, all ok.

In the same rounds, mpi4py.futures.MPIPoolExecutor (scripts/bench/
mpi4py_noop.py under `mpirun.openmpi -n 1`, the pool spawning max_workers
workers, with the same transport options as ftfarm's launcher) maps a no-op
function over the same number of tasks with chunksize --chunksize and with
chunksize 1.  A round runs every configuration once, in rotating order, so
that machine noise hits all of them alike; ratios are medians of per-round
ratios.

Prints markdown tables on stdout, progress on stderr.
"""
import argparse
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

NOOP = {"type": "sleep", "seconds": 0}

MPI_ARGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
            "--mca", "btl", "self,vader,tcp", "--mca", "mpi_yield_when_idle",
            "1", "--mca", "btl_tcp_if_include", "lo", "--mca",
            "oob_tcp_if_include", "lo"]


def ftfarm_configs(workers):
    out = []
    for w in workers:
        for ev in (False, True):
            out.append((f"w{w}" + ("-ev" if ev else ""), w, 1, ev))
        if w > 1:
            out.append((f"w{w}-{w}n", w, w, False))
    return out


def run_mpi4py(workers, runs, warmup, timeout):
    """One mpirun: a pool of WORKERS, one timed map per (chunksize, tasks)."""
    cmd = [B.MPIRUN, *MPI_ARGS, "-n", "1", "/usr/bin/python3",
           os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "mpi4py_noop.py"),
           "--workers", str(workers), "--reps", "1", "--warmup", str(warmup)]
    for cs, n in runs:
        cmd += ["--run", f"{cs}:{n}"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except BaseException:
        # Our own mpirun and what it spawned: its process group.
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.wait()
        raise
    if p.returncode != 0:
        raise RuntimeError(f"mpi4py run failed ({p.returncode}): {err.strip()}")
    res = {}
    for line in out.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            res[r["chunksize"]] = r["seconds"]
    return res, err.strip()


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=200000)
    ap.add_argument("--unchunked-tasks", type=int, default=None,
                    help="tasks of the mpi4py chunksize-1 map (default --tasks)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=10000)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--chunksize", type=int, default=1000)
    ap.add_argument("--no-mpi4py", action="store_true")
    ap.add_argument("--bin", default=os.path.join(B.REPO, "bin"))
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    a = ap.parse_args()
    unchunked = a.unchunked_tasks or a.tasks
    workers = [int(x) for x in a.workers.split(",")]

    B.install_signal_handlers()
    info = B.machine_info()
    work = B.make_workdir("ftfarm-bench-throughput-")
    B.log(f"work dir {work}")
    bindir = B.snapshot_bin(a.bin, work)
    binid = B.bin_id(a.bin, bindir)
    batch = B.write_batch(os.path.join(work, "batch.json"), "noop",
                          [NOOP] * a.tasks)
    warm = B.write_batch(os.path.join(work, "warmup.json"), "warmup",
                         [NOOP] * a.warmup)

    configs = ftfarm_configs(workers)
    clusters = {}
    ft = {c[0]: {"master": [], "client": [], "submit": [], "reply": []}
          for c in configs}
    m4 = {(w, cs): [] for w in workers for cs in (a.chunksize, 1)}
    problems, notes = [], []
    try:
        for name, w, nn, ev in configs:
            per = w // nn
            nodes = [{"name": f"n{i + 1}", "host": "localhost", "workers": per}
                     for i in range(nn)]
            c = B.Cluster(bindir, work, name, nodes, heartbeat_ms=1000,
                          task_events=ev)
            B.log(f"start {name}")
            c.start()
            clusters[name] = c
            bid, dt = c.submit(warm)
            problems += [f"{name} warm-up: {p}" for p in
                         c.check_results(bid, a.warmup)]

        jobs = [("ftfarm", cfg) for cfg in configs]
        if not a.no_mpi4py:
            jobs += [("mpi4py", w) for w in workers]
        for rep in range(a.reps):
            k = rep % len(jobs)
            for kind, what in jobs[k:] + jobs[:k]:
                if kind == "ftfarm":
                    name = what[0]
                    c = clusters[name]
                    off = c.events_size()
                    bid, dt = c.submit(batch)
                    s = c.summary(bid)["seconds"]
                    ft[name]["master"].append(s)
                    ft[name]["client"].append(dt)
                    ev = c.batch_events(bid, off)
                    w0, w1 = c.last_submit
                    ft[name]["submit"].append(ev["batch_submitted"]["ts"] - w0)
                    ft[name]["reply"].append(w1 - ev["batch_done"]["ts"])
                    B.log(f"round {rep + 1}: {name}: batch {bid} master "
                          f"{s:.3f} s ({a.tasks / s:,.0f}/s), client {dt:.3f} s")
                    problems += [f"{name} batch {bid}: {p}" for p in
                                 c.check_results(bid, a.tasks)]
                else:
                    w = what
                    runs = [(a.chunksize, a.tasks), (1, unchunked)]
                    if rep % 2:
                        runs.reverse()
                    res, err = run_mpi4py(w, runs, 1000, 3600)
                    if err:
                        notes.append(f"mpi4py w={w} stderr: {err[:300]}")
                    for cs, sec in res.items():
                        m4[(w, cs)].append(sec)
                        n = a.tasks if cs == a.chunksize else unchunked
                        B.log(f"round {rep + 1}: mpi4py w{w} chunksize {cs}: "
                              f"{sec:.3f} s ({n / sec:,.0f}/s)")
        for name, c in clusters.items():
            pid = B.read_pid(os.path.join(c.state, "master.pid"))
            kb = rss_kb(pid) if pid else None
            if kb:
                notes.append(f"{name}: master RSS after "
                             f"{a.reps + 1} batches ({a.reps * a.tasks + a.warmup:,} "
                             f"tasks): {kb / 1024:.0f} MiB")
    finally:
        for c in clusters.values():
            B.log(f"stop {c.name}")
            c.stop()
    for c in clusters.values():
        problems += c.log_problems()

    # ---- tables ----
    print("## Throughput of no-op tasks\n")
    print(B.machine_line(info) + f"; {binid}\n")
    print("Command: `/usr/bin/python3 scripts/bench/throughput.py "
          f"{' '.join(sys.argv[1:])}".rstrip() + "`" + "\n")
    print(f"{a.tasks:,} no-op tasks per batch, {a.reps} rounds, medians "
          f"(min-max in brackets). master = summary.json seconds; client = "
          f"wall time of `ftfarm submit --wait`, which also covers reading, "
          f"sending and validating the batch file (the last two columns split "
          f"it using the batch_submitted and batch_done events; the master "
          f"logs batch_submitted after queueing the tasks).\n")
    rows = []
    for name, w, nn, ev in configs:
        ms, cl = ft[name]["master"], ft[name]["client"]
        mm, cm = B.median(ms), B.median(cl)
        rows.append([name, w, nn, "on" if ev else "off",
                     B.fmt(mm), B.fmt_int(a.tasks / mm),
                     f"[{B.fmt_int(a.tasks / max(ms))}-{B.fmt_int(a.tasks / min(ms))}]",
                     B.fmt(1e6 * mm / a.tasks, 2),
                     B.fmt(cm), B.fmt_int(a.tasks / cm),
                     B.fmt(1e6 * cm / a.tasks, 2),
                     B.fmt(B.median(ft[name]["submit"])),
                     B.fmt(B.median(ft[name]["reply"]))])
    print(B.table(["config", "workers", "nodes", "task_events", "master s",
                   "master tasks/s", "(range)", "master us/task",
                   "client s", "client tasks/s", "client us/task",
                   "client start to batch queued s",
                   "batch done to client exit s"], rows))
    print()

    if not a.no_mpi4py:
        rows = []
        for w in workers:
            for cs in (a.chunksize, 1):
                xs = m4[(w, cs)]
                n = a.tasks if cs == a.chunksize else unchunked
                mm = B.median(xs)
                rows.append([w, cs, f"{n:,}", B.fmt(mm), B.fmt_int(n / mm),
                             f"[{B.fmt_int(n / max(xs))}-{B.fmt_int(n / min(xs))}]",
                             B.fmt(1e6 * mm / n, 2)])
        print("mpi4py.futures.MPIPoolExecutor, executor.map of a no-op "
              "function, same rounds:\n")
        print(B.table(["workers", "chunksize", "tasks", "s", "tasks/s",
                       "(range)", "us/task"], rows))
        print()

        rows = []
        for w in workers:
            name = f"w{w}"
            fm, fc = ft[name]["master"], ft[name]["client"]
            row = [w, B.fmt_int(a.tasks / B.median(fm))]
            for cs in (a.chunksize, 1):
                n = a.tasks if cs == a.chunksize else unchunked
                xs = m4[(w, cs)]
                # Rate ratios, round by round, then the median.
                r_m = B.median([(a.tasks / f) / (n / x) for f, x in zip(fm, xs)])
                r_c = B.median([(a.tasks / f) / (n / x) for f, x in zip(fc, xs)])
                row += [B.fmt_int(n / B.median(xs)), B.fmt(r_m, 2),
                        B.fmt(r_c, 2)]
            rows.append(row)
        print("Ratio ftfarm/mpi4py of tasks/s (ftfarm with task_events off; "
              "median of per-round ratios; >1 means ftfarm is faster):\n")
        print(B.table(["workers", "ftfarm tasks/s (master)",
                       f"mpi4py cs={a.chunksize} tasks/s",
                       f"ratio (master) cs={a.chunksize}",
                       f"ratio (client) cs={a.chunksize}",
                       "mpi4py cs=1 tasks/s", "ratio (master) cs=1",
                       "ratio (client) cs=1"], rows))
        print()

    rows = []
    for w in workers:
        off, on = ft[f"w{w}"]["master"], ft[f"w{w}-ev"]["master"]
        r = B.median([f / o for f, o in zip(off, on)])
        rows.append([w, B.fmt_int(a.tasks / B.median(off)),
                     B.fmt_int(a.tasks / B.median(on)), B.fmt(r, 2),
                     B.fmt(1e6 * (B.median(on) - B.median(off)) / a.tasks, 2)])
    print("Cost of per-task events (master timing; ratio = median of "
          "per-round on/off tasks/s):\n")
    print(B.table(["workers", "events off tasks/s", "events on tasks/s",
                   "on/off", "extra us/task"], rows))
    print()

    goal = 100000
    best = max(workers)
    rate = a.tasks / B.median(ft[f"w{best}"]["master"])
    crate = a.tasks / B.median(ft[f"w{best}"]["client"])
    for label, r in (("master timing", rate), ("client timing", crate)):
        verdict = ("met" if r >= goal else
                   f"missed by {goal - r:,.0f} tasks/s ({100 * (1 - r / goal):.0f}%)")
        print(f"Goal >= {goal:,} tasks/s ({best} workers, events off, "
              f"{label}): {r:,.0f} tasks/s, {verdict}.  ")
    print()
    if notes:
        print("Notes:\n")
        for n in notes:
            print(f"- {n}")
        print()
    B.print_problems("Problems seen (result checks, mpirun.log, master.log warnings):", problems, 60)
    B.finish(work, a.keep)


if __name__ == "__main__":
    main()
