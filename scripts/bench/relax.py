#!/usr/bin/python3
"""Relaxation: the relax job on the farm against a plain MPI program.

    /usr/bin/python3 scripts/bench/relax.py [--n 4098] [--itmax 100]
        [--reps 9] [--trials 5] [--quiet-busy 0.15] [--quiet-wait 60]
        [--no-append] [--bin DIR]

Seed 003's relaxation (N = 4098, itmax = 100, as the seed), side by side:

  mpi         scripts/bench/relax_mpi.c on 2 processes (`mpirun -n 2`, Open
              MPI's default binding; "mpi unbound" adds --bind-to none, as
              ftfarm's own launch does): blocks of rows, one halo row
              exchanged per sweep with Isend/Irecv, MPI_Allreduce of eps;
              no fault tolerance.  Time: from after MPI_Init to S (the
              program's own clock).
  farm ...    a relax job of 2 blocks on a cluster of 1 node x 2 workers
              (the master a third process), checkpoints every 10 sweeps, in
              a job dir on /dev/shm (tmpfs) or on /tmp (ext4 here).  Time:
              the batch's "seconds" in summary.json (queued to finished,
              measured by the master; the workers are up already).
  farm no cp  the same job with checkpoint_every = itmax: one round, no
              checkpoint at all (but a halo of itmax rows, whose sweeps are
              redundant work: this understates the checkpoints' cost).

Every configuration runs --reps times, interleaved (the order rotates from
one repetition to the next); the tables give medians.  The machine may be
shared: before each run the script waits (at most --quiet-wait s) until the
CPUs are at most --quiet-busy busy, and says how many runs started busier.  Every result is
checked against the serial reference (tests/relax_ref.c): sweep count, eps
and S to the last digit.  The task reports give where the farm's time goes
(sweeping, writing checkpoints, reading them, and the rest: dispatch and
waiting for the slower block).

Recovery: --trials jobs (checkpoints every 10, /dev/shm) on a cluster with
task events on; a random moment into each, one busy worker is SIGKILLed.
From events.jsonl and the results: detection (worker_dead), respawn
(worker_respawned; the seed's t_spawn), the work lost (from the killed
task's assignment to the kill), the rerun task and its checkpoint reading
(the seed's t_load), and the job's time against the median without fault.

Both clusters have their own config and state_dir under a temp dir in
/dev/shm (removed at the end), "task_events" false for the timing runs,
heartbeat_ms 200.  The programs are copied there first, so that a rebuild
of bin/ during the run changes nothing.  The tables, the machine, the
command and the date are appended to BENCHMARKS.md (--no-append: only
printed).
"""
import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MPICC = "mpicc.openmpi"
MPIRUN = "mpirun.openmpi"
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def med(xs):
    """The median of the numbers of XS that are not NaN (n/a)."""
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except Exception as e:      # noqa: BLE001
        return f"({e})"


def cpu_busy(interval=0.5):
    """Fraction of all CPUs busy over INTERVAL seconds (from /proc/stat)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    t0, i0 = sample()
    time.sleep(interval)
    t1, i1 = sample()
    return 1 - (i1 - i0) / max(1, t1 - t0)


def wait_quiet(a):
    """Wait (at most --quiet-wait s) until the machine is at most
    --quiet-busy busy: others' benchmarks share it.  The busy fraction
    seen last."""
    end = time.time() + a.quiet_wait
    busy = cpu_busy()
    while busy > a.quiet_busy and time.time() < end:
        time.sleep(2)
        busy = cpu_busy()
    return busy


# ---- programs ----

def build(work, src):
    """Snapshot SRC (a bin/ directory) into WORK, build relax_mpi and
    relax_ref there."""
    bindir = os.path.join(work, "bin")
    shutil.copytree(src, bindir)
    for p in ("ftfarm", "ftfarm-master", "ftfarm-worker", "tasks/relax.so"):
        if not os.path.exists(os.path.join(bindir, p)):
            raise SystemExit(f"bin/{p} missing: run make first")
    flags = ["-std=c11", "-O2", "-g", "-fno-fast-math", "-ffp-contract=off",
             "-D_GNU_SOURCE"]
    mpi = os.path.join(work, "relax_mpi")
    subprocess.run([MPICC, *flags, "-I", os.path.join(REPO, "worker/tasks"),
                    "-o", mpi, os.path.join(REPO, "scripts/bench/relax_mpi.c"),
                    os.path.join(REPO, "worker/tasks/relax_kernel.c"), "-lm"],
                   check=True)
    ref = os.path.join(work, "relax_ref")
    subprocess.run(["cc", *flags, "-o", ref,
                    os.path.join(REPO, "tests/relax_ref.c"), "-lm"],
                   check=True)
    return bindir, mpi, ref


def answer(obj):
    """The part of an output that must match: n, sweeps, eps, S."""
    return (obj["n"], obj["sweeps"], obj["eps"], obj["S"])


def run_mpi(mpi, a, bind):
    args = [MPIRUN, "-n", "2", "--mca", "btl", "self,vader"]
    if not bind:
        args += ["--bind-to", "none"]
    t0 = time.perf_counter()
    p = subprocess.run(args + [mpi, str(a.n), str(a.itmax), repr(a.maxeps)],
                       capture_output=True, text=True, env=MPI_ENV,
                       timeout=600, check=True)
    wall = time.perf_counter() - t0
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return {"seconds": out["seconds"], "wall": wall, "answer": answer(out)}


# ---- the farm ----

class Cluster:
    """A cluster of 1 node x 2 workers with its own config and state."""

    def __init__(self, bindir, work, name, **keys):
        self.ftfarm = os.path.join(bindir, "ftfarm")
        self.dir = os.path.join(work, name)
        self.state = os.path.join(self.dir, "state")
        os.makedirs(self.dir)
        self.cfg = os.path.join(self.dir, "config.json")
        cfg = {"name": f"relaxbench-{name}", "state_dir": self.state,
               "launch": "dynamic", "heartbeat_ms": 200,
               "nodes": [{"name": "node1", "host": "localhost",
                          "workers": 2}]}
        cfg.update(keys)
        with open(self.cfg, "w") as f:
            json.dump(cfg, f, indent=1)
        self.up = False
        self.nbatch = 0

    def run(self, *args, timeout=600):
        p = subprocess.run([self.ftfarm, args[0], "-c", self.cfg, *args[1:]],
                           capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"ftfarm {' '.join(args)}: exit "
                               f"{p.returncode}: {p.stderr.strip()}")
        return p

    def start(self):
        self.up = True
        self.run("start", timeout=180)

    def stop(self):
        if self.up:
            self.up = False
            self.run("stop", timeout=120)

    def status(self):
        return json.loads(self.run("status", "--json").stdout)

    def submit(self, job, wait=True):
        self.nbatch += 1
        path = os.path.join(self.dir, f"batch{self.nbatch}.json")
        with open(path, "w") as f:
            json.dump({"name": "relax", "job": job}, f)
        t0 = time.perf_counter()
        p = self.run("submit", path, *(["--wait"] if wait else []))
        return int(p.stdout.split()[0]), time.perf_counter() - t0

    def wait(self, bid):
        self.run("wait", str(bid))

    def batch_file(self, bid, name):
        return os.path.join(self.state, "batches", str(bid), name)

    def results(self, bid):
        with open(self.batch_file(bid, "results.jsonl")) as f:
            return [json.loads(x) for x in f if x.strip()]

    def summary(self, bid):
        with open(self.batch_file(bid, "summary.json")) as f:
            return json.load(f)

    def events(self, offset=0):
        with open(os.path.join(self.state, "events.jsonl")) as f:
            f.seek(offset)
            return [json.loads(x) for x in f if x.endswith("\n")]

    def events_size(self):
        return os.path.getsize(os.path.join(self.state, "events.jsonl"))

    def ready(self, old_pid=None, timeout=60):
        """Until both workers are idle, neither of them OLD_PID."""
        end = time.time() + timeout
        while time.time() < end:
            ws = self.status()["workers"]
            if len(ws) == 2 and all(w["state"] == "idle" and
                                    w["pid"] != old_pid for w in ws):
                return
            time.sleep(0.1)
        raise RuntimeError(f"workers not back: {ws}")


def relax_job(a, jobdir, out, every):
    os.makedirs(jobdir, exist_ok=True)
    return {"type": "relax", "n": a.n, "itmax": a.itmax, "maxeps": a.maxeps,
            "blocks": a.blocks, "checkpoint_every": every, "dir": jobdir,
            "output": out}


def breakdown(c, bid):
    """Where a job's time went, from its task reports: per block (mean over
    blocks) seconds sweeping, writing, reading; and the phases' critical
    path (the slowest task of each phase, summed)."""
    res = sorted(c.results(bid), key=lambda r: r["task"])
    per = {}
    for r in res:
        rep = json.loads(r["stdout"])
        b = per.setdefault(rep["block"], [0.0, 0.0, 0.0])
        b[0] += rep["compute_s"]
        b[1] += rep["write_s"]
        b[2] += rep["read_s"]
    nb = len(per)
    crit = sum(max(r["seconds"] for r in res[i:i + nb])
               for i in range(0, len(res), nb))
    return {"sweep": sum(v[0] for v in per.values()) / nb,
            "write": sum(v[1] for v in per.values()) / nb,
            "read": sum(v[2] for v in per.values()) / nb,
            "critical": crit, "tasks": len(res)}


def run_farm(c, a, jobdir, every):
    out = os.path.join(c.dir, "relax.json")
    bid, wall = c.submit(relax_job(a, jobdir, out, every))
    s = c.summary(bid)
    with open(out) as f:
        ans = answer(json.load(f))
    r = {"seconds": s["seconds"], "wall": wall, "answer": ans,
         "bid": bid}
    r.update(breakdown(c, bid))
    return r


# ---- the runs ----

def timing_runs(a, bindir, mpi, work, tmpjobs, want):
    c = Cluster(bindir, work, "timing", task_events=False)
    configs = [
        ("mpi", lambda: run_mpi(mpi, a, True)),
        ("mpi unbound", lambda: run_mpi(mpi, a, False)),
        (f"farm cp/{a.every} /dev/shm",
         lambda: run_farm(c, a, os.path.join(work, "jobs"), a.every)),
        (f"farm cp/{a.every} /tmp",
         lambda: run_farm(c, a, tmpjobs, a.every)),
        ("farm no cp /dev/shm",
         lambda: run_farm(c, a, os.path.join(work, "jobs"), a.itmax)),
    ]
    runs = {name: [] for name, _ in configs}
    try:
        c.start()
        run_farm(c, a, os.path.join(work, "jobs"), a.every)     # warm-up
        for rep in range(a.reps):
            k = rep % len(configs)
            for name, fn in configs[k:] + configs[:k]:
                busy = wait_quiet(a)
                r = fn()
                r["busy"] = busy
                if r["answer"] != want:
                    raise SystemExit(f"{name}: {r['answer']} is not the "
                                     f"reference's {want}")
                runs[name].append(r)
                log(f"rep {rep + 1}/{a.reps} {name}: {r['seconds']:.3f} s "
                    f"(machine {100 * busy:.0f} % busy before)")
    finally:
        c.stop()
    return runs


def trial(c, a, jobdir, rng):
    offset = c.events_size()
    out = os.path.join(c.dir, "relax.json")
    bid, _ = c.submit(relax_job(a, jobdir, out, a.every), wait=False)
    time.sleep(rng.uniform(a.min_delay, a.max_delay))
    busy = [w for w in c.status()["workers"] if w["state"] == "busy"]
    if not busy:
        c.wait(bid)             # the job was over before the kill
        return None
    victim = rng.choice(busy)
    t_kill = time.time()
    os.kill(victim["pid"], signal.SIGKILL)
    c.wait(bid)
    c.ready(victim["pid"])
    end = time.time() + 3       # events reach the file within 0.1 s or so
    while True:
        evs = c.events(offset)
        if any(e["event"] == "worker_respawned" and
               e.get("worker") == victim["id"] for e in evs) or \
                time.time() > end:
            break
        time.sleep(0.05)
    t_sub = next(e["ts"] for e in evs if e["event"] == "batch_submitted")
    dead = next(e["ts"] for e in evs if e["event"] == "worker_dead" and
                e.get("pid") == victim["pid"])
    resp = [e["ts"] for e in evs if e["event"] == "worker_respawned" and
            e.get("worker") == victim["id"] and e["ts"] >= dead]
    lost = [e for e in evs if e["event"] == "task_reassigned" and
            e.get("batch") == bid and e.get("worker") == victim["id"]]
    task = lost[0]["task"] if lost else None
    assigned = [e["ts"] for e in evs if e["event"] == "task_assigned" and
                e.get("batch") == bid and e.get("task") == task and
                e.get("worker") == victim["id"]]
    again = [e["ts"] for e in evs if e["event"] == "task_assigned" and
             e.get("batch") == bid and e.get("task") == task and
             e.get("attempt", 1) > 1]
    rerun = [r for r in c.results(bid) if r["task"] == task]
    with open(out) as f:
        ans = answer(json.load(f))
    r = {"at": t_kill - t_sub, "detect": dead - t_kill,
         "respawn": resp[0] - t_kill if resp else float("nan"),
         # assigned after the kill (the master did not know yet): no loss
         "lost": max(0.0, t_kill - assigned[-1]) if assigned
         else float("nan"),
         "again": again[0] - t_kill if again else float("nan"),
         "rerun": rerun[0]["seconds"] if rerun else float("nan"),
         "load": json.loads(rerun[0]["stdout"])["read_s"] if rerun
         else float("nan"),
         "seconds": c.summary(bid)["seconds"], "answer": ans,
         "task": task}
    return r


def recovery_runs(a, bindir, work, want):
    c = Cluster(bindir, work, "recovery", task_events=True,
                respawn_limit=1000)
    rng = random.Random(a.seed)
    base, trials = [], []
    jobdir = os.path.join(work, "jobs")
    try:
        c.start()
        for _ in range(3):
            wait_quiet(a)
            base.append(run_farm(c, a, jobdir, a.every)["seconds"])
        for t in range(a.trials):
            wait_quiet(a)
            r = trial(c, a, jobdir, rng)
            if r is None:
                log(f"trial {t + 1}/{a.trials}: the job ended before the "
                    f"kill; not counted")
                continue
            if r["answer"] != want:
                raise SystemExit(f"trial {t}: {r['answer']} is not the "
                                 f"reference's {want}")
            trials.append(r)
            log(f"trial {t + 1}/{a.trials}: kill at {r['at']:.2f} s, job "
                f"{r['seconds']:.3f} s")
    finally:
        c.stop()
    return base, trials


# ---- the report ----

def fmt(x, d=3):
    return "n/a" if x != x else f"{x:.{d}f}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def report(a, runs, base, trials, want, cmd):
    mpi = med([r["seconds"] for r in runs["mpi"]])
    best = [min(a["seconds"], b["seconds"])
            for a, b in zip(runs["mpi"], runs["mpi unbound"])]
    rows = []
    for name, rs in runs.items():
        s = [r["seconds"] for r in rs]
        row = [name, fmt(med(s)), fmt(min(s)), fmt(max(s)),
               fmt(med([r["wall"] for r in rs])), f"{med(s) / mpi:.3f}",
               f"{med([x / y for x, y in zip(s, best)]):.3f}"]
        if name.startswith("farm"):
            row += [fmt(med([r[k] for r in rs]))
                    for k in ("sweep", "write", "read")]
            row.append(fmt(med([r["seconds"] - r["critical"] for r in rs])))
        else:
            row += ["", "", "", ""]
        rows.append(row)
    t1 = table(["run", "median s", "min s", "max s", "wall s (client)",
                "x mpi", "x best mpi", "sweeping s", "writing s",
                "reading s", "between tasks s"], rows)
    cps = [r["seconds"] for r in runs[f"farm cp/{a.every} /dev/shm"]]
    nocps = [r["seconds"] for r in runs["farm no cp /dev/shm"]]
    cp, nocp = med(cps), med(nocps)
    paired = med([x / y for x, y in zip(cps, nocps)])
    verdict = "; ".join(
        f"{d} {r:.3f} x the faster MPI ({'met' if r <= 1.15 else 'missed'})"
        for d, r in ((d, med([x["seconds"] / y for x, y in
                              zip(runs[f"farm cp/{a.every} {d}"], best)]))
                     for d in ("/dev/shm", "/tmp")))
    b = med(base)
    t2 = table(["trial", "kill at s", "detected s", "rerun sent s",
                "respawned s", "work lost s", "rerun task s", "t_load s",
                "job s", "extra s"],
               [[i + 1, fmt(r["at"], 2), fmt(r["detect"]), fmt(r["again"]),
                 fmt(r["respawn"]), fmt(r["lost"]), fmt(r["rerun"]),
                 fmt(r["load"]), fmt(r["seconds"]), fmt(r["seconds"] - b)]
                for i, r in enumerate(trials)] +
               [["median", "", fmt(med([r["detect"] for r in trials])),
                 fmt(med([r["again"] for r in trials])),
                 fmt(med([r["respawn"] for r in trials])),
                 fmt(med([r["lost"] for r in trials])),
                 fmt(med([r["rerun"] for r in trials])),
                 fmt(med([r["load"] for r in trials])),
                 fmt(med([r["seconds"] for r in trials])),
                 fmt(med([r["seconds"] for r in trials]) - b)]])
    cpu = sh("lscpu | sed -n 's/^Model name: *//p'")
    allruns = [r for rs in runs.values() for r in rs]
    nruns = len(allruns)
    noisy = sum(r["busy"] > a.quiet_busy for r in allruns)
    commit = sh(f"git -C {REPO} rev-parse --short HEAD")
    dirty = sh(f"git -C {REPO} status --porcelain --untracked-files=no")
    return f"""
## Relaxation

Seed 003's relaxation, N = {a.n}, itmax = {a.itmax}, maxeps = {a.maxeps}
(every run: {want[1]} sweeps, eps = {want[2]!r}, S = {want[3]!r}, the serial
reference's to the last digit).  `mpi`: scripts/bench/relax_mpi.c on 2
processes (halo rows by Isend/Irecv, MPI_Allreduce of eps every sweep, no
fault tolerance; Open MPI's default binding, `unbound` with --bind-to none).
`farm`: a relax job of {a.blocks} blocks on 1 node x 2 workers (plus the
master), checkpoints every {a.every} sweeps in a job dir on /dev/shm (tmpfs)
or /tmp (ext4), or none (checkpoint_every = itmax: one round, with a halo of
itmax rows whose sweeps are extra work).  Same sweep kernel on both sides
(worker/tasks/relax_kernel.c), on buffers allocated alike (huge pages where
the kernel allows; the workers free theirs at the end of every job, so each
job touches fresh memory as each MPI run does).  Times: mpi from after MPI_Init to S; farm
the batch's seconds (queued to finished, workers already up); medians of
{a.reps} interleaved repetitions; x mpi: the run's median over mpi's; x best
mpi: the median over the repetitions of the run's time over the faster of
the two mpi runs of the same repetition (the machine's speed drifts: this
compares runs made seconds apart).  Sweeping/writing/reading: per block,
summed over the job's tasks (task reports); between tasks: the batch's time
minus the slowest task of every phase (dispatch, results, the master's
planning).  Clusters: state_dir under a temp dir in /dev/shm,
"task_events": false, heartbeat_ms 200.

{t1}

Goal, the farm with checkpoints every {a.every} sweeps within 1.15 x the plain
MPI time: {verdict}.

Checkpoint overhead (every {a.every} sweeps vs none, /dev/shm): {fmt(cp)} s
vs {fmt(nocp)} s, {100 * (cp / nocp - 1):+.1f} % (median of the per-repetition
ratios: {100 * (paired - 1):+.1f} %).

Recovery: {len(trials)} jobs (checkpoints every {a.every}, /dev/shm, task
events on), each with one busy worker SIGKILLed at a random moment; median
job without fault {fmt(b)} s.  Times after the kill: detected
(worker_dead), rerun sent (the lost block handed to a live worker),
respawned (the replacement up: the seed's t_spawn).  Work lost: the killed
task's time from its assignment to the kill; rerun task: the block again
from its checkpoint, of which t_load reading its rows (the seed's t_load);
extra: the job's time minus the median without fault.

{t2}

The extra time is more than detection plus the rerun: until the replacement
is up the surviving worker runs both blocks of the next rounds, and the
replacement's first round touches fresh memory and reads its block back
from the checkpoint.

Machine: {cpu}, {sh('nproc')} CPUs, {sh("free -g | awk '/^Mem:/{print $2}'")} GiB
RAM, kernel {sh('uname -r')}, {sh(MPIRUN + ' --version | head -1')}; tree
{commit}{' (+ uncommitted changes)' if dirty else ''}; shared with other
benchmarks: before each run the script waited (up to {a.quiet_wait:.0f} s) for
the CPUs to be at most {100 * a.quiet_busy:.0f} % busy; {noisy} of {nruns} timing runs
started busier.  Load average before: {a.load_before}.
Command: `{cmd}`; {sh('date -u')}.
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=4098)
    p.add_argument("--itmax", type=int, default=100)
    p.add_argument("--maxeps", type=float, default=1e-8)
    p.add_argument("--blocks", type=int, default=2)
    p.add_argument("--every", type=int, default=10)
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--min-delay", type=float, default=0.3)
    p.add_argument("--max-delay", type=float, default=1.3)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--quiet-busy", type=float, default=0.15,
                   help="wait before each run until the CPUs are at most "
                   "this busy (fraction)")
    p.add_argument("--quiet-wait", type=float, default=60,
                   help="but no longer than this (seconds)")
    p.add_argument("--no-append", action="store_true")
    p.add_argument("--bin", default=os.path.join(REPO, "bin"),
                   help="the build to run (default: this tree's bin/)")
    a = p.parse_args()
    if a.seed is None:
        a.seed = random.randrange(1 << 30)
    a.load_before = open("/proc/loadavg").read().split()[0]
    cmd = "/usr/bin/python3 scripts/bench/relax.py " + " ".join(sys.argv[1:])
    work = tempfile.mkdtemp(prefix="ftfarm-relax-bench-", dir="/dev/shm")
    tmpjobs = tempfile.mkdtemp(prefix="ftfarm-relax-bench-", dir="/tmp")

    def on_term(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_term)
    try:
        bindir, mpi, ref = build(work, a.bin)
        log(f"serial reference N={a.n} itmax={a.itmax}")
        want = answer(json.loads(subprocess.run(
            [ref, str(a.n), str(a.itmax), repr(a.maxeps)], check=True,
            capture_output=True, text=True, timeout=600).stdout))
        runs = timing_runs(a, bindir, mpi, work, tmpjobs, want)
        base, trials = recovery_runs(a, bindir, work, want)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(tmpjobs, ignore_errors=True)
    text = report(a, runs, base, trials, want, cmd)
    print(text)
    if not a.no_append:
        with open(os.path.join(REPO, "BENCHMARKS.md"), "a") as f:
            f.write(text)
        log("appended to BENCHMARKS.md")


if __name__ == "__main__":
    main()
