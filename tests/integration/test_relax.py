"""relax jobs: the relaxation of seed 003 as checkpointed block tasks.

Every job is compared with the serial reference tests/relax_ref.c (built
here with cc): the output JSON byte for byte (sweep count, and eps and S to
the last of their 17 digits) and the final matrix byte for byte, for many
sizes, block counts and checkpoint intervals, jobs that stop early on maxeps
at every place a stop can fall, and jobs whose workers are SIGKILLed or
SIGSTOPped at random moments.  Bad jobs are refused at submit with the key
named, by the CLI and by the master itself, which keeps serving.

One cluster (3 workers on 3 logical nodes) serves the whole module.
"""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import (is_cluster_worker, LIVE_STATES, ROOT, Cluster, batch_id_of,
                      check_exactly_once, pid_alive,
                      proc_state, wait_until)

pytestmark = pytest.mark.timeout(120)


# ---- fixtures ----

@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    """ref(n, itmax, maxeps) -> (output line, matrix bytes) of the serial
    reference (cached)."""
    d = tmp_path_factory.mktemp("relax_ref")
    exe = d / "relax_ref"
    subprocess.run(["cc", "-std=c11", "-O2", "-ffp-contract=off", "-o",
                    str(exe), str(ROOT / "tests" / "relax_ref.c"), "-lm"],
                   check=True, timeout=60)
    cache = {}

    def run(n, itmax, maxeps):
        key = (n, itmax, repr(maxeps))
        if key not in cache:
            m = d / "matrix.bin"
            r = subprocess.run([str(exe), str(n), str(itmax), repr(maxeps),
                                str(m)], capture_output=True, text=True,
                               check=True, timeout=60)
            cache[key] = (r.stdout, m.read_bytes())
            m.unlink()
        return cache[key]

    return run


KEEP_S = 4     # how long an idle worker keeps its last block here


@pytest.fixture(scope="module")
def rc(tmp_path_factory):
    """The module's cluster: 3 workers, quick heartbeats, a ladder that
    respawns for ever (the fault tests kill many workers)."""
    c = Cluster(tmp_path_factory.mktemp("relax_cluster"), name="c",
                heartbeat_ms=200, respawn_limit=1000, max_attempts=10,
                task_events=False)
    c.env["FTFARM_RELAX_KEEP_S"] = str(KEEP_S)
    try:
        c.start()
        yield c
    finally:
        c.cleanup()


def live_workers(c):
    return sum(w["state"] in LIVE_STATES for w in c.status()["workers"])


def full_strength(c, n=3, timeout=15):
    """Wait for the cluster to be back at N workers.  Replacing workers is
    the core's business (test_chaos.py); here a slot still respawning only
    has to leave the job some worker."""
    wait_until(lambda: live_workers(c) == n, timeout)
    assert live_workers(c) >= 1, f"no live worker: {c.status()['workers']}"


# ---- running jobs ----

def relax_job(work, n, itmax, blocks, every=None, maxeps=None, matrix=True):
    jobs = work / "jobs"
    out = work / "out"
    jobs.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    job = {"type": "relax", "n": n, "itmax": itmax, "blocks": blocks,
           "dir": str(jobs), "output": str(out / "relax.json")}
    if every is not None:
        job["checkpoint_every"] = every
    if maxeps is not None:
        job["maxeps"] = maxeps
    if matrix:
        job["matrix"] = str(out / "matrix.bin")
    return job


def first_difference(a, b):
    for i in range(min(len(a), len(b))):
        if a[i] != b[i]:
            return i
    return min(len(a), len(b))


def check_job(c, stdout, job, ref_out, ref_matrix, info=""):
    """The job's outputs are the reference's, its tasks have one result
    each, and it left no file behind."""
    bid = batch_id_of(stdout)
    got = Path(job["output"]).read_text()
    assert got == ref_out, f"output {got!r} != reference {ref_out!r} {info}"
    if "matrix" in job:
        m = Path(job["matrix"]).read_bytes()
        assert len(m) == len(ref_matrix), f"matrix size {len(m)} {info}"
        if m != ref_matrix:
            i = first_difference(m, ref_matrix) // 8
            n = job["n"]
            pytest.fail(f"matrix differs first at [{i // n}][{i % n}] {info}")
    res = c.results(bid)
    summary = json.loads((c.state_dir / "batches" / str(bid) /
                          "summary.json").read_text())
    assert summary["total"] == len({r["task"] for r in res}), summary
    problems = check_exactly_once(res, summary["total"])
    assert not problems, f"{problems} {info}"
    assert summary["result"]["sweeps"] == json.loads(ref_out)["sweeps"]
    assert os.listdir(job["dir"]) == [], \
        f"left in the job dir: {os.listdir(job['dir'])} {info}"
    want = {"relax.json", "matrix.bin"} if "matrix" in job else {"relax.json"}
    left = set(os.listdir(Path(job["output"]).parent)) - want
    assert not left, f"left beside the outputs: {left} {info}"
    return res


# n, itmax, blocks, checkpoint_every, maxeps (None: the default 1e-8).
# Where a maxeps stops the job, the comment says where the stop falls.
CASES = [
    (3, 10, 1, 10, None),       # eps 0 at sweep 2
    (5, 200, 1, 7, None),       # stops at 56 = the end of round 8
    (5, 200, 3, 10, None),      # stops at 56, inside round 6
    (5, 200, 2, 1000, None),    # one round to itmax, stop at 56 inside it
    (17, 30, 1, 1, 0.0),
    (17, 30, 2, 3, None),
    (17, 30, 3, 10, None),
    (17, 30, 15, 1000, None),   # blocks = n-2, a round longer than itmax
    (17, 200, 3, 10, 0.1),      # stops at 87, inside a round
    (17, 200, 4, 29, 0.1),      # 87 = 3 x 29, the end of a round
    (17, 87, 2, 29, 0.1),       # the last round ends where eps stops it
    (64, 25, 2, 3, None),
    (64, 25, 62, 10, None),
    (130, 20, 3, 10, None),
    (130, 20, 128, 1, None),
    (130, 12, 7, 5, None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "n%d-it%d-b%d-c%d-e%s"
                         % (c[0], c[1], c[2], c[3], c[4]))
def test_same_as_serial(rc, ref, tmp_path, case):
    n, itmax, blocks, every, maxeps = case
    job = relax_job(tmp_path, n, itmax, blocks, every, maxeps)
    code, out, err = rc.submit({"name": "relax", "job": job}, timeout=100)
    assert code == 0, f"{out} {err}"
    ref_out, ref_matrix = ref(n, itmax, 1e-8 if maxeps is None else maxeps)
    check_job(rc, out, job, ref_out, ref_matrix)
    assert "result:" in err and '"S":' in err, err


def test_every_worker_gets_a_block_of_every_round(rc, ref, tmp_path):
    """As many blocks as workers, short rounds: each round's blocks run on
    as many different workers.  (Tasks this short let a worker hold two at
    once; the first worker the master looked at took two blocks of a round
    while another stayed idle, and the round took twice as long.)

    Judged on the rounds whose blocks each ended on their first instance:
    where a straggler copy won (the machine was busy) or a block ran again,
    the result names the copy's worker, not where the block was put.  The
    rule is about idle workers: a worker lost during the job makes it run
    again."""
    n, itmax, blocks, every = 130, 60, 3, 3
    rounds = itmax // every
    for attempt in range(3):
        full_strength(rc)
        seen = len(rc.events())
        job = relax_job(tmp_path / f"try{attempt}", n, itmax, blocks, every)
        code, out, err = rc.submit({"name": "relax", "job": job}, timeout=100)
        assert code == 0, f"{out} {err}"
        ref_out, ref_matrix = ref(n, itmax, 1e-8)
        res = check_job(rc, out, job, ref_out, ref_matrix)
        lost = [e for e in rc.events()[seen:]
                if e["event"] in ("worker_dead", "worker_inactive")]
        if not lost:
            break
    assert not lost, f"a worker was lost in every try: {lost}"
    by_task = sorted(res, key=lambda r: r["task"])
    assert len(by_task) == blocks * rounds, len(by_task)
    judged, shared = 0, []
    for k in range(0, len(by_task), blocks):
        round_ = by_task[k:k + blocks]
        if any(r["attempt"] != 1 for r in round_):
            continue
        judged += 1
        workers = [r["worker"] for r in round_]
        if len(set(workers)) != blocks:
            shared.append((k // blocks, workers))
    assert not shared, f"rounds whose blocks shared a worker: {shared}"
    assert judged >= rounds // 4, \
        f"only {judged} of {rounds} rounds ended on first instances"


def test_no_matrix_asked(rc, ref, tmp_path):
    job = relax_job(tmp_path, 64, 25, 2, 3, matrix=False)
    code, out, err = rc.submit({"name": "relax", "job": job}, timeout=100)
    assert code == 0, f"{out} {err}"
    ref_out, _ = ref(64, 25, 1e-8)
    check_job(rc, out, job, ref_out, None)


# ---- raw tasks: checkpoints are exact, duplicates are harmless ----

def block_lo(n, blocks, b):
    return 1 + b * (n - 2) // blocks


def checkpoint_tasks(d, n, blocks, frm, sweeps, drop=None, copies=1):
    """Relax tasks by hand: each block of an N x N matrix from the
    checkpoint of FRM sweeps in D by SWEEPS, COPIES times each."""
    out = []
    for b in range(blocks):
        t = {"type": "relax", "n": n, "blocks": blocks, "block": b,
             "from": frm, "sweeps": sweeps, "dir": str(d),
             "save": "checkpoint"}
        if drop is not None:
            t["drop"] = drop
        out += [t] * copies
    return out


def check_checkpoint(ref, d, n, blocks, sweeps):
    """Every block's checkpoint of SWEEPS in D holds the reference's rows."""
    _, m = ref(n, sweeps, 0.0)
    for b in range(blocks):
        lo, hi = block_lo(n, blocks, b), block_lo(n, blocks, b + 1)
        got = (d / f"cp-{sweeps}-{b}").read_bytes()
        assert got == m[lo * n * 8:hi * n * 8], \
            f"checkpoint {sweeps} of block {b} differs"


def test_checkpoints_exact_and_duplicates_harmless(rc, ref, tmp_path):
    """Relax tasks submitted by hand, each twice in the same batch (the two
    copies run at once on different workers and race to publish): every
    checkpoint holds exactly the reference's rows after that many sweeps.
    Then late copies of a round run beside the next round, which takes
    their input files over for its own checkpoints: whatever the late
    copies read, the checkpoint files already published stay as they were,
    no worker remembers rows it should not, and no temp file is left."""
    n, blocks = 17, 3
    d = tmp_path / "raw"
    d.mkdir()

    def tasks(frm, sweeps, drop=None, copies=2):
        return checkpoint_tasks(d, n, blocks, frm, sweeps, drop, copies)

    def check(sweeps):
        check_checkpoint(ref, d, n, blocks, sweeps)

    for frm, sweeps in ((0, 5), (5, 4), (9, 0)):
        code, out, err = rc.submit({"name": "raw", "tasks": tasks(frm,
                                                                  sweeps)})
        assert code == 0, f"{out} {err}"
        check(frm + sweeps)
        for r in rc.results(batch_id_of(out)):
            rep = json.loads(r["stdout"])
            assert len(rep["eps"]) == sweeps, rep
    # Round 9..12 takes the files of checkpoint 5 over, while late copies
    # of round 5..9 read them (they may fail: their results are not
    # wanted).  Then a round that may start from the workers' memory.
    batch = tasks(9, 3, drop=5) + tasks(5, 4, copies=1)
    code, out, err = rc.submit({"name": "late", "tasks": batch})
    res = rc.results(batch_id_of(out))
    assert all(r["status"] == "ok" for r in res if r["task"] < 2 * blocks), \
        res
    check(9)
    check(12)
    code, out, err = rc.submit({"name": "raw", "tasks": tasks(12, 3,
                                                              drop=9)})
    assert code == 0, f"{out} {err}"
    check(15)
    assert sorted(os.listdir(d)) == sorted(
        f"cp-{s}-{b}" for s in (12, 15) for b in range(blocks))


def mapped_under(c, d):
    """{pid: files under D that pid maps} of the cluster's workers."""
    held = {}
    for w in c.status()["workers"]:
        try:
            text = Path(f"/proc/{w['pid']}/maps").read_text()
        except (OSError, ValueError):
            continue
        files = [ln.split(None, 5)[5] for ln in text.splitlines()
                 if len(ln.split(None, 5)) == 6 and str(d) in ln]
        if files:
            held[w["pid"]] = files
    return held


def test_idle_worker_lets_go_of_removed_checkpoints(rc, ref, tmp_path):
    """A round that takes the checkpoint of two rounds before over sweeps
    into it through a mapping, and its worker keeps that mapping for the
    block's next rounds.  A worker that gets no relax task for
    FTFARM_RELAX_KEEP_S lets go of it: a job that ended elsewhere (here its
    files are removed by hand) leaves no removed file held by a mapping,
    that is no disk space nobody can see."""
    n, blocks = 17, 3
    d = tmp_path / "idle"
    d.mkdir()
    for frm, sweeps, drop in ((0, 3, None), (3, 3, None), (6, 3, 3)):
        batch = checkpoint_tasks(d, n, blocks, frm, sweeps, drop)
        code, out, err = rc.submit({"name": "idle", "tasks": batch})
        assert code == 0, f"{out} {err}"
    held = mapped_under(rc, d)
    check_checkpoint(ref, d, n, blocks, 9)
    assert any("/cp-9-" in f for files in held.values() for f in files), \
        f"no worker maps a checkpoint of round 6..9: {held}"
    shutil.rmtree(d)
    held = wait_until(lambda: not mapped_under(rc, d), KEEP_S + 20)
    assert held, f"removed checkpoints still mapped: {mapped_under(rc, d)}"


# ---- faults ----

class Killer(threading.Thread):
    """Every DELAY seconds (uniform), SIGNALS (in turn) one random busy
    worker of cluster C, at most MAX_HITS times, until halted."""

    def __init__(self, c, seed, signals, delay=(0.05, 0.3), max_hits=3):
        super().__init__(daemon=True)
        self.c = c
        self.rng = random.Random(seed)
        self.signals = signals
        self.delay = delay
        self.max_hits = max_hits
        self.halt = threading.Event()
        self.hits = []
        self.errors = []

    def ours(self, pid):
        return is_cluster_worker(self.c.tag, pid)

    def run(self):
        hit = set()
        while len(self.hits) < self.max_hits and \
                not self.halt.wait(self.rng.uniform(*self.delay)):
            try:
                st = self.c.status(timeout=20)
            except Exception as e:      # keep going; reported at the end
                self.errors.append(repr(e))
                continue
            pids = [w["pid"] for w in st["workers"]
                    if w["state"] == "busy" and w["pid"] > 0 and
                    w["pid"] not in hit]
            pids = [p for p in pids if pid_alive(p) and
                    proc_state(p) not in ("T", "t") and self.ours(p)]
            if not pids or self.halt.is_set():
                continue
            pid = self.rng.choice(pids)
            sig = self.signals[len(self.hits) % len(self.signals)]
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                continue
            hit.add(pid)
            self.hits.append((pid, sig.name, round(time.time(), 3)))


FAULT_CASES = [
    # signals, (n, itmax, blocks, checkpoint_every, maxeps); each job lasts
    # about a second without faults, long enough for the killer to land
    # (since a round's blocks run side by side, half the sizes took 0.35 s)
    ((signal.SIGKILL,), (1026, 1600, 4, 10, None)),
    ((signal.SIGSTOP,), (770, 6000, 3, 7, 0.2)),    # stops at 2668
    ((signal.SIGKILL, signal.SIGSTOP), (770, 3000, 5, 25, None)),
]


@pytest.mark.parametrize("signals,case", FAULT_CASES,
                         ids=["sigkill", "sigstop", "both"])
def test_faults_change_nothing(rc, ref, tmp_path, signals, case):
    n, itmax, blocks, every, maxeps = case
    ref_out, ref_matrix = ref(n, itmax, 1e-8 if maxeps is None else maxeps)
    full_strength(rc)
    master = rc.master_pid
    job = relax_job(tmp_path, n, itmax, blocks, every, maxeps)
    seed = random.randrange(1 << 30)
    killer = Killer(rc, seed, signals)
    killer.start()
    try:
        code, out, err = rc.submit({"name": "relax-faults", "job": job},
                                   timeout=100)
    finally:
        killer.halt.set()
        killer.join(30)
    info = f"(seed {seed}, hits {killer.hits}, errors {killer.errors})"
    assert code == 0, f"{out} {err} {info}"
    assert killer.hits, f"no fault landed during the job {info}"
    res = check_job(rc, out, job, ref_out, ref_matrix, info)
    if signals == (signal.SIGKILL,):
        assert any(r["attempt"] > 1 for r in res), \
            f"no block was run again {info}"
    dead = {e["pid"] for e in rc.events() if e["event"] == "worker_dead"}
    assert wait_until(lambda: {h[0] for h in killer.hits} <=
                      {e["pid"] for e in rc.events()
                       if e["event"] == "worker_dead"}, 10), \
        f"victims not declared dead: {dead} {info}"
    assert pid_alive(master), "the master died"
    full_strength(rc)


def test_job_fails_cleanly(rc, tmp_path):
    """A job whose files vanish under it fails with the reason, leaves
    nothing behind, and the master goes on."""
    full_strength(rc)
    job = relax_job(tmp_path, 1026, 2000, 2, 10)
    path = rc.write_batch({"name": "doomed", "job": job})
    r = rc.cli("submit", "-c", rc.config, path, timeout=30)
    assert r.returncode == 0, r.stderr
    bid = batch_id_of(r.stdout)
    jobs = Path(job["dir"])
    assert wait_until(lambda: list(jobs.iterdir()), 10), "no job dir"
    time.sleep(0.3)
    for d in jobs.iterdir():        # gone at once, whatever runs
        gone = tmp_path / "gone"
        d.rename(gone)
        shutil.rmtree(gone)
    r = rc.cli("wait", "-c", rc.config, bid, timeout=60)
    assert r.returncode == 1, f"{r.stdout} {r.stderr}"
    assert "job failed: block" in r.stderr and "failed:" in r.stderr, \
        r.stderr
    summary = json.loads((rc.state_dir / "batches" / str(bid) /
                          "summary.json").read_text())
    assert "error" in summary and "result" not in summary, summary
    assert not Path(job["output"]).exists()
    assert os.listdir(Path(job["output"]).parent) == []
    assert os.listdir(jobs) == []
    assert pid_alive(rc.master_pid)


# ---- bad jobs ----

def ask(sock_path, obj, timeout=30):
    """One control request (a dict) on its own connection: the answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(sock_path))
        s.settimeout(timeout)
        s.sendall(json.dumps(obj).encode() + b"\n")
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return json.loads(buf.split(b"\n", 1)[0])
    finally:
        s.close()


def bad_cases(work):
    afile = work / "a-file"
    afile.write_text("x")
    return [
        # id, changes to a good job (None: remove the key), key, words
        ("n_small", {"n": 2}, "job.n", "between 3"),
        ("blocks_big", {"blocks": 16}, "job.blocks", "n-2 = 15"),
        ("blocks_zero", {"blocks": 0}, "job.blocks", "between 1"),
        ("itmax_zero", {"itmax": 0}, "job.itmax", "between 1"),
        ("maxeps_negative", {"maxeps": -1e-3}, "job.maxeps", "0 or more"),
        ("every_zero", {"checkpoint_every": 0}, "job.checkpoint_every",
         "between 1"),
        ("unknown_key", {"colour": "red"}, "job.colour", "unknown"),
        ("n_string", {"n": "17"}, "job.n", "integer"),
        ("no_output", {"output": None}, "job", "output"),
        ("relative_dir", {"dir": "jobs"}, "job.dir", "absolute"),
        ("missing_dir", {"dir": str(work / "nowhere")}, "job.dir",
         "no such file"),
        ("dir_is_file", {"dir": str(afile)}, "job.dir", "not a directory"),
        ("unwritable_dir", {"dir": "/sys"}, "job.dir", "not writable"),
        ("output_dir_missing", {"output": str(work / "no" / "o.json")},
         "job.output", "no such file"),
        ("output_unwritable", {"output": "/sys/o.json"}, "job.output",
         "not writable"),
        ("output_is_dir", {"output": str(work)}, "job.output",
         "is a directory"),
        ("matrix_is_output", {"matrix": str(work / "out" / "relax.json")},
         "job.matrix", "output"),
    ]


def test_bad_jobs_refused_master_serves(rc, ref, tmp_path):
    master = rc.master_pid
    before = len(rc.status()["batches"])
    sock = rc.state_dir / "control.sock"
    for cid, change, key, words in bad_cases(tmp_path):
        job = relax_job(tmp_path, 17, 10, 3, 5)
        for k, v in change.items():
            if v is None:
                del job[k]
            else:
                job[k] = v
        batch = {"name": cid, "job": job}
        # The CLI refuses it: exit 2, one line, the key named.
        code, out, err = rc.submit(batch, timeout=30)
        lines = [x for x in err.splitlines() if x.strip()]
        assert code == 2 and out == "", f"{cid}: rc {code} {out} {err}"
        assert len(lines) == 1, f"{cid}: {err!r}"
        assert f" {key}: " in lines[0] and words in lines[0].lower(), \
            f"{cid}: {lines[0]!r}"
        # So does the master, asked directly.
        ans = ask(sock, {"v": 1, "cmd": "submit", "batch": batch})
        assert ans.get("ok") is False, f"{cid}: the master took it: {ans}"
        assert f"{key}: " in ans["error"] and words in ans["error"].lower(), \
            f"{cid}: {ans}"
    assert pid_alive(master)
    assert len(rc.status()["batches"]) == before, "a bad job was queued"
    assert os.listdir(tmp_path / "jobs") == []
    # And it still runs good jobs.
    job = relax_job(tmp_path, 17, 30, 3, 10)
    code, out, err = rc.submit({"name": "good", "job": job}, timeout=60)
    assert code == 0, f"{out} {err}"
    ref_out, ref_matrix = ref(17, 30, 1e-8)
    check_job(rc, out, job, ref_out, ref_matrix)
