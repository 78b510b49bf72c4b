"""The supervisor, its standby, and what survives a master's death.

`ftfarm start` leaves a supervisor that restarts a dead or hung job under
a new epoch of the state dir's lease; `ftfarm start --standby` takes over
when the supervisor is gone; `wait` and `submit --wait` ride over a
restart; a worker whose master went silent leaves and takes its task with
it.  Every job carries FTFARM_STATE_DIR and FTFARM_EPOCH in the
environment of each of its processes: that is how the tests (and the
supervisor) find what is left of a job."""
import os
import random
import shutil
import signal
import subprocess
import time

import pytest

from conftest import (assert_no_leftovers, batch_id_of, check_exactly_once,
                      exec_task, pid_alive, proc_cmdline, proc_environ,
                      all_pids, tagged_pids, wait_until)

pytestmark = pytest.mark.timeout(150)

# Small and quick: 2 workers, a short lease, short backoffs.
FAST = dict(nodes=2, heartbeat_ms=200, lease_ms=1000, master_silence_ms=3000,
            restart_backoff_ms=200, restart_backoff_max_ms=1000,
            task_events=False)
MARGIN = 10.0       # seconds on top of a bound, for a loaded machine


# ---- the lease and the jobs' processes ----

def read_lease(c):
    """The lease record as a dict: epoch, seq (ints), state, sup and
    master ((host, pid) or None)."""
    try:
        text = (c.state_dir / "lease").read_text()
    except OSError:
        return None
    out = {}
    for word in text.split():
        if "=" not in word:
            continue
        k, v = word.split("=", 1)
        if k in ("epoch", "seq"):
            out[k] = int(v)
        elif k in ("sup", "master"):
            host, pid, _ = v.split("/")
            out[k] = (host, int(pid)) if int(pid) > 0 else None
        else:
            out[k] = v
    return out


def read_pid(c, name):
    try:
        return int((c.state_dir / name).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def job_pids(c):
    """{pid: epoch} of the live processes of C's jobs on this host."""
    want = f"FTFARM_STATE_DIR={os.path.realpath(c.state_dir)}".encode()
    out = {}
    for p in all_pids():
        env = proc_environ(p)
        if want not in env or not pid_alive(p):
            continue
        for e in env:
            if e.startswith(b"FTFARM_EPOCH="):
                out[p] = int(e.split(b"=", 1)[1])
    return out


def live_master(c, after_epoch=0, timeout=60):
    """Wait until a master of an epoch > AFTER_EPOCH is in the lease and
    answers status; (epoch, master pid)."""
    def up():
        le = read_lease(c)
        if not le or le.get("state") != "active" or \
                le["epoch"] <= after_epoch or not le.get("master"):
            return None
        r = c.cli("status", "-c", c.config, "--json", timeout=30)
        return (le["epoch"], le["master"][1]) if r.returncode == 0 else None
    got = wait_until(up, timeout, interval=0.1)
    assert got, f"no master after epoch {after_epoch}: lease " \
        f"{read_lease(c)}\n{supervisor_log(c)}"
    return got


def start_sleepers(c):
    """Submit two tasks that sleep for ten minutes; wait until they run."""
    rc, out, err = c.submit({"tasks": [exec_task("sleep 600"),
                                       exec_task("sleep 600")]}, wait=False)
    assert rc == 0, err

    def sleepers():
        return [p for p in tagged_pids(c.tag) if "sleep 600" in
                proc_cmdline(p)]
    assert wait_until(sleepers, 20), "the tasks never started"


def gone_within(c, bound):
    """Wait up to BOUND s for every process of C to be gone; those left."""
    wait_until(lambda: not tagged_pids(c.tag), bound)
    return [(p, proc_cmdline(p)) for p in tagged_pids(c.tag)]


def supervisor_log(c):
    try:
        return (c.state_dir / "supervisor.log").read_text()
    except OSError:
        return ""


def popen_cli(c, *args):
    return subprocess.Popen([c.ftfarm, *map(str, args)], env=c.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def kill(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


# ---- restarts ----

N_KILL = 2000


@pytest.mark.heavy
@pytest.mark.parametrize("launch", ["dynamic", pytest.param("static", marks=pytest.mark.long)])
def test_master_killed_three_times(make_cluster, launch):
    # Pings at the default pace: a static world cannot respawn a worker
    # that missed a 150 ms deadline on a loaded machine, and detection is
    # not what this test is about.
    c = make_cluster(launch=launch, **dict(FAST, heartbeat_ms=1000))
    c.start()
    tasks = [{"type": "exec", "argv": ["echo", str(i)]} for i in range(N_KILL)]
    sub = popen_cli(c, "submit", "-c", c.config,
                    c.write_batch({"name": "kills", "tasks": tasks}), "--wait")
    epoch, master = live_master(c)
    rng = random.Random(os.getpid())
    for k in range(3):
        time.sleep(rng.uniform(0.2, 1.0))
        kill(master)
        epoch, master = live_master(c, after_epoch=epoch)
        # The new job runs alone: nothing of an earlier epoch survives.
        old = {p: e for p, e in job_pids(c).items() if e < epoch}
        assert not old, f"processes of earlier epochs after restart " \
            f"{k + 1}: {[(p, e, proc_cmdline(p)) for p, e in old.items()]}"
    out, err = sub.communicate(timeout=120)
    bid = batch_id_of(out)
    problems = check_exactly_once(c.results(bid), N_KILL,
                                  lambda i: f"{i}\n")
    assert not problems, f"{problems}\n{err}"
    assert sub.returncode == 0, err
    log = supervisor_log(c)
    assert log.count("master killed by signal 9") + \
        log.count("master died") >= 3, log
    assert "restart 3" in log, log
    r = c.stop()
    assert r.returncode == 0, r.stderr
    assert_no_leftovers(c)


def test_hung_master_replaced(make_cluster):
    """A master that stops renewing the lease while its process lives
    (SIGSTOP) is killed and replaced after lease_ms."""
    c = make_cluster(**FAST)
    c.start()
    epoch, master = live_master(c)
    t0 = time.monotonic()
    kill(master, signal.SIGSTOP)
    epoch2, master2 = live_master(c, after_epoch=epoch)
    took = time.monotonic() - t0
    log = supervisor_log(c)
    assert "master hung: no lease renewal for" in log, log
    assert not pid_alive(master)
    assert took < FAST["lease_ms"] / 1000 + 60 + MARGIN, took


def test_supervisor_and_master_killed(make_cluster):
    """With nobody to restart them, the workers leave within the master
    silence bound and take their tasks with them; mpirun follows."""
    c = make_cluster(**FAST)
    c.start()
    start_sleepers(c)
    sup = read_pid(c, "supervisor.pid")
    master = read_lease(c)["master"][1]
    t0 = time.monotonic()
    kill(sup)
    kill(master)
    bound = FAST["master_silence_ms"] / 1000 + MARGIN
    left = gone_within(c, bound)
    assert not left, f"left {time.monotonic() - t0:.1f} s after the kill: " \
        f"{left}"


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_state_dir_gone_ends_the_job(make_cluster, how):
    """A state dir removed (or replaced by another directory) under a
    running cluster takes its control socket and lease along: nobody can
    reach or stop the job.  The supervisor kills it, tasks included, and
    exits; a standby leaves."""
    c = make_cluster(**FAST)
    c.start()
    r = c.cli("start", "--standby", "-c", c.config)
    assert r.returncode == 0, r.stderr
    start_sleepers(c)
    sup = read_pid(c, "supervisor.pid")
    standby = read_pid(c, f"standby.{os.uname().nodename}.pid")
    assert sup and pid_alive(sup) and standby and pid_alive(standby)
    t0 = time.monotonic()
    shutil.rmtree(c.state_dir)
    if how == "replaced":
        c.state_dir.mkdir()
    left = gone_within(c, 1.0 + MARGIN)
    assert not left, f"left {time.monotonic() - t0:.1f} s after the " \
        f"state dir was {how}: {left}"


# ---- the standby ----

N_STANDBY = 300


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_standby_takes_over(make_cluster, how):
    c = make_cluster(**dict(FAST, lease_ms=2000))
    c.start()
    r = c.cli("start", "--standby", "-c", c.config)
    assert r.returncode == 0, r.stderr
    assert "standby for cluster" in r.stdout, r.stdout
    epoch, master = live_master(c)
    sup = read_pid(c, "supervisor.pid")
    standby = read_pid(c, f"standby.{os.uname().nodename}.pid")
    assert standby and pid_alive(standby)
    rc, out, err = c.submit({"name": "sb", "tasks": [
        exec_task('sleep 0.02; echo "$0"', i) for i in range(N_STANDBY)]},
        wait=False)
    assert rc == 0, err
    bid = batch_id_of(out)
    # A client waiting with a reconnect timeout keeps its promise across
    # the takeover: the lease names the replaced supervisor for a while.
    waiter = popen_cli(c, "wait", "-c", c.config, bid,
                       "--reconnect-timeout", "90")
    time.sleep(1)
    sig = signal.SIGKILL if how == "kill" else signal.SIGSTOP
    t0 = time.monotonic()
    kill(sup, sig)
    kill(master, sig)
    new_epoch, new_master = live_master(c, after_epoch=epoch)
    took = time.monotonic() - t0
    bound = 2.0 + 60 + MARGIN        # lease + start_timeout_s + margin
    assert took < bound, f"takeover took {took:.1f} s"
    assert read_pid(c, "supervisor.pid") == standby
    assert read_lease(c)["sup"][1] == standby
    if how == "stop":
        # Hold the new master still while the old pair resumes: nothing
        # may be written meanwhile (the old ones were fenced: killed).
        res = c.state_dir / "batches" / str(bid) / "results.jsonl"
        evs = c.state_dir / "events.jsonl"
        kill(new_master, signal.SIGSTOP)
        try:
            before = (res.read_bytes() if res.exists() else b"",
                      evs.read_bytes())
            kill(sup, signal.SIGCONT)
            kill(master, signal.SIGCONT)
            time.sleep(1)
            after = (res.read_bytes() if res.exists() else b"",
                     evs.read_bytes())
        finally:
            kill(new_master, signal.SIGCONT)
        assert before == after, "the old master wrote after the takeover"
    assert wait_until(lambda: not pid_alive(sup) and not pid_alive(master),
                      10), "the old supervisor or master lives on"
    r = c.cli("wait", "-c", c.config, bid, timeout=120)
    problems = check_exactly_once(c.results(bid), N_STANDBY,
                                  lambda i: f"{i}\n")
    assert not problems, f"{problems}\n{r.stderr}"
    assert r.returncode == 0, r.stderr
    out, err = waiter.communicate(timeout=120)
    assert waiter.returncode == 0, err


def test_stop_start_twice_standby(make_cluster):
    c = make_cluster(**FAST)
    c.start()
    epoch, master = live_master(c)
    sup = read_pid(c, "supervisor.pid")
    r = c.cli("start", "-c", c.config)
    assert r.returncode == 1
    assert f"is already running (supervisor pid {sup} on " in r.stderr and \
        f"master pid {master}); `ftfarm start --standby` waits to take " \
        f"over" in r.stderr, r.stderr
    r = c.cli("start", "--standby", "-c", c.config)
    assert r.returncode == 0, r.stderr
    standby = read_pid(c, f"standby.{os.uname().nodename}.pid")
    r = c.cli("start", "--standby", "-c", c.config)
    assert r.returncode == 1 and "already waits" in r.stderr, r.stderr

    r = c.stop()
    assert r.returncode == 0, r.stderr
    assert not pid_alive(sup) and not pid_alive(standby)
    assert read_lease(c)["state"] == "free"
    assert not (c.state_dir / "supervisor.pid").exists()
    assert_no_leftovers(c)
    r = c.cli("start", "--standby", "-c", c.config)
    assert r.returncode == 1 and "not running" in r.stderr, r.stderr

    c.start()
    e2, _ = live_master(c)
    assert e2 > epoch
    r = c.stop()
    assert r.returncode == 0, r.stderr
    assert_no_leftovers(c)


# ---- clients ----

def test_wait_across_master_kill(make_cluster):
    c = make_cluster(**FAST)
    c.start()
    epoch, master = live_master(c)
    n = 60
    rc, out, err = c.submit({"tasks": [exec_task('sleep 0.05; echo "$0"', i)
                                       for i in range(n)]}, wait=False)
    bid = batch_id_of(out)
    w = popen_cli(c, "wait", "-c", c.config, bid)
    time.sleep(0.5)
    kill(master)
    out, err = w.communicate(timeout=120)
    assert f"master restarting; waiting for it (batch {bid})" in err, err
    problems = check_exactly_once(c.results(bid), n, lambda i: f"{i}\n")
    assert not problems, f"{problems}\n{err}"
    assert w.returncode == 0, err

    # With the supervisor gone too, nobody will answer: a clear failure,
    # at once, with the status of a cluster that is down (5).
    epoch, master = live_master(c, after_epoch=0)
    rc, out, err = c.submit({"tasks": [exec_task("sleep 600")]}, wait=False)
    bid = batch_id_of(out)
    w = popen_cli(c, "wait", "-c", c.config, bid)
    time.sleep(0.5)
    t0 = time.monotonic()
    kill(read_pid(c, "supervisor.pid"))
    kill(master)
    out, err = w.communicate(timeout=60)
    took = time.monotonic() - t0
    assert w.returncode == 5, err
    assert f"the master stopped before batch {bid} finished; its results " \
        f"so far are in {c.state_dir}/batches/{bid}" in err, err
    assert took < MARGIN, f"wait took {took:.1f} s to give up"


# ---- workers ----

def test_worker_leaves_a_silent_master(make_cluster):
    """A master stopped with nobody to replace it: its workers leave
    within master_silence_ms and kill their running task."""
    c = make_cluster(**FAST)
    c.start()
    epoch, master = live_master(c)
    workers = c.worker_pids()
    rc, out, err = c.submit({"tasks": [exec_task("sleep 600")]}, wait=False)
    assert rc == 0, err

    def sleepers():
        return [p for p in tagged_pids(c.tag) if "sleep 600" in
                proc_cmdline(p)]
    assert wait_until(sleepers, 20), "the task never started"
    kill(read_pid(c, "supervisor.pid"))
    t0 = time.monotonic()
    kill(master, signal.SIGSTOP)
    bound = FAST["master_silence_ms"] / 1000 + MARGIN
    gone = wait_until(lambda: not sleepers() and
                      not any(pid_alive(p) for p in workers), bound)
    assert gone, f"after {time.monotonic() - t0:.1f} s: workers " \
        f"{[p for p in workers if pid_alive(p)]}, tasks {sleepers()}"
    kill(master, signal.SIGCONT)
