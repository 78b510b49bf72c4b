"""No-op tasks through mpi4py.futures.MPIPoolExecutor (reference for throughput.py).

Run under Open MPI as a single process; the executor spawns its workers:

    mpirun.openmpi --allow-run-as-root --oversubscribe -n 1 \
        /usr/bin/python3 scripts/bench/mpi4py_noop.py --workers 2 \
        --run 1000:200000 --run 1:200000 --reps 1

Each --run CHUNKSIZE:TASKS maps a no-op function over range(TASKS) with
executor.map(..., chunksize=CHUNKSIZE) and checks that every result came
back in order.  The pool is started and warmed up (every chunk size once)
before the timed maps; repetitions interleave the runs.  Prints one JSON
object per timed map: {"workers", "chunksize", "tasks", "rep", "seconds"}.
"""
import argparse
import json
import sys
import time

from mpi4py.futures import MPIPoolExecutor


def noop(i):
    # Like ftfarm's {"type": "sleep", "seconds": 0}, which returns at once
    # without a system call (time.sleep(0) would cost ~70 us here).
    return i


def run_spec(s):
    cs, n = s.split(":")
    return int(cs), int(n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--run", type=run_spec, action="append", required=True,
                    metavar="CHUNKSIZE:TASKS")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=1000)
    a = ap.parse_args()
    with MPIPoolExecutor(max_workers=a.workers) as ex:
        ex.bootup(wait=True)
        for cs, _ in a.run:
            list(ex.map(noop, range(a.warmup), chunksize=cs))
        for rep in range(a.reps):
            for cs, ntasks in a.run:
                t0 = time.perf_counter()
                expect = 0
                for r in ex.map(noop, range(ntasks), chunksize=cs):
                    if r != expect:
                        sys.exit(f"mpi4py_noop: result {r}, expected {expect}")
                    expect += 1
                dt = time.perf_counter() - t0
                if expect != ntasks:
                    sys.exit(f"mpi4py_noop: {expect} results for {ntasks} tasks")
                print(json.dumps({"workers": a.workers, "chunksize": cs,
                                  "tasks": ntasks, "rep": rep,
                                  "seconds": dt}), flush=True)


if __name__ == "__main__":
    main()
