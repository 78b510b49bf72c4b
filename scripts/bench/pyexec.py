#!/usr/bin/python3
"""Python executors side by side: ftfarm.Executor, Dask distributed and
mpi4py.futures, on 2 workers each (issue 45).

    /usr/bin/python3 scripts/bench/pyexec.py [--rounds 5] [--bin DIR]
        [--only ftfarm,dask,mpi4py] [--n-ftfarm 1000000] [--n-dask 5000]
        [--n-mpi4py-1 20000] [--n-mpi4py-1000 1000000] [--true 600]
        [--rtt 300] [--json FILE] [--keep]

The contenders, 2 workers each:
  ftfarm   ftfarm.Executor (this tree's python/) on a cluster of 1 node x 2
           slots: a config of its own in a temp dir, with copies of bin/
           and python/, started by `ftfarm start` and stopped at the end
  dask     Debian's python3-distributed: LocalCluster(n_workers=2,
           threads_per_worker=1, processes=True) and a Client; calls with
           pure=False (each runs: none is taken from an earlier result)
  mpi4py   Debian's python3-mpi4py: MPIPoolExecutor(max_workers=2) under
           `mpirun -n 1` (the pool spawns its 2 workers), maps with
           chunksize 1 and 1000

The workloads, the same for each, every result checked:
  noop  a map of a function that returns its argument over N items
        (ftfarm: 1,000,000; the others as many as they do in some
        seconds), client-timed from the call to the last result read:
        calls/s
  true  a map of 600 calls that each run `true` (subprocess.run),
        client-timed: seconds
  rtt   one call's round trip, `submit(f, i).result()`: the median of
        300 after 30 for warm-up, in ms
  rss   the client's peak RSS over its noop map: each noop map runs in a
        child process of its own (after a warm-up map of 1,000), which
        reports its ru_maxrss and the VmRSS it had before the map

Every measurement is a child process of its own (Dask's cluster and
mpirun's pool start and stop with it; ftfarm's cluster stays up, an
Executor is made in each child); each warms up before it times.  A round
runs every contender once (noop, then true and rtt), the order rotating
from round to round, so that the machine's noise hits each alike.  The
ftfarm batch of every child is checked: finished, each task exactly once,
all ok.  Medians over the rounds; ratios are medians of per-round ratios.
Then the issue's goals, checked against the medians.  Markdown on stdout,
progress on stderr, every measurement in --json FILE.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

HERE = os.path.abspath(__file__)
MPI_ARGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
            "--mca", "btl", "self,vader,tcp", "--mca", "mpi_yield_when_idle",
            "1", "--mca", "btl_tcp_if_include", "lo", "--mca",
            "oob_tcp_if_include", "lo"]
CONTENDERS = ("ftfarm", "dask", "mpi4py")
WARM_MAP = 1000                 # calls of the warm-up map before a noop map
WARM_RTT = 30                   # round trips before the timed ones
CHILD_TIMEOUT = 1800            # seconds a child may take
MIB = 1024 * 1024

GOAL_RATE = 100_000             # no-op calls/s over the map of 1,000,000
GOAL_RTT_MS = 1.0               # median round trip
GOAL_RSS_MIB = 768              # client peak RSS over that map
GOAL_X_DASK = 50                # times Dask's no-op rate, same run


# ---- what the workers run ----

def noop(x):
    return x


def run_true(i):
    subprocess.run(["true"], check=True)
    return i


# ---- the children: one measurement each, one JSON line on stdout ----

def vm_rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def timed_map(start, n):
    """Start a map (START() returns an iterator of its N results) and read
    its results, checking each is its index: the seconds from the start
    to the last result."""
    t0 = time.perf_counter()
    k = 0
    for r in start():
        if r != k:
            raise SystemExit(f"result {k} is {r!r}")
        k += 1
    dt = time.perf_counter() - t0
    if k != n:
        raise SystemExit(f"{k} results of {n} calls")
    return dt


def round_trips(call, n):
    """The seconds of N calls of CALL(i), after WARM_RTT."""
    for i in range(WARM_RTT):
        call(i)
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        if call(i) != i:
            raise SystemExit(f"round trip {i}: a wrong result")
        out.append(time.perf_counter() - t0)
    return out


def child_ftfarm(a, rec):
    sys.path.insert(0, a.python)
    import ftfarm
    with ftfarm.Executor(a.config, name=f"pyexec-{a.what}") as ex:
        rec["batch"] = ex.batch
        if a.what == "noop":
            timed_map(lambda: ex.map(noop, range(WARM_MAP)), WARM_MAP)
            rec["rss_before_kib"] = vm_rss_kib()
            rec["noop"] = {"ftfarm": [a.n, timed_map(
                lambda: ex.map(noop, range(a.n)), a.n)]}
            return
        rec["true"] = {"ftfarm": timed_map(
            lambda: ex.map(run_true, range(a.true)), a.true)}
        rec["rtt"] = {"ftfarm": round_trips(
            lambda i: ex.submit(noop, i).result(), a.rtt)}


def child_dask(a, rec):
    import logging
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1,
                      processes=True) as lc, Client(lc) as c:
        def dmap(fn, n):
            return lambda: iter(c.gather(c.map(fn, range(n), pure=False)))
        if a.what == "noop":
            timed_map(dmap(noop, WARM_MAP), WARM_MAP)
            rec["rss_before_kib"] = vm_rss_kib()
            rec["noop"] = {"dask": [a.n, timed_map(dmap(noop, a.n), a.n)]}
            return
        rec["true"] = {"dask": timed_map(dmap(run_true, a.true), a.true)}
        rec["rtt"] = {"dask": round_trips(
            lambda i: c.submit(noop, i, pure=False).result(), a.rtt)}


def child_mpi4py(a, rec):
    from mpi4py.futures import MPIPoolExecutor
    with MPIPoolExecutor(max_workers=2) as ex:
        ex.bootup(wait=True)
        runs = ((1, a.n1), (1000, a.n)) if a.what == "noop" else \
            ((1, a.true), (1000, a.true))
        fn = noop if a.what == "noop" else run_true
        for cs, _ in runs:
            timed_map(lambda: ex.map(fn, range(WARM_MAP), chunksize=cs),
                      WARM_MAP)
        rec["rss_before_kib"] = vm_rss_kib()
        got = {f"mpi4py-cs{cs}": timed_map(
            lambda: ex.map(fn, range(n), chunksize=cs), n)
            for cs, n in runs}
        if a.what == "noop":
            rec["noop"] = {k: [n, got[k]] for k, (_, n) in zip(got, runs)}
            return
        rec["true"] = got
        rec["rtt"] = {"mpi4py": round_trips(
            lambda i: ex.submit(noop, i).result(), a.rtt)}


def child_main(a):
    rec = {"contender": a.child, "what": a.what}
    {"ftfarm": child_ftfarm, "dask": child_dask,
     "mpi4py": child_mpi4py}[a.child](a, rec)
    rec["maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(rec), flush=True)


# ---- the parent ----

class Bench:
    """The run: the ftfarm cluster, the children, what they measured."""

    def __init__(self, a, work):
        self.a = a
        self.work = work
        self.records = []
        self.problems = []
        self.loads = []
        self.cluster = None

    def start_ftfarm(self):
        """Copies of bin/ and python/ side by side (the python plugin finds
        the package beside it), and a cluster of 1 node x 2 slots."""
        bindir = B.snapshot_bin(self.a.bin, self.work)
        self.python = os.path.join(self.work, "python")
        shutil.copytree(os.path.join(os.path.dirname(self.a.bin),
                                     "python"), self.python,
                        ignore=shutil.ignore_patterns("__pycache__"))
        self.bin_id = B.bin_id(self.a.bin, bindir)
        self.cluster = B.Cluster(bindir, self.work, "py", [
            {"name": "node1", "host": "localhost", "workers": 2}],
            heartbeat_ms=1000)
        self.cluster.start()

    def child(self, who, what):
        """Run one measurement; its record, or None (a problem noted)."""
        a = self.a
        cmd = [sys.executable, HERE, "--child", who, "--what", what,
               "--true", str(a.true), "--rtt", str(a.rtt)]
        if who == "ftfarm":
            cmd += ["--n", str(a.n_ftfarm), "--config", self.cluster.cfg,
                    "--python", self.python]
        elif who == "dask":
            cmd += ["--n", str(a.n_dask)]
        else:
            cmd = [B.MPIRUN, *MPI_ARGS, "-n", "1", *cmd,
                   "--n", str(a.n_mpi4py_1000), "--n1", str(a.n_mpi4py_1)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=CHILD_TIMEOUT)
        except BaseException:
            os.killpg(p.pid, signal.SIGKILL)    # ours, and what it made
            p.wait()
            raise
        recs = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        if p.returncode != 0 or not recs:
            self.problems.append(f"{who} {what}: exit {p.returncode}: "
                                 f"{err.strip()[-600:]}")
            return None
        rec = recs[-1]
        if who == "ftfarm":
            self.check_batch(rec["batch"], what)
        return rec

    def check_batch(self, bid, what):
        """The executor's batch: finished, every task once and ok."""
        row = json.loads(self.cluster.run("batch", str(bid), "--json").stdout)
        tasks = set()
        lines = 0
        with open(os.path.join(self.cluster.batch_dir(bid),
                               "results.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                lines += 1
                tasks.add(r["task"])
                if r["status"] != "ok":
                    self.problems.append(f"ftfarm {what}: task {r['task']} "
                                         f"{r['status']}")
        if row.get("state") != "finished" or lines != row.get("total") or \
                len(tasks) != lines or row.get("ok") != lines:
            self.problems.append(f"ftfarm {what}: batch {bid}: {row}, "
                                 f"{lines} lines, {len(tasks)} tasks")

    def run(self):
        who = [c for c in CONTENDERS if c in self.a.only]
        for r in range(self.a.rounds):
            order = who[r % len(who):] + who[:r % len(who)]
            self.loads.append(os.getloadavg()[0])
            for w in order:
                for what in ("noop", "true"):
                    B.log(f"round {r + 1}: {w} {what}")
                    rec = self.child(w, what)
                    if rec is not None:
                        rec["round"] = r
                        self.records.append(rec)
            self.loads.append(os.getloadavg()[0])


# ---- the report ----

def per_round(records, key):
    """{round: {name: value}} of the measurements under KEY."""
    out = {}
    for rec in records:
        for name, v in rec.get(key, {}).items():
            out.setdefault(rec["round"], {})[name] = v
    return out


def names_of(rounds):
    seen = []
    for d in rounds.values():
        for k in d:
            if k not in seen:
                seen.append(k)
    return seen


def ratio_median(rounds, name, base, f):
    """The median over rounds of f(name) / f(base)."""
    rs = [f(d[name]) / f(d[base]) for d in rounds.values()
          if name in d and base in d and f(d[base]) > 0]
    return B.median(rs)


def report_noop(rounds):
    def rate(v):
        return v[0] / v[1]
    rows = []
    for name in names_of(rounds):
        rates = [rate(d[name]) for d in rounds.values() if name in d]
        calls = max(d[name][0] for d in rounds.values() if name in d)
        rows.append([name, f"{calls:,}", B.fmt_int(B.median(rates)),
                     f"{B.fmt_int(min(rates))}-{B.fmt_int(max(rates))}",
                     B.fmt(ratio_median(rounds, "ftfarm", name, rate), 2)
                     if name != "ftfarm" else ""])
    print("No-op calls, `map`, client-timed (calls/s; x: ftfarm's rate "
          "over this one's, median of per-round ratios):\n")
    print(B.table(["contender", "calls a map", "calls/s", "range",
                   "ftfarm x"], rows))
    print()


def report_true(rounds):
    rows = []
    for name in names_of(rounds):
        ts = [d[name] for d in rounds.values() if name in d]
        rows.append([name, B.fmt(B.median(ts)),
                     f"{B.fmt(min(ts))}-{B.fmt(max(ts))}",
                     B.fmt(ratio_median(rounds, name, "ftfarm",
                                        lambda v: v), 2)
                     if name != "ftfarm" else ""])
    print("600 calls that run `true`, `map`, client-timed (seconds; x: this "
          "one's time over ftfarm's, median of per-round ratios):\n")
    print(B.table(["contender", "s", "range", "x ftfarm's time"], rows))
    print()


def report_rtt(rounds):
    rows = []
    for name in names_of(rounds):
        meds = [statistics.median(d[name]) * 1e3 for d in rounds.values()
                if name in d]
        p90 = [statistics.quantiles(d[name], n=10)[-1] * 1e3
               for d in rounds.values() if name in d]
        rows.append([name, B.fmt(B.median(meds)),
                     f"{B.fmt(min(meds))}-{B.fmt(max(meds))}",
                     B.fmt(B.median(p90))])
    print("One call's round trip, `submit(f, i).result()` (ms: the median "
          "of each round's 300, then their median; p90: of each round's "
          "300):\n")
    print(B.table(["contender", "median ms", "range", "p90 ms"], rows))
    print()


def report_rss(records):
    rows = []
    for who in CONTENDERS:
        recs = [r for r in records if r["contender"] == who and
                r["what"] == "noop"]
        if not recs:
            continue
        before = B.median([r["rss_before_kib"] / 1024 for r in recs])
        peak = [r["maxrss_kib"] / 1024 for r in recs]
        maps = ", ".join(f"{n}: {recs[0]['noop'][n][0]:,}"
                         for n in recs[0]["noop"])
        rows.append([who, maps, B.fmt(before, 1), B.fmt(B.median(peak), 1),
                     B.fmt(max(peak), 1)])
    print("The client's peak RSS over its no-op maps (MiB; the child "
          "process's ru_maxrss; Dask's holds its scheduler, mpi4py's both "
          "maps):\n")
    print(B.table(["contender", "maps", "RSS before", "peak (median)",
                   "peak (max)"], rows))
    print()


def report_goals(noop, rtt, records):
    def rate(v):
        return v[0] / v[1]
    got = [rate(d["ftfarm"]) for d in noop.values() if "ftfarm" in d]
    calls = max((d["ftfarm"][0] for d in noop.values() if "ftfarm" in d),
                default=0)
    meds = [statistics.median(d["ftfarm"]) * 1e3 for d in rtt.values()
            if "ftfarm" in d]
    peaks = [r["maxrss_kib"] / 1024 for r in records
             if r["contender"] == "ftfarm" and r["what"] == "noop"]
    x_dask = ratio_median(noop, "ftfarm", "dask", rate)
    rows = []

    def goal(what, want, value, ok):
        rows.append([what, want, value,
                     "n/a" if value == "n/a" else ("met" if ok else
                                                   "NOT met")])
    r = B.median(got)
    goal(f"no-op calls/s, map of {calls:,}", f">= {GOAL_RATE:,}",
         B.fmt_int(r), r >= GOAL_RATE)
    m = B.median(meds)
    goal("round trip, median of 300", f"<= {GOAL_RTT_MS} ms",
         B.fmt(m) + " ms" if meds else "n/a", m <= GOAL_RTT_MS)
    p = max(peaks) if peaks else float("nan")
    goal("client peak RSS over that map (the largest)",
         f"<= {GOAL_RSS_MIB} MiB", B.fmt(p, 1) + " MiB" if peaks else "n/a",
         p <= GOAL_RSS_MIB)
    goal("no-op rate, x Dask's in the same rounds", f">= {GOAL_X_DASK} x",
         B.fmt(x_dask, 0) + " x" if x_dask == x_dask else "n/a",
         x_dask >= GOAL_X_DASK)
    print("The issue's goals (ftfarm, medians over the rounds):\n")
    print(B.table(["goal", "wanted", "measured", ""], rows))
    print()


def report(bench, info, argv):
    a = bench.a
    print("## Python executors side by side\n")
    print(B.machine_line(info) + "\n")
    if bench.cluster is not None:
        print(f"ftfarm: {bench.bin_id}\n")
    print(f"Command: `/usr/bin/python3 scripts/bench/pyexec.py "
          f"{' '.join(argv)}`\n")
    print(f"{a.rounds} rounds; load average (1 min) at the rounds' starts "
          f"and ends: {B.fmt(min(bench.loads), 2)}-"
          f"{B.fmt(max(bench.loads), 2)} (median "
          f"{B.fmt(B.median(bench.loads), 2)}).\n")
    noop = per_round(bench.records, "noop")
    rtt = per_round(bench.records, "rtt")
    report_noop(noop)
    report_true(per_round(bench.records, "true"))
    report_rtt(rtt)
    report_rss(bench.records)
    if "ftfarm" in a.only:
        report_goals(noop, rtt, bench.records)
    B.print_problems("Problems seen:", bench.problems, 20)


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(B.REPO, "bin"))
    ap.add_argument("--only", default=",".join(CONTENDERS))
    ap.add_argument("--n-ftfarm", type=int, default=1_000_000)
    ap.add_argument("--n-dask", type=int, default=5000)
    ap.add_argument("--n-mpi4py-1", type=int, default=20000)
    ap.add_argument("--n-mpi4py-1000", type=int, default=1_000_000)
    ap.add_argument("--true", type=int, default=600)
    ap.add_argument("--rtt", type=int, default=300)
    ap.add_argument("--json", help="write every measurement there")
    ap.add_argument("--keep", action="store_true")
    # A child's own arguments.
    ap.add_argument("--child", choices=CONTENDERS, help=argparse.SUPPRESS)
    ap.add_argument("--what", choices=("noop", "true"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--n1", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--python", help=argparse.SUPPRESS)
    return ap.parse_args()


def main():
    a = parse()
    if a.child:
        child_main(a)
        return
    a.only = a.only.split(",")
    B.install_signal_handlers()
    info = B.machine_info()
    work = B.make_workdir("ftfarm-pyexec-")
    bench = Bench(a, work)
    try:
        if "ftfarm" in a.only:
            bench.start_ftfarm()
        bench.run()
    finally:
        if bench.cluster is not None:
            bench.problems += bench.cluster.log_problems()
            bench.cluster.stop()
        B.finish(work, a.keep)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": info, "records": bench.records,
                       "loads": bench.loads}, f)
    report(bench, info, sys.argv[1:])


if __name__ == "__main__":
    main()
