"""Static launch: one MPI world, rank 0 the master, ranks 1..3 the node
agents, each starting its node's worker (a local process, not a rank).
No respawn is done; dead workers stay dead and the others finish the
work, every task exactly once.  Killing or stopping a worker touches no
rank, so Debian's MPICH (which ends the job when a rank dies) survives it
as Open MPI does; MPICH cannot spawn, so dynamic launch must be refused at
start."""
import os
import signal
import time

import pytest

from conftest import (LIVE_STATES, assert_no_leftovers,
                      batch_id_of, check_exactly_once, pid_alive, proc_state,
                      tagged_pids, wait_until)

pytestmark = pytest.mark.timeout(150)

N = 300
# A static world cannot replace a worker: one false hang on a loaded
# machine (the 0.15 s ping deadline of a 200 ms heartbeat) and the faults
# below leave nobody to finish the work.
HEARTBEAT_MS = 500


def task(i):
    return {"type": "exec",
            "argv": ["sh", "-c", 'sleep 0.02; printf "s-%s\\n" "$0"', str(i)]}


def expected(i):
    return f"s-{i}\n"


def run_with_faults(c, faults):
    """Submit N tasks; once the batch runs, apply FAULTS [(delay, sig)] to
    distinct live workers.  Returns (rc, batch id, [(slot, pid, sig)])."""
    rc, out, err = c.submit({"name": "static", "tasks": [task(i)
                                                        for i in range(N)]},
                            wait=False)
    assert rc == 0, err
    bid = batch_id_of(out)
    hit = []
    t0 = time.monotonic()
    for delay, sig in faults:
        time.sleep(max(0, t0 + delay - time.monotonic()))
        st = c.status()
        b = [x for x in st["batches"] if x["id"] == bid][0]
        assert b["done"] < N, "the batch ended before the faults; " \
            "make the tasks longer"
        ws = [w for w in st["workers"] if w["state"] in LIVE_STATES and
              w["pid"] not in [h[1] for h in hit]]
        w = ws[0]
        os.kill(w["pid"], sig)
        hit.append((w["id"], w["pid"], sig))
    r = c.cli("wait", "-c", c.config, bid, timeout=120)
    return r.returncode, bid, hit


def check_static_run(c, rc, bid, hit):
    res = c.results(bid)
    problems = check_exactly_once(res, N, expected)
    assert not problems, f"{problems} (faults {hit})"
    assert rc == 0
    evs = c.events()
    assert not [e for e in evs if e["event"] == "worker_respawned"], \
        "a static cluster respawned a worker"
    dead = {e["worker"] for e in evs if e["event"] == "worker_dead"}
    st = c.status()
    for slot, pid, sig in hit:
        assert slot in dead, f"worker {slot} ({sig.name}) not declared dead"
        w = [x for x in st["workers"] if x["id"] == slot][0]
        assert w["state"] == "dead", w
    for w in st["workers"]:
        assert w["respawns"] == 0, w
    hit_slots = {h[0] for h in hit}
    survivors = [w for w in st["workers"] if w["id"] not in hit_slots]
    assert all(w["state"] in LIVE_STATES for w in survivors), st["workers"]
    return st


def test_static_openmpi_kill_and_stop(make_cluster):
    c = make_cluster(launch="static", heartbeat_ms=HEARTBEAT_MS)
    c.start()
    st = c.status()
    assert st["launch"] == "static", st
    assert "Open MPI" in st["mpi"], st["mpi"]
    rc, bid, hit = run_with_faults(c, [(0.8, signal.SIGKILL),
                                       (1.3, signal.SIGSTOP)])
    check_static_run(c, rc, bid, hit)
    # Open MPI: the master may kill, so the stopped rank is killed.
    stopped = [h[1] for h in hit if h[2] == signal.SIGSTOP]
    wait_until(lambda: not any(pid_alive(p) for p in stopped), 3)
    assert not [(p, proc_state(p)) for p in stopped if pid_alive(p)], \
        "the SIGSTOPped rank was not killed"
    t0 = time.monotonic()
    r = c.stop()
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    assert_no_leftovers(c)
    # The master and the surviving worker must finish by themselves; a
    # stop that ends only when `ftfarm stop` terminates the launcher after
    # its 30 s wait is not clean.
    assert took < 20, f"stop took {took:.1f} s: {r.stderr.strip()}"


@pytest.mark.heavy
def test_static_mpich_kill_and_sigstop(make_cluster):
    c = make_cluster(mpi="mpich", launch="static",
                     heartbeat_ms=HEARTBEAT_MS)
    c.start()
    st = c.status()
    assert st["launch"] == "static" and "MPICH" in st["mpi"], st
    rc, bid, hit = run_with_faults(c, [(0.8, signal.SIGKILL),
                                       (1.3, signal.SIGSTOP)])
    check_static_run(c, rc, bid, hit)
    t0 = time.monotonic()
    r = c.stop()
    assert r.returncode == 0, r.stderr
    # A stopped rank that is never continued would hang mpiexec: stop must
    # still end quickly and leave nothing.
    assert time.monotonic() - t0 < 20, \
        f"stop took {time.monotonic() - t0:.1f} s: {r.stderr}"
    assert_no_leftovers(c)


def test_mpich_refuses_dynamic(make_cluster):
    c = make_cluster(mpi="mpich", launch="dynamic", heartbeat_ms=200)
    t0 = time.monotonic()
    r = c.start(check=False, timeout=60)
    took = time.monotonic() - t0
    assert r.returncode != 0, f"dynamic launch under MPICH started: {r}"
    assert took < 30, f"took {took:.1f} s to fail"
    assert "static" in r.stderr, f"error does not point to static: " \
        f"{r.stderr!r}"
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert lines and len(lines) <= 5, r.stderr
    wait_until(lambda: not tagged_pids(c.tag), 5)
    assert not tagged_pids(c.tag), \
        [(p, proc_state(p)) for p in tagged_pids(c.tag)]
    assert_no_leftovers(c)
    assert c.cli("status", "-c", c.config).returncode != 0
