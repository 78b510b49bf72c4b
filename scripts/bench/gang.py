#!/usr/bin/python3
"""Gang tasks: ftallreduce against MPI_Allreduce, pipeline against its model.

    /usr/bin/python3 scripts/bench/gang.py [--reps 3] [--rounds 20]
        [--big-reps 1] [--heartbeat-ms 100] [--only allreduce,death,pipeline]
        [--keep]

Clusters of 1 node x 1 worker run gang jobs: "one death" on one that
pings every --heartbeat-ms (pongs due in 3/4 of it, the default), the
rest on one at the default 1000 ms with pongs due in 3 s (the
MPI_Allreduce rounds block in the collective, and a rank of the 8 x 8 grid
copying 64 MiB in one message blocks inside MPI; neither answers pings
meanwhile):

  allreduce   ftallreduce of 1 MiB vectors (131072 doubles) on 8 active
              ranks, 0 spares: the job's "mpi_rounds" time plain
              MPI_Allreduce over the same 8 processes (barrier, then the
              call; the slowest rank's time), then its "bench_rounds" time
              fault-free ftallreduce rounds on the same vectors (the master
              pinging every rank meanwhile).  Medians of --rounds rounds,
              then the median over --reps gangs.
  one death   ftallreduce, 8 active + 2 spares, 1 MiB, step_delay_ms 300:
              with no fault, and with rank 3 SIGKILLed as it pauses at step
              2 (read from status --json "gangs").  The algorithm's seconds
              (steps' pauses included, the same in both), the detection
              (kill to gang_rank_dead) and the extra time of the run with
              a death (its seconds minus the median without).
  pipeline    L bytes (1, 16, 64 MiB) from corner to corner of a W x H
              grid in K chunks, pipelined, and store-and-forward (the
              whole message per hop): 2 x 2 with 2 routes and with 1 (4 and
              3 processes), 8 x 8 with 1 route (15 processes on 2 cores:
              oversubscribed) and with 2 (28 processes; 1 and 16 MiB); the
              measured time, the model ((ceil(K/routes) + hops - 1) x (Ts +
              L/K x Tb) pipelined, hops x (Ts + L/routes x Tb) store and
              forward) from the measured hop latency Ts and bandwidth 1/Tb,
              and the seed's model L x Tb.

Every output is checked against tests/gang/gang_ref.py (the allreduce's
bits) or the pipeline's own verification; each batch must have exactly one
ok result line.
"""
import argparse
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import benchlib as bl  # noqa: E402

sys.path.insert(0, os.path.join(bl.REPO, "tests", "gang"))
import gang_ref  # noqa: E402

LENGTH = 131072


class Cluster(bl.Cluster):
    """A benchlib cluster of 1 node x 1 worker that runs gang jobs, one
    batch each, with ENV added to the CLI's environment (and so to
    mpirun's and the ranks')."""

    def __init__(self, work, binp, heartbeat_ms, env=None, timeout_ms=None):
        super().__init__(binp, os.path.dirname(work), os.path.basename(work),
                         [{"name": "node1", "host": "localhost",
                           "workers": 1}],
                         heartbeat_ms=heartbeat_ms, max_attempts=3,
                         heartbeat_timeout_ms=timeout_ms or
                         heartbeat_ms * 3 // 4)
        self.env = dict(os.environ, **(env or {}))
        self.n = 0

    def submit_job(self, job):
        """Submit a batch of the one gang task JOB; its id."""
        self.n += 1
        path = os.path.join(self.dir, f"b{self.n}.json")
        with open(path, "w") as f:
            json.dump({"name": f"b{self.n}", "job": job}, f)
        return self.submit(path, wait=False)[0]

    def result(self, bid):
        """The one result line of batch BID, which must be ok."""
        self.wait(bid, timeout=600)
        with open(os.path.join(self.batch_dir(bid), "results.jsonl")) as f:
            lines = [json.loads(x) for x in f if x.strip()]
        if len(lines) != 1 or lines[0]["status"] != "ok":
            raise SystemExit(f"batch {bid}: {lines}")
        return lines[0]

    def events(self, name, bid):
        with open(os.path.join(self.state, "events.jsonl")) as f:
            evs = [json.loads(x) for x in f if x.strip()]
        return [e for e in evs if e["event"] == name and e.get("batch") == bid]


def check_sum(path, ranks, seed):
    want = gang_ref.pack(gang_ref.tree_sum(gang_ref.gen_rows(seed, ranks,
                                                              LENGTH)))
    with open(path, "rb") as f:
        if f.read() != want:
            raise SystemExit(f"{path}: wrong sum")
    os.unlink(path)


def allreduce(c, work, reps, rounds):
    mpi, ftar, ftar_min, mpi_min = [], [], [], []
    for i in range(reps):
        out = os.path.join(work, f"sum{i}.bin")
        res = c.result(c.submit_job({
            "type": "ftallreduce", "ranks": 8, "spares": 0,
            "length": LENGTH, "seed": 5, "output": out,
            "mpi_rounds": rounds, "bench_rounds": rounds}))
        check_sum(out, 8, 5)
        fig = res["figures"]
        mpi.append(fig["mpi_median_seconds"])
        mpi_min.append(fig["mpi_min_seconds"])
        ftar.append(fig["bench_median_seconds"])
        ftar_min.append(fig["bench_min_seconds"])
        bl.log(f"allreduce {i}: MPI {fig['mpi_median_seconds'] * 1e3:.2f} ms,"
               f" ftallreduce {fig['bench_median_seconds'] * 1e3:.2f} ms")
    return mpi, mpi_min, ftar, ftar_min


def kill_at(c, bid, rank, step, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        for g in c.status().get("gangs", []):
            if g["batch"] != bid:
                continue
            r = g["ranks"][rank]
            if r["state"] == "step" and r["step"] == step:
                os.kill(r["pid"], signal.SIGKILL)
                return time.time()
        time.sleep(0.02)
    raise SystemExit("never saw the victim at its step")


def one_death(c, work, reps):
    rows = {"no fault": [], "one death": []}
    detect = []
    for i in range(reps):
        for kind in ("no fault", "one death"):
            out = os.path.join(work, f"d{i}.bin")
            bid = c.submit_job({
                "type": "ftallreduce", "ranks": 8, "spares": 2,
                "length": LENGTH, "seed": 6, "output": out,
                "step_delay_ms": 300})
            if kind == "one death":
                t_kill = kill_at(c, bid, 3, 2)
            res = c.result(bid)
            check_sum(out, 8, 6)
            rows[kind].append(res["figures"]["seconds"])
            if kind == "one death":
                dead = c.events("gang_rank_dead", bid)
                detect.append(dead[0]["ts"] - t_kill)
            bl.log(f"{kind} {i}: {res['figures']['seconds']:.3f} s")
    return rows, detect


def pipeline(c, work, grid, routes, sizes, chunks, reps):
    """Rows of the pipelined runs (K chunks each), then of the store-and-
    forward one (the whole message per hop) for every size."""
    rows = []
    for L in sizes:
        for K in chunks + ["sf"]:
            mode = "store_forward" if K == "sf" else "pipelined"
            K = 1 if K == "sf" else K
            t, model, seed_model, bw = [], [], [], []
            for i in range(reps):
                out = os.path.join(work, "recv.bin")
                res = c.result(c.submit_job({
                    "type": "pipeline", "width": grid[0], "height": grid[1],
                    "routes": routes, "bytes": L, "chunks": K, "seed": 3,
                    "mode": mode, "output": out}))
                fig = res["figures"]
                if not fig["verified"] or os.path.getsize(out) != L:
                    raise SystemExit(f"pipeline {grid} {L} {K}: not verified")
                os.unlink(out)
                t.append(fig["seconds"])
                model.append(fig["model_seconds"])
                seed_model.append(fig["model_seed_seconds"])
                bw.append(fig["bandwidth_MBps"])
            rows.append([f"{grid[0]}x{grid[1]}", routes, mode,
                         f"{L >> 20} MiB", K,
                         bl.fmt(bl.median(t) * 1e3, 1),
                         bl.fmt(bl.median(bw), 1),
                         bl.fmt(bl.median(model) * 1e3, 2),
                         bl.fmt(bl.median(seed_model) * 1e3, 2)])
            bl.log(f"pipeline {grid} x{routes} {mode} L={L} K={K}: "
                   f"{bl.median(t):.3f} s")
    return rows


def print_allreduce(mpi, mpi_min, ftar, ftar_min, mpi_name="MPI_Allreduce"):
    print(bl.table(["allreduce, 8 ranks, 1 MiB", "median ms", "fastest ms"], [
        [mpi_name, bl.fmt(bl.median(mpi) * 1e3, 2),
         bl.fmt(min(mpi_min) * 1e3, 2)],
        ["ftallreduce (no fault)", bl.fmt(bl.median(ftar) * 1e3, 2),
         bl.fmt(min(ftar_min) * 1e3, 2)],
        ["ratio", bl.fmt(bl.median(ftar) / bl.median(mpi), 2), ""]]))


def print_death(deaths, detect, heartbeat_ms):
    nf, od = bl.median(deaths["no fault"]), bl.median(deaths["one death"])
    print()
    print(bl.table([f"ftallreduce, 8 + 2 spares, 1 MiB, steps paused 300 ms,"
                    f" heartbeat {heartbeat_ms} ms", "median s"], [
        ["no fault", bl.fmt(nf)], ["one death (rank 3 at step 2)",
                                   bl.fmt(od)],
        ["extra time of the death", bl.fmt(od - nf)],
        ["detection (kill to gang_rank_dead)", bl.fmt(bl.median(detect))],
        ["recovery (extra time - detection)",
         bl.fmt(od - nf - bl.median(detect))]]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--big-reps", type=int, default=1,
                    help="repetitions on the 8 x 8 grid")
    ap.add_argument("--heartbeat-ms", type=int, default=100)
    ap.add_argument("--only", default="allreduce,death,pipeline",
                    help="comma-separated parts to run")
    ap.add_argument("--bin", default=os.path.join(bl.REPO, "bin"),
                    help="the build to measure")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    parts = set(a.only.split(","))
    bl.install_signal_handlers()
    info = bl.machine_info()
    work = bl.make_workdir("ftfarm-bench-gang-")
    binp = os.path.join(work, "bin")
    import shutil
    shutil.copytree(a.bin, binp)
    if "death" in parts:
        c = Cluster(os.path.join(work, "hb"), binp, a.heartbeat_ms)
        c.start()
        try:
            deaths, detect = one_death(c, work, a.reps)
        finally:
            c.stop()
    # The rest at the default heartbeat, pongs due in 3 s: the
    # MPI_Allreduce rounds block in the collective, and a rank of the
    # oversubscribed 8 x 8 grid copying 64 MiB in one message (one call
    # inside MPI) missed 0.75 s deadlines; neither can answer meanwhile.
    c = Cluster(os.path.join(work, "default"), binp, 1000,
                timeout_ms=3000)
    c.start()
    try:
        if "allreduce" in parts:
            ar = allreduce(c, work, a.reps, a.rounds)
        if "pipeline" in parts:
            mib = [1 << 20, 16 << 20, 64 << 20]
            p2 = (pipeline(c, work, (2, 2), 2, mib, [1, 4, 16, 64], a.reps)
                  + pipeline(c, work, (2, 2), 1, mib, [1, 4, 16, 64],
                             a.reps))
            p8 = (pipeline(c, work, (8, 8), 1, mib, [1, 16, 64],
                           a.big_reps)
                  + pipeline(c, work, (8, 8), 2, mib[:2], [16, 64],
                             a.big_reps))
    finally:
        c.stop()
    if "allreduce" in parts:
        # Open MPI's own recursive doubling, the algorithm of seed 000
        # (its tuned choice for 1 MiB moves less data): the same rounds on
        # a cluster whose processes are told so.
        c = Cluster(os.path.join(work, "rd"), binp, 1000, env={
            "OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
            "OMPI_MCA_coll_tuned_allreduce_algorithm": "3"})
        c.start()
        try:
            ar_rd = allreduce(c, work, a.reps, a.rounds)
        finally:
            c.stop()
    print(bl.machine_line(info))
    print(f"\nCommand: `/usr/bin/python3 scripts/bench/gang.py --reps "
          f"{a.reps} --rounds {a.rounds} --big-reps {a.big_reps} "
          f"--heartbeat-ms {a.heartbeat_ms} --only {a.only}`\n")
    if "allreduce" in parts:
        print_allreduce(*ar)
        print()
        print_allreduce(*ar_rd, mpi_name="MPI_Allreduce, recursive doubling"
                        " (coll_tuned_allreduce_algorithm 3)")
    if "death" in parts:
        print_death(deaths, detect, a.heartbeat_ms)
    if "pipeline" in parts:
        print()
        print(bl.table(["grid", "routes", "mode", "L", "K", "measured ms",
                        "MB/s",
                        "model ms", "seed model L*Tb ms"], p2 + p8))
    bl.finish(work, a.keep)


if __name__ == "__main__":
    main()
