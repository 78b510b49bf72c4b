"""Word count with mpi4py.futures (reference for scripts/bench/wordcount.py).

Run under Open MPI as a single process; the executor spawns its workers:

    mpirun.openmpi --allow-run-as-root --oversubscribe -n 1 \\
        /usr/bin/python3 -m mpi4py.futures scripts/bench/wordcount_mpi4py.py \\
        --workers 2 --shards 18 --reps 3 -o OUT INPUT...

The same job as ftfarm's wordcount, written the plain Python way: the
inputs are listed as tests/wordcount_ref.py lists them, cut into SHARDS
byte ranges of their concatenation with the same border rule (a word
belongs to the shard holding its first byte); each worker counts a shard
with a bytes regex and a Counter and sends the Counter back; the parent
adds them up, sorts and writes the output.  The pool is booted before the
timed runs.  Prints one JSON object per run: {"workers", "shards", "rep",
"seconds", "words", "distinct"}.
"""
import argparse
import json
import os
import re
import sys
import time
from collections import Counter

from mpi4py.futures import MPIPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "tests"))
import wordcount_ref as ref  # noqa: E402

WORD = re.compile(rb"[A-Za-z0-9\x80-\xff]+")
WORD_BYTE = re.compile(rb"[A-Za-z0-9\x80-\xff]")
LEADING = re.compile(rb"[A-Za-z0-9\x80-\xff]*")


def read_piece(path, a, b, size):
    """Bytes [A - 1, B) of PATH, read on past B to the end of a word cut
    there (never past the file's end)."""
    with open(path, "rb") as f:
        start = a - 1 if a > 0 else 0
        f.seek(start)
        data = f.read(b - start)
        pos = b
        while data and WORD_BYTE.match(data, len(data) - 1) and pos < size:
            more = f.read(65536)
            if not more:
                break
            m = LEADING.match(more)
            data += more[:m.end()]
            pos += len(more)
            if m.end() < len(more):
                break
    skip = 0
    if a > 0:
        skip = 1
        if WORD_BYTE.match(data, 0):
            skip = LEADING.match(data, 1).end()
    return data, skip


def count_shard(args):
    """Count the words starting in global bytes [S, E) of FILES
    ((path, global start, size) triples)."""
    files, s, e = args
    c = Counter()
    for path, g, size in files:
        if g + size <= s or g >= e:
            continue
        a, b = max(s, g) - g, min(e, g + size) - g
        data, skip = read_piece(path, a, b, size)
        c.update(w.translate(ref.LOWER) for w in WORD.findall(data, skip))
    return c


def plan(inputs, shards):
    files, g = [], 0
    for p in ref.input_files(inputs):
        size = os.path.getsize(p)
        files.append((p, g, size))
        g += size
    cuts = [g * i // shards for i in range(shards + 1)]
    return files, [(files, cuts[i], cuts[i + 1]) for i in range(shards)]


def run(ex, inputs, shards, out):
    files, work = plan(inputs, shards)
    total = Counter()
    for c in ex.map(count_shard, work):
        total.update(c)
    ref.write(total, out)
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--shards", type=int, default=18)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("inputs", nargs="+")
    a = ap.parse_args()
    with MPIPoolExecutor(max_workers=a.workers) as ex:
        ex.bootup(wait=True)
        for rep in range(a.reps):
            t0 = time.perf_counter()
            total = run(ex, a.inputs, a.shards, a.output)
            dt = time.perf_counter() - t0
            print(json.dumps({"workers": a.workers, "shards": a.shards,
                              "rep": rep, "seconds": dt,
                              "words": sum(total.values()),
                              "distinct": len(total)}), flush=True)


if __name__ == "__main__":
    main()
