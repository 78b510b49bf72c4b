"""Nodes that join from a Slurm allocation, on the Slurm cluster of
network namespaces (slurm_cluster.py): a master on the login host (the
root namespace) with no node of its own; an allocation of 3 nodes runs
`srun ftfarm join`.  A batch of 600 tasks goes through an agent
SIGKILLed, another SIGSTOPped for 8 s, a third host cut off for 15 s and
the master killed -9: every task exactly once.  A join as another user
from a node: refused.  A master in one allocation (its MPI node) and
nodes joined from another: a batch spread over both.

Not marked `slurm`: no mpirun runs inside an allocation here, so these
run beside the other tests (pytest-xdist).  (Short test names:
slurmstepd's socket path under the test's directory must stay within 108
bytes, or srun fails without a word.)"""
import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import check_exactly_once, wait_until
from netns_hosts import sh
from remote_client import open_bins, run_masked
from slurm_cluster import slurm_cluster, slurm_cluster_factory  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
LIVE = ("idle", "busy")


def login_cluster(make_cluster, sl, base, nodes=0, **kw):
    """A cluster config for the login host: NODES of its own ("slurm":
    those of its allocation), control over TCP on the Slurm network with
    the Slurm cluster's munged."""
    c = make_cluster(nodes=0, base=base, heartbeat_ms=500,
                     network=sl.cidr, start_timeout_s=60,
                     control={"listen": "0.0.0.0:0",
                              "munge_socket": str(sl.sockdir /
                                                  "munge.socket.2")},
                     **kw)
    if nodes == "slurm":
        c.cfg["nodes"] = "slurm"
        c.cfg["mpirun_args"] = ["-x", "FTFARM_TEST_TAG", "--mca",
                                "orte_tmpdir_base", str(c.dir / "sess")]
        c.config.write_text(json.dumps(c.cfg, indent=2) + "\n")
    c.config.chmod(0o644)
    sl.env.update(FTFARM=c.ftfarm, FTFARM_TEST_TAG=c.tag)
    return c


def join_job(c, sl, nodes, extra=()):
    """sbatch -N NODES a job whose one task per node is `ftfarm join`
    (2 slots each); its id."""
    return sl.sbatch(f"#!/bin/sh\nexec srun --kill-on-bad-exit=0 "
                     f"{c.ftfarm} join -c {c.config} --slots 2\n",
                     [f"-N{nodes}", "--ntasks-per-node=1", "--no-kill",
                      *extra])


def nodes_json(c):
    r = c.cli("nodes", "-c", c.config, "--json")
    assert r.returncode == 0, r.stderr
    return {n["name"]: n for n in json.loads(r.stdout)["nodes"]}


def up_on(c, names):
    st = c.status()
    return all(sum(w["node"] == n and w["state"] in LIVE
                   for w in st["workers"]) == 2 for n in names)


def agent_dead_since(c, node, t):
    return [e for e in c.events() if e["event"] == "agent_dead" and
            e["node"] == node and e["ts"] >= t]


def wait_done(c, bid, k, timeout):
    res = c.state_dir / "batches" / str(bid) / "results.jsonl"
    assert wait_until(lambda: res.exists() and
                      len(res.read_text().splitlines()) >= k, timeout), k


def restart_master(c):
    old = c._read_pid("master.pid")
    os.kill(old, signal.SIGKILL)
    assert wait_until(lambda: c._read_pid("master.pid") not in (None, old)
                      and c.cli("status", "-c", c.config,
                                timeout=30).returncode == 0, 60, 0.1)


@pytest.mark.heavy
@pytest.mark.timeout(300)
def test_faults(
        make_cluster, slurm_cluster_factory, open_dir):
    sl = slurm_cluster_factory(3, slurmd_timeout=60)
    c = login_cluster(make_cluster, sl, open_dir)
    c.start()
    jid = join_job(c, sl, 3)
    assert wait_until(lambda: up_on(c, sl.nodes), 60), \
        (nodes_json(c), sl.job_output(jid))
    rows = nodes_json(c)
    for h in sl.nodes:
        assert rows[h]["via"] == "tcp" and rows[h]["allocation"] == \
            str(jid), rows[h]
        assert rows[h]["time_left"] is None or rows[h]["time_left"] > 0

    # Another user on a node: refused, nothing changes.
    r = sh(["ip", "netns", "exec", sl.nodes[0], "setpriv",
            "--reuid=nobody", "--regid=nogroup", "--clear-groups",
            open_bins(c.ftfarm, c.dir / "bin"), "join", "-c", c.config,
            "--name", "intruder",
            "--reconnect-timeout", "5"], check=False, timeout=60,
           env=c.env)
    assert r.returncode == 2 and "may not join" in r.stderr, r.stderr
    assert "intruder" not in nodes_json(c)

    n = 600
    batch = c.write_batch({"name": "faults", "tasks": [
        {"type": "exec", "argv": ["sh", "-c", "sleep 0.1; echo $0", str(i)]}
        for i in range(n)]})
    batch.chmod(0o644)
    rc, out, err = c.submit(batch, wait=False)
    assert rc == 0, err
    bid = int(out.split()[0])
    killed, stopped, cut = sl.nodes

    wait_done(c, bid, 60, 60)
    t = time.time()
    os.kill(rows[killed]["agent_pid"], signal.SIGKILL)
    d = wait_until(lambda: agent_dead_since(c, killed, t - 1), 5, 0.02)
    assert d and d[0]["ts"] - t < 1.0, d

    wait_done(c, bid, 150, 60)
    pid = nodes_json(c)[stopped]["agent_pid"]
    t = time.time()
    os.kill(pid, signal.SIGSTOP)
    try:
        d = wait_until(lambda: agent_dead_since(c, stopped, t - 1), 5, 0.05)
        assert d and d[0]["ts"] - t <= 2 * 0.5 + 0.75 + 0.3, d
        time.sleep(max(0, 8 - (time.time() - t)))
    finally:
        os.kill(pid, signal.SIGCONT)

    assert wait_until(lambda: up_on(c, [stopped]), 60), nodes_json(c)
    wait_done(c, bid, 250, 60)
    t = time.time()
    sl.cut(cut)
    try:
        d = wait_until(lambda: agent_dead_since(c, cut, t - 1), 5, 0.05)
        assert d and d[0]["ts"] - t <= 2 * 0.5 + 0.75 + 0.3, d
        time.sleep(max(0, 15 - (time.time() - t)))
    finally:
        sl.restore(cut)

    wait_done(c, bid, 350, 90)
    restart_master(c)
    r = c.cli("wait", "-c", c.config, bid, "--reconnect-timeout", "60",
              timeout=240)
    assert r.returncode == 0, (r.stdout, r.stderr)
    problems = check_exactly_once(c.results(bid), n, lambda i: f"{i}\n")
    assert not problems, problems
    # The stopped and the cut agents joined the new master; the killed
    # one is gone for good (nothing restarts it).
    assert wait_until(lambda: up_on(c, [stopped, cut]), 90), nodes_json(c)
    assert nodes_json(c).get(killed, {}).get("state") != "up"
    sl.cmd(["scancel", str(jid)])


@pytest.mark.heavy
@pytest.mark.timeout(300)
def test_mixed(
        make_cluster, slurm_cluster_factory, open_dir):
    sl = slurm_cluster_factory(3, slurmd_timeout=60)
    c = login_cluster(make_cluster, sl, open_dir, nodes="slurm")
    # The master and its MPI node: an allocation of one node.
    script = (f"#!/bin/sh\nexec {ROOT / 'scripts' / 'ftfarm.sbatch'} "
              f"{c.config}\n")
    master_job = sl.sbatch(script, ["-N1", "--ntasks-per-node=2",
                                    "--no-kill", "-w", sl.nodes[0]],
                           name="master.sh")
    assert wait_until(lambda: (c.state_dir / "control.tcp").exists() and
                      run_masked([c.ftfarm, "status", "-c", c.config],
                                 c.state_dir, env=c.env).returncode == 0,
                      90), sl.job_output(master_job)

    def masked_json(*args):
        r = run_masked([c.ftfarm, *args, "-c", c.config, "--json"],
                       c.state_dir, env=c.env)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def workers_up(names):
        ws = masked_json("status")["workers"]
        return all(sum(w["node"] == n and w["state"] in LIVE for w in ws)
                   == 2 for n in names)

    assert wait_until(lambda: workers_up([sl.nodes[0]]), 90)
    jid = join_job(c, sl, 2, ["-w", ",".join(sl.nodes[1:])])
    assert wait_until(lambda: workers_up(sl.nodes), 60), \
        sl.job_output(jid)
    via = {n["name"]: n["via"] for n in masked_json("nodes")["nodes"]}
    assert via == {sl.nodes[0]: "mpi", sl.nodes[1]: "tcp",
                   sl.nodes[2]: "tcp"}, via
    n = 300
    batch = c.write_batch({"name": "both", "tasks": [
        {"type": "exec", "argv": ["sh", "-c", "sleep 0.05; hostname"]}
        for _ in range(n)]})
    batch.chmod(0o644)
    r = run_masked([c.ftfarm, "submit", "-c", c.config, batch, "--wait"],
                   c.state_dir, env=c.env, timeout=180)
    assert r.returncode == 0, r.stderr
    bid = int(r.stdout.split()[0])
    res = c.results(bid)
    assert not check_exactly_once(res, n)
    hosts = Counter(x["stdout"].strip() for x in res)
    assert set(hosts) == set(sl.nodes) and min(hosts.values()) > 20, hosts
    r = run_masked([c.ftfarm, "stop", "-c", c.config], c.state_dir,
                   env=c.env, timeout=120)
    assert r.returncode == 0, r.stderr
    # The stop ended the joined agents too, and the master's job.
    assert sl.wait_job(jid, 60) == "COMPLETED", sl.job_output(jid)
    assert "stopped by the master" in sl.job_output(jid)
    assert sl.wait_job(master_job, 60) in ("COMPLETED", "CANCELLED")
