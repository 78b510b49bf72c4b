"""No-op tasks through mpi4py.futures.MPIPoolExecutor (reference for throughput.py).

Run under Open MPI as a single process; the executor spawns its workers:

    mpirun.openmpi --allow-run-as-root --oversubscribe -n 1 \
        /usr/bin/python3 scripts/bench/mpi4py_noop.py --workers 2 --tasks 200000 \
        --chunksize 1000 --reps 5

Each repetition maps a no-op function (time.sleep(0), return its argument)
over range(tasks) with executor.map and checks that every result came back.
Prints one JSON object per line: {"workers", "chunksize", "tasks", "rep",
"seconds"}.  The pool is started (and warmed up) before the timed maps.
"""
import argparse
import json
import sys
import time

from mpi4py.futures import MPIPoolExecutor


def noop(i):
    time.sleep(0)
    return i


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--tasks", type=int, default=200000)
    ap.add_argument("--chunksize", type=int, action="append", default=None,
                    help="may be given several times; default 1")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1000)
    a = ap.parse_args()
    chunks = a.chunksize or [1]
    with MPIPoolExecutor(max_workers=a.workers) as ex:
        ex.bootup(wait=True)
        for cs in chunks:
            list(ex.map(noop, range(a.warmup), chunksize=cs))
        for rep in range(a.reps):
            # Interleave chunk sizes so that both see the same machine noise.
            for cs in chunks:
                t0 = time.perf_counter()
                n = 0
                for r in ex.map(noop, range(a.tasks), chunksize=cs):
                    n += 1
                dt = time.perf_counter() - t0
                if n != a.tasks:
                    print(f"mpi4py_noop: {n} results for {a.tasks} tasks",
                          file=sys.stderr)
                    sys.exit(1)
                print(json.dumps({"workers": a.workers, "chunksize": cs,
                                  "tasks": a.tasks, "rep": rep,
                                  "seconds": dt}), flush=True)


if __name__ == "__main__":
    main()
