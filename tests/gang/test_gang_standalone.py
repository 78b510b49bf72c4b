"""Gang tasks under the standalone monitor (tests/gang/monitor.c).

The monitor stands in for ftfarm-master: run as the one process of an
mpirun started like ftfarm starts its master, it spawns the gang once,
pings every rank, SIGKILLs and announces the ranks whose pongs are late,
and re-runs a failed gang on fresh processes.  Kills are placed with the
monitor's --kill RANK@STEP (sent when the rank announces that step, during
the job's step_delay_ms pause); the monitor still finds the dead only by
their pings.

Every output is compared byte for byte with the serial reference in the
stated order (tests/gang/gang_ref.py), and every run must leave no process
behind (each run's processes carry a FTFARM_TEST_TAG of their own).

Not part of `make test` (the master's own gang tests are
tests/integration/test_gang.py): `make gang-test` runs it.
"""
import json
import os
import random
import signal
import struct
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from conftest import ROOT, tagged_pids, wait_until

sys.path.insert(0, str(ROOT / "tests" / "gang"))
import gang_ref  # noqa: E402

MONITOR = ROOT / "build" / "openmpi" / "tests" / "gang-monitor"
MPIRUN = ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe",
          "--bind-to", "none", "--enable-recovery",
          "--mca", "btl", "self,vader,tcp",
          "--mca", "btl_tcp_if_include", "lo",
          "--mca", "oob_tcp_if_include", "lo",
          "--mca", "mpi_yield_when_idle", "1",
          "--mca", "orte_abort_on_non_zero_status", "0",
          "--mca", "orte_execute_quiet", "1", "-n", "1"]
DELAY_MS = 300          # step pause of the fault tests: room for a kill
LENGTH = 2000


@pytest.fixture(scope="module", autouse=True)
def built():
    """The gang programs, built with the main Makefile's rules."""
    subprocess.run(["make", "-s", "-C", str(ROOT), "gang"], check=True,
                   timeout=600,
                   stdout=subprocess.DEVNULL)


class Run:
    """One monitor run: its exit status, final line, events, stderr."""

    def __init__(self, proc, events_path):
        self.rc = proc.returncode
        self.stderr = proc.stderr
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        self.result = json.loads(lines[-1]) if lines else None
        self.events = []
        if events_path.exists():
            self.events = [json.loads(ln) for ln in
                           events_path.read_text().splitlines() if ln]

    def of(self, name, **match):
        return [e for e in self.events if e["event"] == name and
                all(e.get(k) == v for k, v in match.items())]


def run_monitor(tmp_path, job, kills=(), attempts=3, timeout=170):
    """Run JOB (a dict) under the monitor; fail the test on leftovers."""
    tag = uuid.uuid4().hex
    env = dict(os.environ, FTFARM_TEST_TAG=tag)
    env.pop("OMPI_MCA_btl", None)
    job_file = tmp_path / f"job-{tag[:8]}.json"
    job_file.write_text(json.dumps(job))
    events = tmp_path / f"events-{tag[:8]}.jsonl"
    cmd = MPIRUN + [str(MONITOR), "--job", str(job_file), "--events",
                    str(events), "--attempts", str(attempts),
                    "--heartbeat-ms", "200", "--ping-timeout-ms", "1500"]
    for k in kills:
        cmd += ["--kill", k]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=timeout)
    finally:
        left = wait_until(lambda: not tagged_pids(tag), 15)
        stray = tagged_pids(tag)
        for pid in stray:
            os.kill(pid, signal.SIGKILL)
    assert left, f"processes left behind: {stray}"
    return Run(proc, events)


# ---- references ----

_refs = {}


def ref_sum(ranks, length, seed):
    key = (ranks, length, seed)
    if key not in _refs:
        rows = gang_ref.gen_rows(seed, ranks, length)
        _refs[key] = gang_ref.pack(gang_ref.tree_sum(rows))
    return _refs[key]


def allreduce_job(tmp_path, ranks, spares=2, length=LENGTH, seed=11,
                  delay=DELAY_MS, **extra):
    job = {"type": "ftallreduce", "ranks": ranks, "spares": spares,
           "length": length, "seed": seed,
           "output": str(tmp_path / f"sum-{uuid.uuid4().hex[:8]}.bin"),
           "step_delay_ms": delay}
    job.update(extra)
    if "input" in job:
        job.pop("seed")
    return job


def check_sum(run, job, ref):
    assert run.rc == 0, (run.result, run.stderr[-2000:])
    assert run.result["status"] == "ok"
    assert Path(job["output"]).read_bytes() == ref


# ---- ftallreduce ----

@pytest.mark.timeout(200)
@pytest.mark.parametrize("ranks", [4, 6, 8])
def test_allreduce_no_fault(tmp_path, ranks):
    """No fault, vectors of 40000 doubles (rendezvous-sized messages),
    after 3 timed benchmark rounds on the same vectors."""
    job = allreduce_job(tmp_path, ranks, length=40000, delay=0,
                        bench_rounds=3)
    run = run_monitor(tmp_path, job)
    check_sum(run, job, ref_sum(ranks, 40000, 11))
    assert run.result["attempts"] == 1 and run.result["deaths"] == 0
    rep = run.result["report"]
    assert rep["recoveries"] == 0 and rep["bench_rounds"] == 3
    assert 0 < rep["bench_min_seconds"] <= rep["bench_median_seconds"]
    # every rank, spares included, reported the same result
    assert len(run.of("result", ok=True)) == ranks + 2


# (ranks, step, victim): steps are 0 = the fold, L + 1 = the exchange of
# level L, top + 1 = handing the result to the free ranks.
KILL_EACH_STEP = [
    (4, 0, 1), (4, 1, 2), (4, 2, 3),
    (6, 0, 5), (6, 1, 0), (6, 2, 3), (6, 3, 1),
    (8, 0, 3), (8, 1, 5), (8, 2, 6), (8, 3, 1), (8, 4, 2),
]


@pytest.mark.timeout(200)
@pytest.mark.parametrize("ranks,step,victim", KILL_EACH_STEP)
def test_allreduce_kill_active_at_each_step(tmp_path, ranks, step, victim):
    """One active rank SIGKILLed as it starts a step: a spare (or the
    input, before any exchange) takes over, the sum keeps its bits."""
    job = allreduce_job(tmp_path, ranks)
    run = run_monitor(tmp_path, job, kills=[f"{victim}@{step}"])
    check_sum(run, job, ref_sum(ranks, LENGTH, 11))
    assert run.result["attempts"] == 1 and run.result["deaths"] == 1
    assert run.of("kill", rank=victim, step=step)
    assert run.of("dead", rank=victim)
    assert run.of("notice", epoch=1)


@pytest.mark.timeout(200)
@pytest.mark.parametrize("ranks,kill", [(4, "5@0"), (8, "9@4"),
                                        (6, "6@3")])
def test_allreduce_spare_killed(tmp_path, ranks, kill):
    """A spare dies (at the start, or while the result is handed to it)."""
    job = allreduce_job(tmp_path, ranks)
    run = run_monitor(tmp_path, job, kills=[kill])
    check_sum(run, job, ref_sum(ranks, LENGTH, 11))
    assert run.result["attempts"] == 1 and run.result["deaths"] == 1


@pytest.mark.timeout(200)
def test_allreduce_more_deaths_than_spares_shrinks(tmp_path):
    """Three actives of different blocks die with two spares: the gang
    shrinks to 4 positions (one per block of level 1) and goes on."""
    job = allreduce_job(tmp_path, 8)
    run = run_monitor(tmp_path, job, kills=["1@2", "3@2", "5@2"])
    check_sum(run, job, ref_sum(8, LENGTH, 11))
    assert run.result["attempts"] == 1 and run.result["deaths"] == 3
    assert run.result["report"]["positions"] == 4


@pytest.mark.timeout(200)
def test_allreduce_spares_used_then_shrink(tmp_path):
    """Deaths one after another, each once the survivors recovered from
    the previous one (RANK@STEP+EPOCH): spare 8 takes position 1, spare 9
    position 2, then the third death shrinks the gang to 4 positions.
    (Caught a monitor that stopped sending notices once it had asked a
    rank to write: the writer was still waiting on a dead peer.)"""
    job = allreduce_job(tmp_path, 8)
    run = run_monitor(tmp_path, job, kills=["1@2", "2@2+1", "6@2+2"])
    check_sum(run, job, ref_sum(8, LENGTH, 11))
    assert run.result["attempts"] == 1 and run.result["deaths"] == 3
    assert run.result["notices"] == 3
    assert run.result["report"]["recoveries"] == 3
    assert run.result["report"]["positions"] == 4


@pytest.mark.timeout(250)
def test_allreduce_two_deaths_in_one_block_fail_then_rerun(tmp_path):
    """Both holders of the sum of leaves 2-3 die after level 0: the gang
    fails cleanly (no wrong sum) and the re-run on fresh processes gives
    the right bits."""
    job = allreduce_job(tmp_path, 8)
    run = run_monitor(tmp_path, job, kills=["2@2", "3@2"])
    check_sum(run, job, ref_sum(8, LENGTH, 11))
    assert run.result["attempts"] >= 2
    first = run.of("attempt_end", attempt=1)[0]
    assert not first["ok"]
    assert "leaves 2-3 (level 1) is lost" in first["reason"]
    # no rank of attempt 1 claimed a result after the loss
    assert not run.of("result", attempt=1, ok=True, epoch=1)


@pytest.mark.timeout(200)
def test_allreduce_death_during_recovery(tmp_path):
    """A second rank dies while the survivors recover from the first:
    the recovery starts over for the newer notice."""
    job = allreduce_job(tmp_path, 8)
    run = run_monitor(tmp_path, job, kills=["1@2", "5@recover"])
    check_sum(run, job, ref_sum(8, LENGTH, 11))
    assert run.result["attempts"] == 1 and run.result["deaths"] == 2
    assert run.of("kill", rank=5, step=-2)


@pytest.mark.timeout(200)
def test_allreduce_sigstop(tmp_path):
    """A hung (SIGSTOPped) rank is found by its missing pong, killed, and
    replaced like a dead one."""
    job = allreduce_job(tmp_path, 6)
    run = run_monitor(tmp_path, job, kills=["2@2:stop"])
    check_sum(run, job, ref_sum(6, LENGTH, 11))
    assert run.result["deaths"] == 1
    assert run.of("kill", rank=2, signal=int(signal.SIGSTOP))


@pytest.mark.timeout(200)
def test_allreduce_input_file(tmp_path):
    """Input from a file of values of many magnitudes, a death at level 1."""
    rng = random.Random(5)
    ranks, length = 6, 3000
    rows = [[rng.uniform(-1, 1) * 2.0 ** rng.randint(-30, 30)
             for _ in range(length)] for _ in range(ranks)]
    inp = tmp_path / "input.bin"
    inp.write_bytes(b"".join(gang_ref.pack(r) for r in rows))
    job = allreduce_job(tmp_path, ranks, length=length, input=str(inp))
    run = run_monitor(tmp_path, job, kills=["1@2"])
    ref = gang_ref.pack(gang_ref.tree_sum(rows))
    check_sum(run, job, ref)
    # the order matters for these values: a left-to-right sum differs
    naive = gang_ref.pack([sum(col) for col in zip(*rows)])
    assert naive != ref


@pytest.mark.timeout(60)
def test_allreduce_bad_job_refused(tmp_path):
    job = allreduce_job(tmp_path, 0)
    job_file = tmp_path / "bad.json"
    job_file.write_text(json.dumps(job))
    proc = subprocess.run([str(MONITOR), "--job", str(job_file)],
                          capture_output=True, text=True, timeout=50)
    assert proc.returncode == 2
    assert "job.ranks: must be between 1 and 1024" in proc.stderr


# ---- pipeline ----

def pipeline_job(tmp_path, w, h, routes, nbytes=300000, chunks=12, **extra):
    job = {"type": "pipeline", "width": w, "height": h, "routes": routes,
           "bytes": nbytes, "chunks": chunks, "seed": 9,
           "output": str(tmp_path / f"recv-{uuid.uuid4().hex[:8]}.bin")}
    job.update(extra)
    if "input" in job:
        job.pop("seed")
    return job


def check_pipeline(run, job, want):
    assert run.rc == 0, (run.result, run.stderr[-2000:])
    assert run.result["status"] == "ok"
    assert Path(job["output"]).read_bytes() == want
    rep = run.result["report"]
    assert rep["verified"] is True
    assert rep["hops"] == job["width"] + job["height"] - 2
    for key in ("seconds", "bandwidth_MBps", "hop_latency_us",
                "model_seconds", "model_seed_seconds"):
        assert rep[key] >= 0, key
    return rep


@pytest.mark.timeout(150)
@pytest.mark.parametrize("w,h,routes,mode", [
    (4, 4, 1, "pipelined"),           # 7 processes
    (3, 3, 2, "pipelined"),           # 8 processes
    (3, 3, 2, "store_forward"),
    (4, 2, 2, "pipelined"),           # 6 processes, unequal legs
])
def test_pipeline_verified(tmp_path, w, h, routes, mode):
    job = pipeline_job(tmp_path, w, h, routes, mode=mode)
    run = run_monitor(tmp_path, job)
    rep = check_pipeline(run, job, gang_ref.gen_bytes(9, job["bytes"]))
    assert rep["routes"] == routes and rep["mode"] == mode


@pytest.mark.timeout(150)
def test_pipeline_input_file_prefix(tmp_path):
    """The first L bytes of a longer input file."""
    data = os.urandom(100003)
    inp = tmp_path / "message.bin"
    inp.write_bytes(data)
    job = pipeline_job(tmp_path, 4, 4, 1, nbytes=77777, chunks=7,
                       input=str(inp))
    run = run_monitor(tmp_path, job)
    check_pipeline(run, job, data[:77777])


@pytest.mark.timeout(200)
def test_pipeline_rank_killed_fails_then_rerun(tmp_path):
    """An inner node of the route dies before the transfer: the job fails
    cleanly and the re-run delivers every byte."""
    job = pipeline_job(tmp_path, 4, 4, 1, step_delay_ms=DELAY_MS)
    run = run_monitor(tmp_path, job, kills=["3@1"])
    check_pipeline(run, job, gang_ref.gen_bytes(9, job["bytes"]))
    assert run.result["attempts"] == 2
    first = run.of("attempt_end", attempt=1)[0]
    assert not first["ok"] and "died" in first["reason"]


# ---- the master's death ----

@pytest.mark.timeout(120)
def test_master_killed_gang_leaves(tmp_path):
    """SIGKILL of the monitor in the middle of a gang: every rank leaves
    once the master has been silent past the limit START gave (5 s), and
    mpirun ends with them; nothing is left behind."""
    tag = uuid.uuid4().hex
    env = dict(os.environ, FTFARM_TEST_TAG=tag)
    job = allreduce_job(tmp_path, 4, delay=3000)
    job_file = tmp_path / "slow.json"
    job_file.write_text(json.dumps(job))
    events = tmp_path / "slow-events.jsonl"
    proc = subprocess.Popen(MPIRUN + [str(MONITOR), "--job", str(job_file),
                                      "--events", str(events)],
                            env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: events.exists() and
                          "started" in events.read_text(), 60)
        monitor = [p for p in tagged_pids(tag)
                   if Path(f"/proc/{p}/cmdline").read_bytes()
                   .split(b"\0")[0].endswith(b"gang-monitor")]
        assert len(monitor) == 1
        os.kill(monitor[0], signal.SIGKILL)
        assert wait_until(lambda: not tagged_pids(tag), 30)
        assert proc.wait(timeout=10) is not None
    finally:
        for pid in tagged_pids(tag):
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
