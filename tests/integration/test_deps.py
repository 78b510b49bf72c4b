"""Batches after batches and tasks after tasks, on real clusters: a batch
after a running one waits, then runs; after a failed one it never runs
(cancelled, each task's reason names the batch); --after-any runs
anyway; a waiting batch survives a master killed and runs once; a fan-in
sees every file the tasks before it wrote; a task after a failed task
fails without running, and so do the tasks after it; cycles and bad
indexes are refused at submit; a chain survives a master killed."""
import json
import os
import signal
import time

import pytest

from conftest import batch_id_of, check_exactly_once, exec_task, wait_until


def row(c, bid):
    r = c.cli("batch", "-c", c.config, bid, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def submit(c, *args):
    r = c.cli("submit", "-c", c.config, *args)
    assert r.returncode == 0, (r.returncode, r.stderr)
    return batch_id_of(r.stdout)


def kill_master(c):
    pid = int((c.state_dir / "master.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    return pid


@pytest.mark.timeout(240)
def test_after_a_running_batch_waits_then_runs(cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    first = submit(cluster, "--array", "1-6", "--", "sh", "-c",
                   f"sleep 1; echo {{}} > {out}/{{}}")
    second = submit(cluster, "--after", str(first), "--", "sh", "-c",
                    f"ls {out} | sort -n | tr '\\n' ' '")
    r = row(cluster, second)
    assert r["state"] == "waiting" and r["after"] == [first], r
    assert r["total"] == 1 and r["done"] == 0
    assert cluster.cli("wait", "-c", cluster.config, second).returncode == 0
    res = cluster.results(second)
    assert [x["stdout"] for x in res] == ["1 2 3 4 5 6 "]
    assert row(cluster, second)["state"] == "finished"


@pytest.mark.timeout(240)
def test_after_a_failed_batch_never_runs(cluster, tmp_path):
    marker = tmp_path / "ran"
    bad = submit(cluster, "--array", "1-3", "--", "sh", "-c",
                 "sleep 0.5; test {} != 2")
    never = submit(cluster, "--after", str(bad), "--array", "1-4", "--",
                   "sh", "-c", f"touch {marker}.{{}}")
    anyway = submit(cluster, "--after-any", str(bad), "--", "echo", "anyway")
    assert cluster.cli("wait", "-c", cluster.config, never).returncode == 1
    r = row(cluster, never)
    assert r["state"] == "cancelled" and r["total"] == 4 and r["failed"] == 4
    assert r["error"] == f"batch {bad}, which it runs after, failed", r
    out = cluster.cli("batch", "-c", cluster.config, never).stdout
    assert f"batch {bad}, which it runs after, failed" in out, out
    res = cluster.results(never)
    assert sorted(x["task"] for x in res) == [0, 1, 2, 3]
    for x in res:
        assert x["status"] == "failed" and x["attempt"] == 0
        assert x["reason"] == f"batch {bad}, which it runs after, failed"
    assert not list(tmp_path.glob("ran.*")), "a task of it ran"
    assert cluster.cli("wait", "-c", cluster.config, anyway).returncode == 0
    assert cluster.results(anyway)[0]["stdout"] == "anyway\n"


@pytest.mark.timeout(240)
def test_bad_dependencies_are_refused_at_submit(cluster):
    r = cluster.cli("submit", "-c", cluster.config, "--after", "99", "--",
                    "true")
    assert r.returncode == 2 and "no batch 99" in r.stderr, r.stderr
    cyc = cluster.write_batch({"name": "cyc", "tasks": [
        {"type": "sleep", "seconds": 0},
        {"type": "sleep", "seconds": 0, "after": [2]},
        {"type": "sleep", "seconds": 0, "after": [0, 1]}]})
    r = cluster.cli("submit", "-c", cluster.config, cyc)
    assert r.returncode == 2, r
    assert "tasks[1].after: cycle: 1 -> 2 -> 1" in r.stderr, r.stderr
    r = cluster.cli("check", "-c", cluster.config, cyc)
    assert r.returncode == 2 and "cycle" in r.stderr
    far = cluster.write_batch({"name": "far", "tasks": [
        {"type": "sleep", "seconds": 0, "after": [1]}]})
    r = cluster.cli("submit", "-c", cluster.config, far)
    assert r.returncode == 2 and "no task 1 in this batch of 1" in r.stderr
    r = cluster.cli("submit", "-c", cluster.config, "--after", "0,x", "--",
                    "true")
    assert r.returncode == 2
    st = cluster.status()
    assert st["batches"] == [], "a refused batch was queued"


@pytest.mark.timeout(300)
def test_fan_in_sees_every_file_and_a_failure_stops_its_followers(
        cluster, tmp_path):
    d = tmp_path / "parts"
    d.mkdir()
    n = 40
    tasks = [exec_task(f"sleep 0.0$0; echo part $0 > {d}/$0", i)
             for i in range(n)]
    tasks.append(exec_task(f"cat {d}/* | sort -k2 -n | md5sum",
                           after=list(range(n))))
    # A second fan-in after one task that fails, and a chain after it.
    tasks.append(exec_task("exit 7"))
    tasks.append(exec_task("echo never", after=[n + 1, 0]))
    tasks.append(exec_task("echo never", after=[n + 2]))
    tasks.append(exec_task("echo after-ok", after=[n]))
    rc, out, err = cluster.submit({"name": "fan", "tasks": tasks})
    assert rc == 1, err
    bid = batch_id_of(out)
    res = {x["task"]: x for x in cluster.results(bid)}
    assert sorted(res) == list(range(n + 5))
    want = "".join(f"part {i}\n" for i in range(n))
    import hashlib
    assert res[n]["stdout"] == hashlib.md5(want.encode()).hexdigest() + \
        "  -\n"
    assert res[n + 1]["status"] == "failed" and res[n + 1]["exit"] == 7
    for k, blame in ((n + 2, n + 1), (n + 3, n + 2)):
        assert res[k]["status"] == "failed" and res[k]["attempt"] == 0
        assert res[k]["reason"] == f"after task {blame}, which failed"
        assert res[k]["stdout"] == ""
    assert res[n + 4]["stdout"] == "after-ok\n"


@pytest.mark.timeout(300)
@pytest.mark.cluster_opts(heartbeat_ms=500, lease_ms=2000)
def test_a_waiting_batch_survives_the_master_killed(cluster, tmp_path):
    runs = tmp_path / "runs"
    first = submit(cluster, "--", "sh", "-c", "sleep 3")
    second = submit(cluster, "--after", str(first), "--array", "1-5", "--",
                    "sh", "-c", f"echo {{}} >> {runs}; echo {{}}")
    assert row(cluster, second)["state"] == "waiting"
    old = kill_master(cluster)
    assert wait_until(lambda: cluster.cli(
        "batch", "-c", cluster.config, second).returncode == 0, 60)
    assert row(cluster, second)["state"] in ("waiting", "running",
                                             "finished")
    assert cluster.cli("wait", "-c", cluster.config, second).returncode == 0
    problems = check_exactly_once(cluster.results(second), 5,
                                  lambda i: f"{i + 1}\n")
    assert not problems, problems
    assert sorted(runs.read_text().split()) == ["1", "2", "3", "4", "5"]
    assert int((cluster.state_dir / "master.pid").read_text().split()[0]) \
        != old


@pytest.mark.timeout(300)
@pytest.mark.cluster_opts(heartbeat_ms=500, lease_ms=2000)
def test_a_chain_survives_the_master_killed(cluster, tmp_path):
    log = tmp_path / "order"
    n = 30
    tasks = [exec_task(f"sleep 0.1; echo $0 >> {log}; echo $0", i,
                       **({"after": [i - 1]} if i else {}))
             for i in range(n)]
    path = cluster.write_batch({"name": "chain", "tasks": tasks})
    bid = submit(cluster, path)
    assert wait_until(lambda: log.exists() and
                      len(log.read_text().split()) >= 8, 60)
    kill_master(cluster)
    time.sleep(1)
    assert cluster.cli("wait", "-c", cluster.config, bid,
                       timeout=200).returncode == 0
    problems = check_exactly_once(cluster.results(bid), n,
                                  lambda i: f"{i}\n")
    assert not problems, problems
    order = [int(x) for x in log.read_text().split()]
    # In order; a task cut by the kill may have run twice, never out of
    # turn (its line in results.jsonl is one).
    assert sorted(set(order)) == list(range(n))
    assert all(a <= b for a, b in zip(order, order[1:])), order
