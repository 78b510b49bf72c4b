"""Automatic allocation on the Slurm cluster of network namespaces: a
master on the login host with no node of its own and a queue of 1-node
allocations (max 3, backlog 2, idle 15 s) asks Slurm for nodes while
tasks wait and gives them back when idle; a master killed -9 while they
run finds them again; a queue Slurm refuses is paused with Slurm's words
and resumed once fixed.  (Short test names: slurmstepd's socket path
under the test's directory must stay within 108 bytes.)"""
import json
import os
import signal
import threading
import time

import pytest

from conftest import check_exactly_once, wait_until
from slurm_cluster import slurm_cluster, slurm_cluster_factory  # noqa: F401

LIVE = ("idle", "busy")


def alloc_cluster(make_cluster, sl, base, queue=None, **kw):
    q = {"name": "q1", "nodes": 1, "time_limit_s": 600, "max_nodes": 3,
         "backlog": 2, "idle_s": 15, "slots": 2}
    q.update(queue or {})
    c = make_cluster(nodes=0, base=base, heartbeat_ms=500, network=sl.cidr,
                     control={"listen": "0.0.0.0:0",
                              "munge_socket": str(sl.sockdir /
                                                  "munge.socket.2")},
                     allocations=[q], **kw)
    c.config.chmod(0o644)
    c.env.update(SLURM_CONF=sl.env["SLURM_CONF"])
    return c


def alloc_json(c):
    r = c.cli("alloc", "-c", c.config, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["queues"]


def farm_jobs(sl, c):
    """{job id: state} of the farm's allocations Slurm knows of now."""
    r = sl.cmd(["squeue", "-h", "-o", "%i %T %j"], timeout=10)
    return {f[0]: f[1] for f in (line.split() for line in
                                 r.stdout.splitlines())
            if len(f) == 3 and f[2].endswith(".q1")}


class Watch(threading.Thread):
    """The most allocations of the farm running and pending at once, from
    squeue every 0.2 s."""

    def __init__(self, sl, c):
        super().__init__(daemon=True)
        self.sl, self.c = sl, c
        self.most_running = self.most_pending = 0
        self.ids = set()
        self.stop = False

    def run(self):
        while not self.stop:
            jobs = farm_jobs(self.sl, self.c)
            self.ids |= set(jobs)
            self.most_running = max(self.most_running, sum(
                s in ("RUNNING", "COMPLETING") for s in jobs.values()))
            self.most_pending = max(self.most_pending, sum(
                s == "PENDING" for s in jobs.values()))
            time.sleep(0.2)


def submit(c, n, seconds):
    batch = c.write_batch({"name": "campaign", "tasks": [
        {"type": "exec", "argv": ["sh", "-c", f"sleep {seconds}; echo $0",
                                  str(i)]} for i in range(n)]})
    batch.chmod(0o644)
    rc, out, err = c.submit(batch, wait=False)
    assert rc == 0, err
    return int(out.split()[0])


def events(c, name):
    return [e for e in c.events() if e["event"] == name]


@pytest.mark.long
@pytest.mark.timeout(300)
def test_grow(make_cluster, slurm_cluster_factory, open_dir):
    sl = slurm_cluster_factory(3, slurmd_timeout=60)
    c = alloc_cluster(make_cluster, sl, open_dir)
    c.start()
    q = alloc_json(c)[0]
    assert q["name"] == "q1" and q["state"] == "active", q
    watch = Watch(sl, c)
    watch.start()
    try:
        n = 2000
        bid = submit(c, n, 0.02)
        r = c.cli("wait", "-c", c.config, bid, timeout=240)
        assert r.returncode == 0, (r.stdout, r.stderr, alloc_json(c))
        problems = check_exactly_once(c.results(bid), n, lambda i: f"{i}\n")
        assert not problems, problems
        # Idle: every allocation of the farm gone within idle_s + 10 s.
        t = time.time()
        assert wait_until(lambda: not farm_jobs(sl, c), 15 + 10, 0.5), \
            (farm_jobs(sl, c), alloc_json(c))
    finally:
        watch.stop = True
        watch.join(5)
    assert watch.most_running <= 3 and watch.most_pending <= 2, \
        (watch.most_running, watch.most_pending)
    assert 1 <= len(watch.ids) <= 6, watch.ids
    assert len(events(c, "alloc_submitted")) == len(watch.ids)
    nodes = {n["name"]: n for n in json.loads(
        c.cli("nodes", "-c", c.config, "--json").stdout)["nodes"]}
    assert nodes and all(n["via"] == "tcp" and n["state"] == "left"
                         for n in nodes.values()), nodes
    assert time.time() - t < 30


@pytest.mark.long
@pytest.mark.timeout(300)
def test_restart(make_cluster, slurm_cluster_factory, open_dir):
    sl = slurm_cluster_factory(3, slurmd_timeout=60)
    c = alloc_cluster(make_cluster, sl, open_dir,
                      queue={"backlog": 3, "idle_s": 60})
    c.start()
    n = 600
    bid = submit(c, n, 0.1)
    # Three allocations running, their agents joined.
    assert wait_until(lambda: sum(w["state"] in LIVE for w in
                                  c.status()["workers"]) == 6, 120), \
        alloc_json(c)
    before = {a["id"] for a in alloc_json(c)[0]["allocations"]}
    assert len(before) == 3, before
    old = c._read_pid("master.pid")
    os.kill(old, signal.SIGKILL)
    assert wait_until(lambda: c._read_pid("master.pid") not in (None, old)
                      and c.cli("status", "-c", c.config,
                                timeout=30).returncode == 0, 60, 0.1)
    r = c.cli("wait", "-c", c.config, bid, "--reconnect-timeout", "60",
              timeout=240)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert not check_exactly_once(c.results(bid), n, lambda i: f"{i}\n")
    # The next master followed the same three: nothing submitted again.
    after = {a["id"] for a in alloc_json(c)[0]["allocations"]}
    if after != before:
        import shutil
        shutil.copy(c.state_dir / "master.log", "/tmp/alloc-restart.log")
    assert after == before, (before, after)
    assert len(events(c, "alloc_submitted")) == 3
    q = alloc_json(c)[0]
    assert q["submissions"] == 3, q


@pytest.mark.timeout(300)
def test_paused(make_cluster, slurm_cluster_factory, open_dir):
    sl = slurm_cluster_factory(2, slurmd_timeout=60)
    c = alloc_cluster(make_cluster, sl, open_dir,
                      queue={"sbatch": ["--partition=later"]})
    c.start()
    # The dry run at the start: paused with Slurm's own words.
    assert wait_until(lambda: alloc_json(c)[0]["state"] == "paused", 30)
    q = alloc_json(c)[0]
    assert "invalid partition" in q["reason"].lower() or \
        "later" in q["reason"], q
    n = 20
    bid = submit(c, n, 0.05)
    time.sleep(3)
    assert not farm_jobs(sl, c) and alloc_json(c)[0]["submissions"] == 0
    # Fixed: the partition is there now.
    r = sl.cmd(["scontrol", "create", "PartitionName=later",
                f"Nodes={','.join(sl.nodes)}", "State=UP"])
    assert r.returncode == 0, r.stderr
    r = c.cli("alloc", "resume", "-c", c.config, "q1")
    assert r.returncode == 0, r.stderr
    r = c.cli("wait", "-c", c.config, bid, timeout=180)
    assert r.returncode == 0, (r.stderr, alloc_json(c))
    assert not check_exactly_once(c.results(bid), n, lambda i: f"{i}\n")
    q = alloc_json(c)[0]
    assert q["state"] == "active" and q["submissions"] >= 1, q
    # Paused by hand: nothing more is asked for.
    assert c.cli("alloc", "pause", "-c", c.config, "q1").returncode == 0
    assert alloc_json(c)[0]["state"] == "paused"
    r = c.cli("alloc", "resume", "-c", c.config, "nosuch")
    assert r.returncode != 0 and "nosuch" in r.stderr


@pytest.mark.long
@pytest.mark.timeout(600)
def test_limit(make_cluster, slurm_cluster_factory, open_dir):
    """An allocation's time limit (a minute, Slurm's least) mid-batch: its
    tasks go back, interrupted, not failed, and a new allocation is
    asked for what is left."""
    sl = slurm_cluster_factory(2, slurmd_timeout=60)
    c = alloc_cluster(make_cluster, sl, open_dir,
                      queue={"time_limit_s": 60, "max_nodes": 1,
                             "backlog": 1, "idle_s": 30})
    c.start()
    n = 400
    bid = submit(c, n, 0.5)
    r = c.cli("wait", "-c", c.config, bid, timeout=500)
    assert r.returncode == 0, (r.stdout, r.stderr, alloc_json(c))
    res = c.results(bid)
    assert not check_exactly_once(res, n, lambda i: f"{i}\n")
    assert all(x["status"] == "ok" for x in res)
    ended = events(c, "alloc_ended")
    assert ended and len(events(c, "alloc_submitted")) >= 2, \
        (ended, alloc_json(c))
    assert events(c, "task_interrupted"), "no task given back at the limit"


@pytest.mark.long
@pytest.mark.timeout(400)
def test_time(make_cluster, slurm_cluster_factory, open_dir):
    """A task asking more time than the running allocation has left waits
    for a new allocation, asked for it, and runs there whole: never
    killed by a time limit."""
    sl = slurm_cluster_factory(2, slurmd_timeout=60)
    c = alloc_cluster(make_cluster, sl, open_dir,
                      queue={"time_limit_s": 60, "max_nodes": 2,
                             "backlog": 1, "idle_s": 60})
    c.start()
    first = submit(c, 1, 0.1)
    assert c.cli("wait", "-c", c.config, first,
                 timeout=120).returncode == 0

    def nodes():
        return json.loads(c.cli("nodes", "-c", c.config,
                                "--json").stdout)["nodes"]
    # The first allocation's node has less than 40 s left.
    assert wait_until(lambda: [n for n in nodes() if n["state"] == "up" and
                               (n["time_left"] or 1e9) < 40], 60, 0.5), \
        nodes()
    old = {n["name"] for n in nodes()}
    batch = c.write_batch({"name": "long", "tasks": [
        {"type": "exec", "argv": ["sh", "-c", "sleep 30; echo done"],
         "time_request": 40}]})
    batch.chmod(0o644)
    rc, out, err = c.submit(batch, wait=False)
    assert rc == 0, err
    bid = int(out.split()[0])
    r = c.cli("wait", "-c", c.config, bid, timeout=240)
    assert r.returncode == 0, (r.stdout, r.stderr, alloc_json(c))
    res = c.results(bid)
    assert [(x["status"], x["stdout"]) for x in res] == [("ok", "done\n")]
    wnode = {w["id"]: w["node"] for w in c.status()["workers"]}
    assert wnode[res[0]["worker"]] not in old, (res, old)
    assert len(events(c, "alloc_submitted")) >= 2
    assert not [e for e in events(c, "task_interrupted") +
                events(c, "task_reassigned") if e.get("batch") == bid]
