#!/usr/bin/python3
"""Word count throughput: ftfarm's wordcount job against GNU wc -w, the
Python reference and an mpi4py.futures version of the same sharding.

    /usr/bin/python3 scripts/bench/wordcount.py [--mb 300] [--reps 3]
        [--corpus /tmp/ftfarm-wc-corpus] [--only ftfarm,wc,...]
        [--workers 1,2] [--kill-ms MS [--heartbeat-ms HB]]

The corpus (built once, kept for later runs): the fortunes (English,
Russian, Italian UTF-8) and /usr/share/common-licenses, cut into paragraphs
and repeated in shuffled order until --mb MB (10^6 bytes), in 16 files,
with variation: 2% of the paragraphs get one word suffixed with a copy
number (new words), 3% are upper-cased (ASCII), 3% get doubled spaces and
CRLF line ends.  About 39 M words, 127 k distinct.

Every run reads the corpus from the page cache (it is read twice first).
With both wc and ftfarm selected, every ftfarm job runs right after a
wc -w (LC_ALL=C) of its own, and the ratio of each such pair is reported
too: the machine's speed drifts, and runs made side by side compare
fairly.
Methods, each --reps times, medians reported:
  wc -w        GNU coreutils, LC_ALL=C (the baseline), and LC_ALL=C.UTF-8
  reference    tests/wordcount_ref.py (bytes regex + Counter, one process)
  mpi4py       scripts/bench/wordcount_mpi4py.py: MPIPoolExecutor with 1
               and 2 workers, as many shards as ftfarm plans by default
  ftfarm       the wordcount job, `ftfarm submit --wait` wall time (CLI
               start, validation, planning, map, reduce, merge, reply), on
               a cluster of 1 node x 1 worker, then 1 node x 2 workers
               (--workers sets the list of cluster sizes)
               ("task_events": false, state_dir under a temp dir); each
               cluster runs alone, with one warm-up job first
Every output file is compared with the reference output.

With --kill-ms MS, each timed ftfarm job loses a worker: MS ms after the
submission one of the cluster's workers (the first in `status`, known
before the job) gets SIGKILL, and the master respawns it (the clusters
have "respawn_limit": 5 so that the node is never power-cycled) and
redoes its tasks; --heartbeat-ms sets the clusters' "heartbeat_ms".

Prints markdown on stdout, progress on stderr.
"""
import argparse
import signal
import glob
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

REF = os.path.join(B.REPO, "tests", "wordcount_ref.py")
MPI4PY_WC = os.path.join(B.REPO, "scripts", "bench", "wordcount_mpi4py.py")
SOURCES = ["/usr/share/games/fortunes", "/usr/share/games/fortunes/ru",
           "/usr/share/games/fortunes/it", "/usr/share/common-licenses"]
MPI_ARGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
            "--mca", "btl", "self,vader,tcp", "--mca", "btl_tcp_if_include",
            "lo", "--mca", "oob_tcp_if_include", "lo"]
CORPUS_FILES = 16


# ---- corpus ----

def paragraphs():
    seen, out = set(), []
    for d in SOURCES:
        for p in sorted(glob.glob(d + "/*")):
            if p.endswith(".dat") or not os.path.isfile(p):
                continue
            rp = os.path.realpath(p)
            if rp in seen:
                continue
            seen.add(rp)
            with open(rp, "rb") as f:
                out.extend(x for x in re.split(rb"\n%\n|\n\n", f.read())
                           if x.strip())
    if not out:
        raise SystemExit("no source texts: install fortunes, fortunes-ru, "
                         "fortunes-it (scripts/install-deps)")
    return out


def vary(rng, p, copy):
    r = rng.random()
    if r < 0.02:
        ws = p.split(b" ")
        j = rng.randrange(len(ws))
        ws[j] += b"%d" % (copy % 64)
        return b" ".join(ws)
    if r < 0.05:
        return p.upper()
    if r < 0.08:
        return p.replace(b" ", b"  ").replace(b"\n", b"\r\n")
    return p


def build_corpus(dest, mb, seed=1):
    """Write the corpus into DEST (see the top of this file)."""
    paras = paragraphs()
    rng = random.Random(seed)
    tmp = dest + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    per = mb * 1000 * 1000 // CORPUS_FILES + 1
    copy = 0
    for i in range(CORPUS_FILES):
        chunks, n = [], 0
        while n < per:
            copy += 1
            order = list(range(len(paras)))
            rng.shuffle(order)
            for k in order:
                p = vary(rng, paras[k], copy)
                chunks += [p, b"\n\n"]
                n += len(p) + 2
                if n >= per:
                    break
        with open(os.path.join(tmp, f"part-{i:02d}.txt"), "wb") as f:
            f.write(b"".join(chunks))
    shutil.rmtree(dest, ignore_errors=True)
    os.rename(tmp, dest)
    with open(dest + ".json", "w") as f:
        json.dump({"mb": mb, "seed": seed, "files": CORPUS_FILES}, f)


def corpus(dest, mb):
    marker = dest + ".json"
    want = {"mb": mb, "seed": 1, "files": CORPUS_FILES}
    try:
        with open(marker) as f:
            ok = json.load(f) == want and os.path.isdir(dest)
    except (OSError, ValueError):
        ok = False
    if not ok:
        B.log(f"building a {mb} MB corpus in {dest}")
        build_corpus(dest, mb)
    files = sorted(glob.glob(dest + "/*"))
    return files, sum(os.path.getsize(p) for p in files)


def warm(files):
    for _ in range(2):
        for p in files:
            with open(p, "rb") as f:
                while f.read(1 << 24):
                    pass


# ---- methods ----

def timed(cmd, env=None, timeout=3600):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, timeout=timeout)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]}: exit {p.returncode}: "
                           f"{p.stderr.decode(errors='replace')[-500:]}")
    return dt, p.stdout


def same(path, ref_bytes):
    with open(path, "rb") as f:
        return f.read() == ref_bytes


def bench_wc(files, reps, locale):
    env = dict(os.environ, LC_ALL=locale)
    times, words = [], None
    for _ in range(reps):
        dt, out = timed(["wc", "-w", *files], env=env)
        times.append(dt)
        words = int(out.split()[-2])
    return times, words


def bench_ref(corpus_dir, reps, out):
    times = []
    for _ in range(reps):
        dt, _ = timed(["/usr/bin/python3", REF, "-o", out, corpus_dir])
        times.append(dt)
    return times


def bench_mpi4py(corpus_dir, workers, shards, reps, out, ref_bytes):
    cmd = [B.MPIRUN, *MPI_ARGS, "-n", "1", "/usr/bin/python3", "-m",
           "mpi4py.futures", MPI4PY_WC, "--workers", str(workers),
           "--shards", str(shards), "--reps", str(reps), "-o", out,
           corpus_dir]
    _, stdout = timed(cmd)
    runs = [json.loads(l) for l in stdout.decode().splitlines()
            if l.startswith("{")]
    if not same(out, ref_bytes):
        raise RuntimeError(f"mpi4py w{workers}: output differs")
    return [r["seconds"] for r in runs]


def submit_killing(c, batch, kill_ms):
    """`submit --wait` BATCH on C, SIGKILLing C's first worker KILL_MS ms
    after the submission.  Returns (batch id, client wall seconds)."""
    victim = next(w["pid"] for w in c.status()["workers"]
                  if w.get("pid", 0) > 0)
    t0 = time.perf_counter()
    p = subprocess.Popen([c.ftfarm, "submit", "-c", c.cfg, batch, "--wait"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=c.env)
    time.sleep(kill_ms / 1000)
    try:
        os.kill(victim, signal.SIGKILL)
    except ProcessLookupError:
        pass
    so, se = p.communicate(timeout=600)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{c.name}: submit: exit {p.returncode}: {se}")
    return int(so.split()[0]), dt


def bench_ftfarm(bindir, workdir, workers, corpus_dir, reps, ref_bytes,
                 beside=None, kill_ms=None, heartbeat_ms=None):
    """Time REPS jobs on a fresh cluster of WORKERS workers.  BESIDE, when
    given, is run (and its result kept) just before each job, so that a
    baseline and ftfarm see the machine in the same state.  KILL_MS: see
    the top of this file."""
    name = f"wc-w{workers}"
    keys = {"task_events": False}
    if kill_ms is not None:
        keys["respawn_limit"] = 5
    if heartbeat_ms:
        keys["heartbeat_ms"] = heartbeat_ms
    c = B.Cluster(bindir, workdir, name,
                  [{"name": "node1", "host": "localhost",
                    "workers": workers}], **keys)
    out = os.path.join(workdir, name + ".out")
    batch = os.path.join(workdir, name + ".json")
    with open(batch, "w") as f:
        json.dump({"name": "wordcount", "job": {
            "type": "wordcount", "inputs": [corpus_dir], "output": out}}, f)
    times, master, paired, summary = [], [], [], None
    try:
        c.start()
        c.submit(batch)                 # warm-up
        for _ in range(reps):
            if beside:
                paired.append(beside())
            if kill_ms is None:
                bid, dt = c.submit(batch)
            else:
                bid, dt = submit_killing(c, batch, kill_ms)
            summary = c.summary(bid)
            if summary.get("failed") or summary.get("error"):
                raise RuntimeError(f"{name}: job failed: {summary}")
            if not same(out, ref_bytes):
                raise RuntimeError(f"{name}: output differs")
            times.append(dt)
            master.append(summary["seconds"])
    finally:
        if c.started:
            c.run("stop", check=False, timeout=120)
    return times, master, paired, summary["result"]


# ---- report ----

def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{model}, {os.cpu_count()} CPUs, Linux "
            f"{platform.release()}, {platform.python_version()} (Debian "
            f"/usr/bin/python3)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ref-reps", type=int, default=None,
                    help="repetitions of the slow Python reference "
                         "(default --reps)")
    ap.add_argument("--corpus", default="/tmp/ftfarm-wc-corpus")
    ap.add_argument("--bin", default=os.path.join(B.REPO, "bin"))
    ap.add_argument("--only", default="wc,ftfarm,mpi4py,reference",
                    help="comma-separated methods to run")
    ap.add_argument("--kill-ms", type=int, default=None,
                    help="SIGKILL a worker this long into each timed job")
    ap.add_argument("--workers", default="1,2",
                    help="comma-separated cluster sizes (workers on one "
                         "node), each timed in turn")
    ap.add_argument("--heartbeat-ms", type=int, default=None,
                    help="the clusters' heartbeat_ms (default: ftfarm's)")
    a = ap.parse_args()
    only = set(a.only.split(","))
    sizes = [int(w) for w in a.workers.split(",")]
    if not sizes or min(sizes) < 1:
        ap.error("--workers: a list of positive worker counts")
    B.install_signal_handlers()
    files, nbytes = corpus(a.corpus, a.mb)
    mb = nbytes / 1e6
    workdir = B.make_workdir("ftfarm-wcbench-")
    bindir = B.snapshot_bin(a.bin, workdir)
    load0 = os.getloadavg()
    B.log(f"corpus: {len(files)} files, {nbytes} bytes; warming the cache")
    warm(files)
    ref_out = os.path.join(workdir, "reference.out")
    B.log("reference output")
    ref_times = bench_ref(a.corpus, 1, ref_out)
    with open(ref_out, "rb") as f:
        ref_bytes = f.read()
    ref_words = sum(int(l.rsplit(b"\t", 1)[1]) for l in ref_bytes.splitlines())
    rows = {}                          # method -> list of seconds
    notes = {}
    if "wc" in only:
        B.log("wc -w")
        rows["wc -w (LC_ALL=C)"], w = bench_wc(files, a.reps, "C")
        notes["wc -w (LC_ALL=C)"] = f"{w:,} words (its own definition)"
        rows["wc -w (LC_ALL=C.UTF-8)"], w = bench_wc(files, a.reps,
                                                     "C.UTF-8")
        notes["wc -w (LC_ALL=C.UTF-8)"] = f"{w:,} words"
    shards = 18
    pairs = {}                         # workers -> [(wc -w s, ftfarm s)]
    if "ftfarm" in only:
        # With wc, each job runs right after a wc -w (LC_ALL=C) of its
        # own: the machine's speed drifts, and a ratio is fair only
        # between runs made side by side.
        beside = (lambda: bench_wc(files, 1, "C")[0][0]) \
            if "wc" in only else None
        for workers in sizes:
            B.log(f"ftfarm, {workers} worker(s)")
            t, m, wc, res = bench_ftfarm(bindir, workdir, workers,
                                         a.corpus, a.reps, ref_bytes,
                                         beside, a.kill_ms, a.heartbeat_ms)
            key = f"ftfarm wordcount, {workers} worker{'s' * (workers > 1)}"
            rows[key] = t
            notes[key] = (f"master {B.fmt(B.median(m))} s; {res['shards']} "
                          f"shards, {res['reducers']} reducers")
            shards = res["shards"]
            if wc:
                pairs[workers] = list(zip(wc, t))
                rows["wc -w (LC_ALL=C)"] += wc
    if "mpi4py" in only:
        for workers in sizes:
            B.log(f"mpi4py.futures, {workers} worker(s)")
            key = f"mpi4py.futures, {workers} worker{'s' * (workers > 1)}"
            rows[key] = bench_mpi4py(a.corpus, workers, shards, a.reps,
                                     os.path.join(workdir, "mpi4py.out"),
                                     ref_bytes)
            notes[key] = f"{shards} shards, Counter per shard"
    if "reference" in only:
        reps = a.ref_reps if a.ref_reps is not None else a.reps
        B.log("Python reference")
        rows["Python reference (1 process)"] = ref_times + bench_ref(
            a.corpus, max(0, reps - 1), ref_out)
        notes["Python reference (1 process)"] = "tests/wordcount_ref.py"
    load1 = os.getloadavg()
    base = B.median(rows.get("wc -w (LC_ALL=C)", [float("nan")]))
    print(f"Machine: {machine()}.  Date: {time.strftime('%Y-%m-%d %H:%M')}."
          f"  Load average before/after: {load0[0]:.2f} / {load1[0]:.2f}.")
    extra = "".join(f" --{k.replace('_', '-')} {v}" for k, v in
                    (("workers", a.workers if a.workers != "1,2" else None),
                     ("kill_ms", a.kill_ms), ("heartbeat_ms", a.heartbeat_ms))
                    if v is not None)
    print(f"Command: `/usr/bin/python3 scripts/bench/wordcount.py --mb "
          f"{a.mb} --reps {a.reps}{extra}`.  Corpus: {len(files)} files, "
          f"{nbytes:,} bytes, {ref_words:,} words, "
          f"{len(ref_bytes.splitlines()):,} distinct (page cache).\n")
    table = []
    for k, t in rows.items():
        med = B.median(t)
        table.append([k, len(t), B.fmt(med), B.fmt(min(t)),
                      B.fmt(mb / med, 0), B.fmt(base / med, 2),
                      notes.get(k, "")])
    print(B.table(["method", "runs", "median s", "min s", "MB/s",
                   "x wc -w (C)", "notes"], table))
    f1 = rows.get("ftfarm wordcount, 1 worker")
    f2 = rows.get("ftfarm wordcount, 2 workers")
    if f1 and f2:
        print(f"\nftfarm 2 workers vs 1 worker: "
              f"{B.median(f1) / B.median(f2):.2f} x; 2 workers vs wc -w "
              f"(LC_ALL=C): {base / B.median(f2):.2f} x.")
    for workers, pr in sorted(pairs.items()):
        r = sorted(w / f for w, f in pr)
        print(f"\nftfarm {workers} worker{'s' * (workers > 1)} against the "
              f"wc -w (LC_ALL=C) run just before each job: median "
              f"{B.median(r):.2f} x (per pair {r[0]:.2f}-{r[-1]:.2f}; wc -w "
              f"median {B.fmt(B.median([w for w, _ in pr]))} s).")
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
