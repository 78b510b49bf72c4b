#!/usr/bin/python3
"""No-op throughput with the HTTP listener on and scraped, against off.

    /usr/bin/python3 scripts/bench/http_listener.py [--tasks 1000000] [--reps 7]
                                           [--workers 2] [--period 0.1]

Two clusters side by side, alike but for "http" (1 node x --workers
workers, task_events false, each its own config and state dir, both up
for the whole run):
  off   no HTTP listener
  on    "http": {"listen": "127.0.0.1:0"}, and while its batch runs one
        client GETs /metrics every --period seconds (a thread of this
        script, keep-alive off: a new connection per scrape, as Prometheus
        without keep-alive would)
Each round submits one batch of --tasks no-op tasks ({"type": "sleep",
"seconds": 0}) with `ftfarm submit --wait` to each cluster, in an order
that alternates from round to round.  "master" time is summary.json's
"seconds", "client" the wall time of submit --wait.  Ratios on/off of
tasks/s are medians of per-round ratios (goal: on >= 0.97 x off).
results.jsonl is checked after every batch (each task exactly once, ok).
The scrapes' latency and the age of the figures they got are reported
too.

Prints markdown tables on stdout, progress on stderr.
"""
import argparse
import os
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

NOOP = {"type": "sleep", "seconds": 0}


class Scraper(threading.Thread):
    """GET URL every PERIOD seconds until stopped; latencies and the
    snapshot ages it saw."""

    def __init__(self, url, period):
        super().__init__(daemon=True)
        self.url, self.period = url, period
        self.halt = threading.Event()
        self.lat, self.age, self.errors = [], [], 0
        self.status_sizes = []      # of /status.json, once a second
        self.builds = []            # (snapshots built, their seconds)

    def status_json(self):
        url = self.url.rsplit("/", 1)[0] + "/status.json"
        with urllib.request.urlopen(url, timeout=10) as r:
            self.status_sizes.append(len(r.read()))

    def run(self):
        nxt = time.monotonic()
        n = 0
        while not self.halt.is_set():
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as r:
                    body = r.read().decode()
                self.lat.append(time.monotonic() - t0)
                built = {}
                for line in body.splitlines():
                    if line.startswith("ftfarm_snapshot_age_seconds "):
                        self.age.append(float(line.split()[1]))
                    elif line.startswith("ftfarm_snapshot"):
                        k, v = line.split()
                        built[k] = float(v)
                self.builds.append(
                    (built.get("ftfarm_snapshots_built_total", 0),
                     built.get("ftfarm_snapshot_build_seconds_total", 0)))
                n += 1
                if n % 10 == 0:
                    self.status_json()
            except OSError:
                self.errors += 1
            nxt += self.period
            self.halt.wait(max(0, nxt - time.monotonic()))

    def stop(self):
        self.halt.set()
        self.join(15)


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run_batch(c, path, ntasks, scrape_url, period, problems):
    """One batch on cluster C (scraped when SCRAPE_URL): (master s, client
    s, scraper or None)."""
    sc = Scraper(scrape_url, period) if scrape_url else None
    if sc:
        sc.start()
    try:
        bid, client = c.submit(path)
    finally:
        if sc:
            sc.stop()
    master = c.summary(bid)["seconds"]
    problems += [f"{c.name} batch {bid}: {p}"
                 for p in c.check_results(bid, ntasks)]
    return master, client, sc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=1000000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--period", type=float, default=0.1)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    B.install_signal_handlers()
    info = B.machine_info()
    load0 = os.getloadavg()
    work = B.make_workdir("ftfarm-bench-http-")
    bindir = B.snapshot_bin(os.path.join(B.REPO, "bin"), work)
    binid = B.bin_id(os.path.join(B.REPO, "bin"), bindir)
    nodes = [{"name": "n1", "host": "localhost", "workers": a.workers}]
    off = B.Cluster(bindir, work, "off", nodes, task_events=False)
    on = B.Cluster(bindir, work, "on", nodes, task_events=False,
                   http={"listen": "127.0.0.1:0"})
    clusters = {"off": off, "on": on}
    path = B.write_batch(os.path.join(work, "noop.json"), "noop",
                         [NOOP] * a.tasks)
    warm = B.write_batch(os.path.join(work, "warm.json"), "warm",
                         [NOOP] * 20000)
    times = {"off": [], "on": []}
    scrapes, problems = [], []
    try:
        for c in clusters.values():
            B.log(f"starting {c.name}")
            c.start()
            c.submit(warm)
        url = on.status()["http"] + "metrics"
        for r in range(a.reps):
            order = ("off", "on") if r % 2 == 0 else ("on", "off")
            for name in order:
                master, client, sc = run_batch(
                    clusters[name], path, a.tasks,
                    url if name == "on" else None, a.period, problems)
                times[name].append((master, client))
                if sc:
                    scrapes.append(sc)
                B.log(f"round {r + 1}/{a.reps} {name}: master {master:.3f} s,"
                      f" client {client:.3f} s"
                      + (f", {len(sc.lat)} scrapes" if sc else ""))
        for c in clusters.values():
            problems += c.log_problems()
    finally:
        for c in clusters.values():
            c.stop()
    load1 = os.getloadavg()
    report(a, info, binid, load0, load1, times, scrapes, problems)
    B.finish(work, a.keep)


def report(a, info, binid, load0, load1, times, scrapes, problems):
    print("## HTTP listener: no-op throughput, listener on and scraped vs "
          "off\n")
    print(B.machine_line(info) + f"; {binid}\n")
    print(f"Load average (1, 5, 15 min) at the start: "
          f"{load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; at the end: "
          f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} (2 CPUs, shared)\n")
    print(f"Command: `/usr/bin/python3 scripts/bench/http_listener.py --tasks "
          f"{a.tasks} --reps {a.reps} --workers {a.workers} --period "
          f"{a.period}`\n")
    print(f"{a.tasks:,} no-op tasks per batch, 1 node x {a.workers} workers, "
          f"task_events off, {a.reps} rounds in alternating order; medians "
          f"(min-max).  on: the listener up and /metrics fetched every "
          f"{a.period * 1000:.0f} ms while the batch runs.\n")
    rows = []
    for name in ("off", "on"):
        ms = [t[0] for t in times[name]]
        cs = [t[1] for t in times[name]]
        rows.append([name, B.fmt(B.median(ms)),
                     B.fmt_int(a.tasks / B.median(ms)),
                     f"[{B.fmt_int(a.tasks / max(ms))}-"
                     f"{B.fmt_int(a.tasks / min(ms))}]",
                     B.fmt(B.median(cs)), B.fmt_int(a.tasks / B.median(cs))])
    print(B.table(["listener", "master s", "master tasks/s", "(range)",
                   "client s", "client tasks/s"], rows))
    rm = [off[0] / on[0] for off, on in zip(times["off"], times["on"])]
    rc = [off[1] / on[1] for off, on in zip(times["off"], times["on"])]
    print()
    print(B.table(["ratio on/off of tasks/s", "median", "(min-max)"], [
        ["master", B.fmt(B.median(rm)), f"[{B.fmt(min(rm))}-{B.fmt(max(rm))}]"],
        ["client", B.fmt(B.median(rc)), f"[{B.fmt(min(rc))}-{B.fmt(max(rc))}]"],
    ]))
    lat = [x for s in scrapes for x in s.lat]
    age = [x for s in scrapes for x in s.age]
    errs = sum(s.errors for s in scrapes)
    print()
    print(B.table(["scrapes during batches", "count", "errors",
                   "latency median ms", "p99 ms", "max ms",
                   "figures' age median ms", "max ms"], [[
        "GET /metrics", len(lat), errs, B.fmt(1000 * pct(lat, 0.5), 1),
        B.fmt(1000 * pct(lat, 0.99), 1), B.fmt(1000 * max(lat or [0]), 1),
        B.fmt(1000 * pct(age, 0.5), 1), B.fmt(1000 * max(age or [0]), 1)]]))
    # What the snapshots cost the loop during each batch: the figures of
    # its last scrape less those of its first.
    cost = [(s.builds[-1][0] - s.builds[0][0],
             s.builds[-1][1] - s.builds[0][1]) for s in scrapes
            if len(s.builds) >= 2]
    if cost:
        n = sum(c[0] for c in cost)
        secs = sum(c[1] for c in cost)
        on_s = sum(t[0] for t in times["on"])
        print(f"\nSnapshots built by the loop during the scraped batches: "
              f"{n:,.0f}, {1000 * secs:.1f} ms in all, "
              f"{1000 * secs / max(n, 1):.3f} ms each: "
              f"{100 * secs / on_s:.3f} % of those batches' master time.")
    sizes = [x for s in scrapes for x in s.status_sizes]
    if sizes:
        print(f"\n/status.json (what the status page polls) during a batch "
              f"of {a.tasks:,} tasks: {min(sizes):,}-{max(sizes):,} bytes.")
    goal = B.median(rm)
    print(f"\nGoal on/off >= 0.97 (master timing): {goal:.3f}, "
          f"{'met' if goal >= 0.97 else 'NOT met'}.\n")
    B.print_problems("Problems seen (result checks, mpirun.log, master.log "
                     "warnings):", problems, 20)


if __name__ == "__main__":
    main()
