"""A cluster that outlives its Slurm allocation, on the Slurm cluster of
network namespaces (slurm_cluster.py), seen from the login host with the
master's socket masked (remote_client.masked); and the same end of a job
on this host alone, as Slurm's linuxproc tracking makes it (SIGTERM to
every process of the job, children first), in every `make integration`.

The time limit of the job that holds the cluster ends it mid-batch:
Slurm sends SIGTERM to every process of the job (the supervisor, mpirun,
the master, the node agents, the slots and the tasks themselves), then
SIGKILL after KillWait.  The tasks then running go back to the queue
unfinished: no failed result line (a task that dies of the signal, one
that traps it and exits 143, one that ignores it), a task_interrupted
event each, nobody blamed.  Between that job and the next, clients are
told the cluster is down (at once: submit exits 1, wait 5); with --reconnect-timeout they
wait, and go on once the next job of the same config (queued behind the
first with --dependency=singleton) is up: the submit is taken once, the
wait answers when the batch ends, and every task of the batch ends
exactly once across the two jobs.
"""
import json
import os
import signal
import subprocess
import time

import pytest

import remote_flow
from conftest import (check_exactly_once, children_map, exec_task, pid_alive,
                      proc_state, wait_until)
from remote_client import masked
from slurm_cluster import slurm_cluster_factory  # noqa: F401

N = 60          # tasks of the batch the time limit cuts
SLOW = 2        # seconds each takes in the first job (quick in the second)


def events(f, name):
    path = f.state / "events.jsonl"
    return [e for e in map(json.loads, path.read_text().splitlines())
            if e["event"] == name]


def explain(f, cut, n=30):
    """What the master wrote of the job's end (a failure's message): CUT,
    the last N events but task_assigned and task_done, the lines and
    events of tasks 0 and 1, the last N lines of master.log."""
    lines = (f.state / "events.jsonl").read_text().splitlines()
    ev = [x for x in lines if '"task_assigned"' not in x and
          '"task_done"' not in x][-n:]
    first = [x for x in lines if '"task":0,' in x or '"task":1,' in x]
    res = [json.dumps(r) for r in results(f, 1) if r["task"] in (0, 1)]
    log = (f.state / "master.log").read_text().splitlines()[-n:]
    return "\n".join([f"interrupted: {sorted(cut)}", *ev, *first, *res,
                      *log])


def results(f, bid):
    path = f.state / "batches" / str(bid) / "results.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines()]


def batch_file(f, name, tasks):
    path = f.dir / f"{name}.json"
    path.write_text(json.dumps({"name": name, "tasks": tasks}) + "\n")
    path.chmod(0o644)
    return path


def cut_tasks(mark, n):
    """N tasks: 0 traps SIGTERM and exits 143 (128 + 15, as a program
    that handles the signal should: also when its child dies of it
    first, as Slurm signals children before their parents), 1 ignores
    it, the others die of it; slow while MARK is missing, quick once it
    is there."""
    quick = 'if [ -e "$1" ]; then echo "$0"; exit 0; fi; '

    def task(body, i):
        return exec_task(quick + body, i, mark)
    return [task('trap "exit 143" TERM; sleep 300 & wait $! || exit $?; '
                 'echo "$0"', 0),
            task('trap "" TERM; sleep 300; echo "$0"', 1),
            *(task(f'sleep {SLOW}; echo "$0"', i) for i in range(2, n))]


def slow_batch(f, mark):
    return batch_file(f, "cut", cut_tasks(mark, N))


def popen_cli(f, *args):
    return subprocess.Popen(masked([f.ftfarm, *args], f.state),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=f.env, start_new_session=True)


def job_info(f, jid):
    return f.sl.cmd(["scontrol", "-o", "show", "job", str(jid)],
                    timeout=10).stdout


def end_first_job(f, j1):
    """Bring the time limit of job J1 forward: Slurm ends it at its next
    check of limits (every 30 s) as it ends any job past its time."""
    r = f.sl.cmd(["scontrol", "update", f"jobid={j1}", "timelimit=0"],
                 timeout=10)
    assert r.returncode == 0, r.stderr
    assert f.sl.wait_job(j1, 90) == "TIMEOUT", job_info(f, j1)


def check_cut(f, j1):
    """What the end of job J1 left: no failed line, the running tasks
    interrupted, nobody blamed, the cluster down with the reason."""
    done = results(f, 1)
    assert 0 < len(done) < N, f"{len(done)} of {N} done: not mid-batch"
    assert all(r["status"] == "ok" for r in done), \
        [r for r in done if r["status"] != "ok"]
    stop = events(f, "master_stopping")
    assert stop and f"Slurm job {j1}" in stop[-1]["reason"], stop
    cut = {e["task"] for e in events(f, "task_interrupted")}
    # (A task whose own child died of the signal first may still end
    # well, and its line count, after the stop named it interrupted.)
    assert {0, 1} <= cut, explain(f, cut)
    assert not events(f, "worker_blamed"), events(f, "worker_blamed")
    assert not events(f, "task_failed"), events(f, "task_failed")
    note = json.loads((f.state / "stopped.json").read_text())
    assert f"Slurm job {j1}" in note["reason"], note
    assert not (f.state / "control.tcp").exists()
    return len(done), len(cut)


def check_down(f, j1, batch2):
    """Clients between the jobs: told at once, exit 1 (wait: 5, the
    cluster is down), nothing taken."""
    for args, then, status in ((["submit", "-c", f.config, batch2],
                                "nothing was submitted", 1),
                               (["wait", "-c", f.config, "1"],
                                "batch 1 goes on when it starts again", 5),
                               (["status", "-c", f.config], "", 1)):
        t0 = time.monotonic()
        r = f.cli(*args, timeout=60)
        took = time.monotonic() - t0
        assert r.returncode == status, (args, r.stdout, r.stderr)
        assert "is down" in r.stderr and f"Slurm job {j1}" in r.stderr \
            and then in r.stderr, r.stderr
        assert took < 10, f"{args[0]} took {took:.1f} s"
    assert not (f.state / "batches" / "2").exists()


@pytest.mark.slurm
@pytest.mark.long
@pytest.mark.timeout(300)
def test_time_limit(slurm_cluster_factory, bins, open_dir):
    """A job's time limit mid-batch, then the next job of the config.
    (A short name: slurmstepd's socket path under the test's directory
    must stay within 108 bytes.)"""
    sl = slurm_cluster_factory(2)
    f = remote_flow.Flow(sl, bins["openmpi"], open_dir, log=lambda s: None)
    name = ["-J", f"farm{f.tag[:6]}"]
    mark = open_dir / "second-job"
    waiter = submitter = None
    try:
        f.sbatch(2, 2, name)
        j1 = f.jid
        r = f.cli("submit", "-c", f.config, slow_batch(f, mark))
        assert r.returncode == 0 and r.stdout.split()[0] == "1", r.stderr
        # The next allocation, queued now behind this one (held, so that
        # the gap between the two can be looked at).
        j2 = f.submit_job(2, 2, [*name, "--dependency=singleton", "--hold"])
        f.jid = j1
        remote_flow.wait_for(lambda: len(results(f, 1)) >= 6, 60,
                             "a few tasks done")
        assert "JobState=PENDING" in job_info(f, j2), job_info(f, j2)
        end_first_job(f, j1)
        ndone, ncut = check_cut(f, j1)

        batch2 = batch_file(f, "later", [
            {"type": "exec", "argv": ["sh", "-c", 'echo "$0"', str(i)]}
            for i in range(10)])
        check_down(f, j1, batch2)
        waiter = popen_cli(f, "wait", "-c", f.config, "1",
                           "--reconnect-timeout", "240")
        submitter = popen_cli(f, "submit", "-c", f.config, batch2,
                              "--reconnect-timeout", "240")
        time.sleep(2)
        assert waiter.poll() is None and submitter.poll() is None

        mark.touch()
        assert sl.cmd(["scontrol", "release", str(j2)],
                      timeout=10).returncode == 0
        f.jid = j2
        f.sbatch(2, 2, submitted=True)
        out, err = submitter.communicate(timeout=120)
        assert submitter.returncode == 0 and out.split()[0] == "2", err
        assert "is down" in err and "waiting up to 240 s" in err, err
        out, err = waiter.communicate(timeout=120)
        assert waiter.returncode == 0, err
        assert f"{N} ok, 0 failed of {N}" in err, err
        problems = check_exactly_once(results(f, 1), N, lambda i: f"{i}\n")
        assert not problems, problems
        r = f.cli("wait", "-c", f.config, "2", timeout=120)
        assert r.returncode == 0, r.stderr
        problems = check_exactly_once(results(f, 2), 10, lambda i: f"{i}\n")
        assert not problems, problems
        assert sorted(p.name for p in (f.state / "batches").iterdir()
                      if p.name.isdigit()) == ["1", "2"]
        assert events(f, "journal_replayed")[-1]["pending"] == N - ndone
        f.stop()
        print(f"job {j1}: {ndone} of {N} done, {ncut} interrupted; "
              f"job {j2}: the rest, and a batch submitted between them")
    finally:
        for proc in (waiter, submitter):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()
        if f.jid and f.job_alive():
            sl.cmd(["scancel", str(f.jid)], timeout=10)
        for pid in remote_flow.tagged(f.tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


# ---- the same end of a job on this host alone ----

def descendants(pid):
    """PID's descendants, deepest first (the order in which Slurm's
    linuxproc tracking signals a job's processes)."""
    children = children_map()
    out = []

    def walk(p):
        for k in children.get(p, []):
            walk(k)
            out.append(k)
    walk(pid)
    return out


def end_job(sup):
    """SIGTERM to the supervisor SUP's whole tree, children first, one
    right after the other, as Slurm's time limit does."""
    for pid in [*descendants(sup), sup]:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def background(c, *args):
    return subprocess.Popen([c.ftfarm, *map(str, args)], env=c.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.timeout(180)
def test_sigterm_to_the_whole_job(make_cluster):
    """SIGTERM to every process of the job, children first: no failed
    line, the tasks cut short interrupted, nobody blamed, the whole job
    gone by itself; clients say the cluster is down, and with
    --reconnect-timeout go on at its next start."""
    c = make_cluster(nodes=2, workers_per_node=2, heartbeat_ms=500)
    c.start()
    mark = c.dir / "second-start"
    n = 24
    rc, out, err = c.submit({"name": "cut", "tasks": cut_tasks(mark, n)},
                            wait=False)
    assert rc == 0, err
    assert wait_until(lambda: len(c.results(1)) >= 4, 60), c.results(1)
    sup = int((c.state_dir / "supervisor.pid").read_text().split()[0])
    tree = descendants(sup)
    end_job(sup)
    # Every process of the job is gone by itself, well within Slurm's
    # KillWait (30 s by default): nothing waits for its SIGKILL.
    assert wait_until(lambda: not any(pid_alive(p) and proc_state(p) != "Z"
                                      for p in [sup, *tree]), 20), \
        [p for p in [sup, *tree] if pid_alive(p)]
    done = c.results(1)
    assert 0 < len(done) < n and all(r["status"] == "ok" for r in done), \
        done
    evs = c.events()
    stop = [e for e in evs if e["event"] == "master_stopping"]
    assert stop and stop[-1]["reason"] == "signal 15", stop
    cut = {e["task"] for e in evs if e["event"] == "task_interrupted"}
    assert {0, 1} <= cut, cut
    assert not [e for e in evs if e["event"] in ("worker_blamed",
                                                 "task_failed")]
    note = json.loads((c.state_dir / "stopped.json").read_text())
    assert note["reason"] == "signal 15", note

    # Down: said at once, nothing taken.
    later = c.write_batch({"name": "later", "tasks": [
        exec_task('echo "$0"', i) for i in range(5)]})
    r = c.cli("submit", "-c", c.config, later, timeout=30)
    assert r.returncode == 1 and "is down (stopped " in r.stderr and \
        "signal 15); nothing was submitted" in r.stderr, r.stderr
    r = c.cli("wait", "-c", c.config, "1", timeout=30)
    assert r.returncode == 5 and "batch 1 goes on when it starts again" \
        in r.stderr, r.stderr
    waiter = background(c, "wait", "-c", c.config, "1",
                        "--reconnect-timeout", "120")
    submitter = background(c, "submit", "-c", c.config, later,
                           "--reconnect-timeout", "120")
    try:
        time.sleep(1)
        assert waiter.poll() is None and submitter.poll() is None
        mark.touch()
        c.start()
        out, err = submitter.communicate(timeout=120)
        assert submitter.returncode == 0 and out.split()[0] == "2", err
        out, err = waiter.communicate(timeout=120)
        assert waiter.returncode == 0 and f"{n} ok, 0 failed" in err, err
    finally:
        for p in (waiter, submitter):
            if p.poll() is None:
                p.kill()
                p.communicate()
    problems = check_exactly_once(c.results(1), n, lambda i: f"{i}\n")
    assert not problems, problems
    assert c.cli("wait", "-c", c.config, "2").returncode == 0
    assert not check_exactly_once(c.results(2), 5, lambda i: f"{i}\n")
    assert not (c.state_dir / "stopped.json").exists()
