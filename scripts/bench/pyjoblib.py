#!/usr/bin/python3
"""joblib and chains of dependent calls, side by side (issue 54).

    /usr/bin/python3 scripts/bench/pyjoblib.py [--rounds 5] [--bin DIR]
        [--calls 20000] [--links 1000] [--json FILE] [--keep]

joblib: N short calls (`delayed(square)(i)`, auto-batching, every result
checked) through Parallel on three backends of 2 workers each:
  ftfarm  the backend of `import ftfarm.joblib` on a cluster of 1 node x
          2 slots (copies of this tree's bin/ and python/), n_jobs=-1
  loky    joblib's own, Parallel(n_jobs=2)
  dask    joblib's "dask" backend on Debian's distributed:
          LocalCluster(n_workers=2, threads_per_worker=1, processes=True)
Client-timed from the Parallel call to its list: calls/s.

Chain: LINKS calls, each taking the previous one's value:
  ftfarm-futures  ex.submit(inc, previous_future): the call waits in the
                  cluster (futures as arguments, master/inputs.h)
  ftfarm-result   ex.submit(inc, previous.result()): through the client
  dask-futures    client.submit(inc, previous_future, pure=False)
Client-timed from the first submit to the last value: ms a link.

Each measurement is a child process of its own (loky's and Dask's
workers start and stop with it; the ftfarm cluster stays up, its
interpreters warm); each warms up with the same work before it times.
A round runs every contender once, the order rotating.  Medians over the
rounds; ratios are medians of per-round ratios.  Markdown on stdout.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

HERE = os.path.abspath(__file__)
JOBLIB = ("ftfarm", "loky", "dask")
CHAIN = ("ftfarm-futures", "ftfarm-result", "dask-futures")


def square(x):
    return x * x


def inc(x):
    return x + 1


def timed_joblib(who, n, config):
    import joblib
    if who == "ftfarm":
        import ftfarm.joblib  # noqa: F401
        ctx = joblib.parallel_backend("ftfarm", config=config)
        n_jobs, dask = -1, None
    elif who == "dask":
        from distributed import Client, LocalCluster
        cl = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None)
        dask = Client(cl)
        ctx = joblib.parallel_backend("dask")
        n_jobs = -1
    else:
        ctx = joblib.parallel_backend("loky")
        n_jobs, dask = 2, None
    want = [i * i for i in range(n)]
    with ctx:
        for _ in range(2):          # the first warms up
            t0 = time.perf_counter()
            out = joblib.Parallel(n_jobs=n_jobs)(
                joblib.delayed(square)(i) for i in range(n))
            dt = time.perf_counter() - t0
            assert out == want
    if dask is not None:
        dask.close()
        cl.close()
    return {"rate": n / dt}


def timed_chain(who, links, config):
    if who.startswith("ftfarm"):
        import ftfarm
        ex = ftfarm.Executor(config)
        ex.submit(inc, 0).result()
        submit = ex.submit
    else:
        from distributed import Client, LocalCluster
        cl = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None)
        dask = Client(cl)

        def submit(fn, x):
            return dask.submit(fn, x, pure=False)
    for _ in range(2):              # the first warms up
        t0 = time.perf_counter()
        f = submit(inc, 0)
        for _ in range(links - 1):
            f = submit(inc, f.result() if who == "ftfarm-result" else f)
        v = f.result()
        dt = time.perf_counter() - t0
        assert v == links
    if who.startswith("ftfarm"):
        ex.shutdown()
    else:
        dask.close()
        cl.close()
    return {"ms_link": dt / links * 1e3}


def child(a):
    sys.path.insert(0, a.python)
    sys.path.insert(0, os.path.dirname(HERE))
    if a.what == "joblib":
        rec = timed_joblib(a.child, a.calls, a.config)
    else:
        rec = timed_chain(a.child, a.links, a.config)
    print(json.dumps(rec))


def run_child(a, who, what, cluster, python):
    cmd = [sys.executable, HERE, "--child", who, "--what", what,
           "--calls", str(a.calls), "--links", str(a.links),
           "--config", cluster.cfg, "--python", python]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                       cwd=os.path.dirname(HERE))
    if p.returncode != 0:
        B.log(f"{who} {what}: exit {p.returncode}: {p.stderr[-800:]}")
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def ratio(rounds, num, den, key):
    rs = [r[num][key] / r[den][key] for r in rounds
          if r.get(num) and r.get(den)]
    return B.median(rs) if rs else float("nan")


def rows_of(rounds, names, key, show, versus):
    """A table's rows: each contender's median of KEY over ROUNDS (SHOW
    prints a figure), its range, and VERSUS(name): its ratio."""
    rows = []
    for who in names:
        v = [r[who][key] for r in rounds if r.get(who)]
        if v:
            rows.append([who, show(B.median(v)),
                         f"{show(min(v))}-{show(max(v))}",
                         B.fmt(versus(who), 2)])
    return rows


def report(a, jr, cr, info):
    print(f"## joblib: {a.calls:,} short calls, 2 workers each\n")
    print(B.table(["backend", "calls/s (median)", "range",
                   "ftfarm's rate / its"],
                  rows_of(jr, JOBLIB, "rate", B.fmt_int,
                          lambda w: ratio(jr, "ftfarm", w, "rate"))))
    print(f"\n## A chain of {a.links:,} dependent calls\n")
    print(B.table(["how", "ms a link (median)", "range",
                   "x ftfarm-futures"],
                  rows_of(cr, CHAIN, "ms_link", B.fmt,
                          lambda w: ratio(cr, w, "ftfarm-futures",
                                          "ms_link"))))
    print()
    loky = ratio(jr, "ftfarm", "loky", "rate")
    dask = ratio(jr, "ftfarm", "dask", "rate")
    link = B.median([r["ftfarm-futures"]["ms_link"] for r in cr
                     if r.get("ftfarm-futures")] or [float("nan")])
    print(B.table(["goal", "wanted", "measured", ""], [
        ["joblib rate vs loky", ">= 1 x", B.fmt(loky, 2) + " x",
         "met" if loky >= 1 else "not met"],
        ["joblib rate vs Dask", ">= 20 x", B.fmt(dask, 1) + " x",
         "met" if dask >= 20 else "not met"],
        ["chain, futures as arguments", "<= 1 ms a link",
         B.fmt(link) + " ms", "met" if link <= 1 else "not met"]]))
    print("\n" + B.machine_line(info) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(
        os.path.dirname(HERE), "..", "..", "bin"))
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--links", type=int, default=1000)
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--child")
    ap.add_argument("--what")
    ap.add_argument("--config")
    ap.add_argument("--python")
    a = ap.parse_args()
    if a.child:
        return child(a)
    a.bin = os.path.abspath(a.bin)
    B.install_signal_handlers()
    info = B.machine_info()
    work = B.make_workdir("ftfarm-pyjoblib-")
    bindir = B.snapshot_bin(a.bin, work)
    python = os.path.join(work, "python")
    shutil.copytree(os.path.join(os.path.dirname(a.bin), "python"), python,
                    ignore=shutil.ignore_patterns("__pycache__"))
    cluster = B.Cluster(bindir, work, "jl", [
        {"name": "node1", "host": "localhost", "workers": 2}],
        heartbeat_ms=1000)
    jr, cr = [], []
    try:
        cluster.start()
        for r in range(a.rounds):
            order = JOBLIB[r % 3:] + JOBLIB[:r % 3]
            jr.append({w: run_child(a, w, "joblib", cluster, python)
                       for w in order})
            B.log(f"round {r + 1} joblib: {jr[-1]}")
            order = CHAIN[r % 3:] + CHAIN[:r % 3]
            cr.append({w: run_child(a, w, "chain", cluster, python)
                       for w in order})
            B.log(f"round {r + 1} chain: {cr[-1]}")
    finally:
        cluster.stop()
    report(a, jr, cr, info)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"joblib": jr, "chain": cr, "machine": info}, f,
                      indent=1)
    B.finish(work, a.keep)


if __name__ == "__main__":
    main()
