#!/usr/bin/python3
"""Snakemake: what one job of a workflow costs through ftfarm's profile,
in Snakemake's local mode, and as one sbatch per job on a Slurm cluster.

    /usr/bin/python3 scripts/bench/snakemake.py [--jobs 200] [--slots 4]
        [--rounds 3] [--modes local,ftfarm,groups,sbatch] [--bin DIR]
        [--keep]

The workflow: JOBS independent jobs, each `echo I > out/I.txt` (the work
is nothing: what is measured is what running a job costs), gathered by
a local rule.  The same Snakefile, run in a fresh directory each time,
by Debian's snakemake 7.21:

  local    snakemake -j SLOTS: the jobs run as its own children
  ftfarm   snakemake --profile scripts/snakemake/ftfarm, on a cluster
           of 2 nodes x SLOTS/2 slots on this machine
  groups   the same with --groups job=g --group-components g=20 --cores
           SLOTS/2: a batch runs 20 jobs, SLOTS/2 at once, in one
           job-side snakemake
  sbatch   snakemake --cluster "sbatch ..." with a status script of
           squeue, on a Slurm cluster of 2 nodes x SLOTS/2 CPUs, each a
           network namespace with its own slurmd (tests/integration/
           slurm_cluster.py; root only)

The cluster modes use the same Snakemake settings (--jobs 500,
--max-status-checks-per-second 50, those of the profile).  Rounds run the
three modes one after the other, so that the machine's noise falls on
all of them; every output is checked.  For each mode, medians over the
rounds of: the wall time, and it per job; the CPU time per job of
everything the benchmark runs (its own cgroup's cpuacct: snakemake, its
scripts, the jobs, the cluster's daemons), and of it the part that
snakemake's process and its children (the submit and status scripts;
in local mode, the jobs) used.  Then what one call of each piece costs
(CPU, median of 20): the job script's own snakemake, the profile's
submit and status scripts, sbatch and the squeue status script; and the
CPU per second of the two clusters idle.  Markdown on stdout, progress
on stderr.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import benchlib as B  # noqa: E402

SNAKEMAKE = "/usr/bin/snakemake"
PROFILE = os.path.join(ROOT, "scripts", "snakemake", "ftfarm")
CPUACCT = "/sys/fs/cgroup/cpuacct"
CLUSTER_OPTS = ["--jobs", "500", "--max-status-checks-per-second", "50"]
GROUP = 20              # jobs per batch in the groups mode

SNAKEFILE = """
J = {jobs}

localrules: all

rule all:
    input: expand("out/{{i}}.txt", i=range(J))

rule job:
    output: "out/{{i}}.txt"
    shell: "echo {{wildcards.i}} > {{output}}"
"""

# Snakemake's --cluster-status for Slurm: the job's state from squeue
# (this cluster keeps ended jobs for an hour; it has no accounting, so
# no sacct).
SLURM_STATUS = """#!/bin/sh
state=$(squeue -h -t all -j "$1" -o %T 2>/dev/null)
case $state in
COMPLETED) echo success ;;
PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|REQUEUED*|RESIZING)
	echo running ;;
"") echo "slurm-status: job $1 unknown" >&2; echo failed ;;
*) echo failed ;;
esac
"""


class Cgroup:
    """A cpuacct cgroup of its own that this process (and so everything
    it starts from now on) runs in; None-like when it cannot be made."""

    def __init__(self):
        self.path = os.path.join(CPUACCT, f"ftfarm-bench-{os.getpid()}")
        try:
            os.mkdir(self.path)
            with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError as e:
            B.log(f"no cgroup of its own ({e}): CPU from /proc/stat, "
                  "which counts the whole machine")
            self.path = None

    def usage(self):
        """CPU seconds used in the cgroup so far (the machine's, without
        one)."""
        if self.path is None:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
            return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")
        with open(os.path.join(self.path, "cpuacct.usage")) as f:
            return int(f.read()) / 1e9

    def close(self):
        """Leave the cgroup; remove it once what ran in it has ended."""
        if self.path is None:
            return
        with open(os.path.join(CPUACCT, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.5)
        B.log(f"left {self.path}: processes still in it")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_of(argv, env=None, cwd=None, check=True):
    """Run ARGV; (CPU seconds it and its children used, its stdout)."""
    c0 = children_cpu()
    r = subprocess.run(argv, env=env, cwd=cwd, capture_output=True,
                       text=True, timeout=600)
    if check and r.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({r.returncode}): "
                         f"{r.stderr[-2000:]}")
    return children_cpu() - c0, r.stdout


class Ftfarm:
    """A cluster of 2 nodes x SLOTS/2 slots; the env of its snakemake."""

    def __init__(self, work, bindir, slots):
        self.ftfarm = os.path.join(bindir, "ftfarm")
        self.config = os.path.join(work, "cluster.json")
        with open(self.config, "w") as f:
            json.dump({"name": "smk", "state_dir": os.path.join(work, "state"),
                       "heartbeat_ms": 1000,
                       "nodes": [{"name": f"n{i}", "host": "localhost",
                                  "workers": slots // 2} for i in (1, 2)]},
                      f)
        self.env = dict(os.environ, FTFARM_CONFIG=self.config,
                        FTFARM=self.ftfarm)

    def start(self):
        cpu_of([self.ftfarm, "start", "-c", self.config])

    def stop(self):
        subprocess.run([self.ftfarm, "stop", "-c", self.config],
                       capture_output=True, timeout=120)

    def args(self):
        return ["--profile", PROFILE, *CLUSTER_OPTS]

    def group_args(self, slots):
        return [*self.args(), "--groups", "job=g", "--group-components",
                f"g={GROUP}", "--cores", str(slots // 2)]

    def copies(self):
        """Straggler copies the master has started so far."""
        try:
            with open(os.path.join(os.path.dirname(self.config), "state",
                                   "events.jsonl")) as f:
                return sum('"duplicate":true' in line for line in f)
        except OSError:
            return 0


class Slurm:
    """A Slurm cluster of 2 nodes x SLOTS/2 CPUs in network namespaces."""

    def __init__(self, work, slots):
        from slurm_cluster import SlurmCluster

        class KeepJobs(SlurmCluster):
            # Ended jobs stay an hour, so that squeue still knows them
            # when Snakemake's status round comes.
            def _write_conf(self):
                super()._write_conf()
                text = self.conf.read_text()
                self.conf.write_text(text.replace("MinJobAge=30",
                                                  "MinJobAge=3600"))

        self.sl = KeepJobs(Path(work) / "slurm", 2, cpus=slots // 2)
        self.status = os.path.join(work, "slurm-status")
        with open(self.status, "w") as f:
            f.write(SLURM_STATUS)
        os.chmod(self.status, 0o755)
        self.logs = os.path.join(work, "slurm-logs")
        os.mkdir(self.logs)
        self.env = None

    def start(self):
        self.sl.start()
        self.env = dict(self.sl.env)

    def stop(self):
        self.sl.teardown()

    def args(self):
        return ["--cluster", f"sbatch --parsable -n 1 -c {{threads}} "
                f"-o {self.logs}/%j.out", "--cluster-status", self.status,
                "--cluster-cancel", "scancel", *CLUSTER_OPTS]


def run_workflow(work, name, args, env, jobs, cg):
    """Run the workflow once in a fresh directory: (wall s, all CPU s,
    snakemake's CPU s)."""
    wd = tempfile.mkdtemp(prefix=f"{name}-", dir=work)
    with open(os.path.join(wd, "Snakefile"), "w") as f:
        f.write(SNAKEFILE.format(jobs=jobs))
    env = {k: v for k, v in env.items() if k not in ("CI",
                                                      "SNAKEMAKE_PROFILE")}
    u0, c0, t0 = cg.usage(), children_cpu(), time.monotonic()
    r = subprocess.run([SNAKEMAKE, *args], cwd=wd, env=env,
                       capture_output=True, text=True, timeout=7200)
    wall = time.monotonic() - t0
    cpu, own = cg.usage() - u0, children_cpu() - c0
    if r.returncode != 0:
        raise SystemExit(f"{name}: snakemake failed:\n{r.stderr[-4000:]}")
    for i in range(jobs):
        with open(os.path.join(wd, "out", f"{i}.txt")) as f:
            if f.read() != f"{i}\n":
                raise SystemExit(f"{name}: out/{i}.txt is wrong")
    shutil.rmtree(wd)
    return wall, cpu, own


def idle_rate(cg, seconds=10):
    """CPU seconds per second used in the cgroup while nothing runs."""
    u0 = cg.usage()
    time.sleep(seconds)
    return (cg.usage() - u0) / seconds


def piece_costs(work, ftf, slurm, reps=20):
    """Median CPU of one call of each piece (seconds)."""
    wd = os.path.join(work, "pieces")
    os.makedirs(os.path.join(wd, ".snakemake", "tmp.pieces"))
    with open(os.path.join(wd, "Snakefile"), "w") as f:
        f.write(SNAKEFILE.format(jobs=1))
    os.mkdir(os.path.join(wd, "out"))
    # A job script as Snakemake writes it for --cluster, with a status
    # command (it ends with "exit 0 || exit 1").
    js = os.path.join(wd, ".snakemake", "tmp.pieces", "snakejob.job.1.sh")
    props = {"type": "single", "rule": "job", "local": False, "input": [],
             "output": ["out/0.txt"], "wildcards": {"i": "0"}, "params": {},
             "log": [], "threads": 1, "resources": {}, "jobid": 1,
             "cluster": {}}
    with open(js, "w") as f:
        f.write(f"#!/bin/sh\n# properties = {json.dumps(props)}\n"
                f"cd {wd} && /usr/bin/python3 -m snakemake --snakefile "
                f"{wd}/Snakefile --target-jobs 'job:i=0' --allowed-rules job "
                "--cores all --attempt 1 --force-use-threads --force "
                "--keep-target-files --keep-remote --max-inventory-time 0 "
                "--nocolor --notemp --no-hooks --nolock --ignore-incomplete "
                "--latency-wait 5 --mode 2 && exit 0 || exit 1\n")
    os.chmod(js, 0o755)
    out = {}

    def med(key, argv, env=None):
        out[key] = B.median([cpu_of(argv, env=env, cwd=wd)[0]
                             for _ in range(reps)])

    med("the job script's snakemake (one job)", [js])
    ids = []
    c = []
    for _ in range(reps):
        cpu, text = cpu_of([os.path.join(PROFILE, "ftfarm-submit.py"), js],
                           env=ftf.env, cwd=wd)
        c.append(cpu)
        ids.append(text.strip())
    out["ftfarm-submit.py (one job)"] = B.median(c)
    for bid in ids:
        cpu_of([ftf.ftfarm, "wait", "-c", ftf.config, bid], check=False)
    med("ftfarm-status.sh (one check)",
        [os.path.join(PROFILE, "ftfarm-status.sh"), ids[-1]], ftf.env)
    if slurm is not None:
        c, jids = [], []
        for _ in range(reps):
            cpu, text = cpu_of(["sbatch", "--parsable", "-n", "1", "-o",
                                f"{slurm.logs}/%j.out", js],
                               env=slurm.env, cwd=wd)
            c.append(cpu)
            jids.append(text.strip())
        out["sbatch (one job)"] = B.median(c)
        med("squeue status script (one check)", [slurm.status, jids[-1]],
            slurm.env)
    return out


def run(args):
    if not os.path.exists(SNAKEMAKE):
        raise SystemExit("needs snakemake (scripts/install-deps)")
    info = B.machine_info()
    work = B.make_workdir("ftfarm-bench-smk-")
    bindir = B.snapshot_bin(args.bin, work)
    cg = Cgroup()
    ftf = Ftfarm(work, bindir, args.slots)
    slurm = None
    if "sbatch" in args.modes:
        if os.geteuid() == 0:
            slurm = Slurm(work, args.slots)
        else:
            B.log("not root: no Slurm cluster, no sbatch mode")
    modes = {"local": (["-j", str(args.slots)], dict(os.environ)),
             "ftfarm": (ftf.args(), ftf.env),
             "groups": (ftf.group_args(args.slots), ftf.env)}
    modes = {k: v for k, v in modes.items() if k in args.modes}
    runs, copies = {}, []
    try:
        ftf.start()
        if slurm is not None:
            slurm.start()
            modes["sbatch"] = (slurm.args(), slurm.env)
        idle = idle_rate(cg)
        for rnd in range(args.rounds):
            for name, (margs, env) in modes.items():
                B.log(f"round {rnd + 1}: {name}")
                k = ftf.copies()
                runs.setdefault(name, []).append(run_workflow(
                    work, name, margs, env, args.jobs, cg))
                if name == "ftfarm":
                    copies.append(ftf.copies() - k)
                B.log(f"  {runs[name][-1][0]:.1f} s")
        B.log("one call of each piece")
        pieces = piece_costs(work, ftf, slurm)
    finally:
        ftf.stop()
        if slurm is not None:
            slurm.stop()
        cg.close()
    report(args, info, runs, idle, pieces, copies)
    B.finish(work, args.keep)


def report(args, info, runs, idle, pieces, copies):
    version = subprocess.run([SNAKEMAKE, "--version"], text=True,
                             capture_output=True).stdout.strip()
    print(f"{B.machine_line(info)}\n")
    print(f"Command: `/usr/bin/python3 scripts/bench/snakemake.py --jobs "
          f"{args.jobs} --slots {args.slots} --rounds {args.rounds} "
          f"--modes {','.join(args.modes)}`; snakemake {version}.\n")
    n = args.jobs
    rows = []
    base = B.median([r[0] for r in runs.get("local", [(float("nan"),)])])
    for name, rs in runs.items():
        wall = B.median([r[0] for r in rs])
        cpu = B.median([r[1] for r in rs])
        own = B.median([r[2] for r in rs])
        busy = B.median([r[1] - idle * r[0] for r in rs])
        rows.append([name, " / ".join(f"{r[0]:.1f}" for r in rs),
                     B.fmt(wall, 1), B.fmt(wall / base, 1),
                     B.fmt(1000 * wall / n, 0), B.fmt(1000 * cpu / n, 0),
                     B.fmt(1000 * busy / n, 0), B.fmt(1000 * own / n, 0)])
    print(B.table(["mode", "wall per round (s)", "wall median (s)",
                   "x local", "wall per job (ms)", "CPU per job (ms)",
                   "less the clusters' idle (ms)",
                   "of it snakemake and its children (ms)"], rows))
    clusters = "ftfarm's and Slurm's" if "sbatch" in runs else "ftfarm's"
    print(f"\nIdle, the clusters ({clusters}, up through every run) used "
          f"{1000 * idle:.0f} ms of CPU per second.  Straggler copies "
          f"ftfarm's master started in each round of the ftfarm mode: "
          f"{' / '.join(map(str, copies)) or 'n/a'} (each waits for the "
          f"job's first run and ends with its status).\n")
    print(B.table(["one call of", "CPU (ms, median of 20)"],
                  [[k, B.fmt(1000 * v, 1)] for k, v in pieces.items()]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default="local,ftfarm,groups,sbatch",
                    type=lambda s: s.split(","))
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin"))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if args.slots < 2 or args.slots % 2:
        raise SystemExit("--slots: an even number, 2 or more")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    run(args)


if __name__ == "__main__":
    main()
