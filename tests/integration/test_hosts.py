"""ftfarm across hosts: three emulated hosts (network namespaces with an
sshd each, netns_hosts.py), the cluster's nodes named by "host", mpirun
launched over the config's "ssh" with a hostfile the start writes.

A batch of exec tasks that print their host runs while a worker is
SIGKILLed on one host and another host is cut off the network: every task
has exactly one result, naming the host it ran on; `ftfarm stop` ends
within its bound.  A host that does not answer at start is left out (the
start says which node is missing) and brought in once it answers.

Each test skips with one line when this machine cannot make the hosts."""
import json
import subprocess
import os
import signal
import time
from collections import Counter

import pytest

import netns_hosts as nh
from conftest import ROOT, batch_id_of, check_exactly_once, wait_until
from netns_hosts import netns_hosts, netns_hosts_factory  # noqa: F401
from slurm_cluster import slurm_cluster, slurm_cluster_factory  # noqa: F401

__all__ = ["netns_hosts", "netns_hosts_factory", "slurm_cluster",
           "slurm_cluster_factory"]                    # fixtures

STOP_BOUND = 30         # seconds `ftfarm stop` may take, a host cut


def host_cluster(make_cluster, net, workers=1, **kw):
    """A cluster (not started) with one node per host of NET."""
    opts = dict(heartbeat_ms=500, start_timeout_s=60, probe_min_s=2,
                probe_max_s=4, respawn_limit=3)
    opts.update(kw)
    c = make_cluster(
        ssh=f"ssh -F {net.ssh_config}", network=net.cidr,
        # The test's tag reaches the remote processes too (clean-up finds
        # them); the session dirs stay in the test's directory.
        mpirun_args=["-x", "FTFARM_TEST_TAG", "--mca", "orte_tmpdir_base",
                     str(net.dir / "sess")], **opts)
    c.cfg["nodes"] = [{"name": f"node{i}", "host": h, "workers": workers}
                      for i, h in enumerate(net.hosts, 1)]
    c.config.write_text(json.dumps(c.cfg, indent=2) + "\n")
    return c


def host_batch(n, delay=0.05):
    return {"name": "hosts", "tasks": [
        {"type": "exec", "argv": ["sh", "-c", f"sleep {delay}; hostname"]}
        for _ in range(n)]}


def live_workers(c):
    return [w for w in c.status()["workers"]
            if w["state"] in ("idle", "busy", "slow")]


def strays(net):
    """Processes left on the hosts but their sshd."""
    return [(p, nh.proc_cmdline(p)) for h in net.hosts
            for p in nh.netns_pids(h) if p != net.sshd_pid[h]]


@pytest.mark.timeout(200)
def test_kill_and_cut_mid_batch_every_task_once(netns_hosts, make_cluster):
    net = netns_hosts
    h1, h2, h3 = net.hosts
    c = host_cluster(make_cluster, net)
    c.start(timeout=90)
    hf = (c.state_dir / "hostfile").read_text()
    assert hf.splitlines()[0].startswith("localhost"), hf
    assert all(f"{h} slots=1" in hf for h in net.hosts), hf
    st = c.status()
    assert sorted(w["host"] for w in st["workers"]) == sorted(net.hosts)

    n = 240
    batch = host_batch(n)
    bid = batch_id_of(c.submit(batch, wait=False)[1])
    assert wait_until(lambda: len(c.results(bid)) >= 30, 60)
    victim = next(w for w in c.status()["workers"] if w["host"] == h1)
    os.kill(victim["pid"], signal.SIGKILL)
    assert wait_until(lambda: any(
        w["host"] == h1 and w["pid"] != victim["pid"]
        for w in live_workers(c)), 40), c.status()
    done_at_cut = len(c.results(bid))
    net.cut(h2)
    t_cut = time.monotonic()
    assert wait_until(lambda: len(c.results(bid)) >= n, 150), \
        (len(c.results(bid)), c.master_log()[-3000:])
    res = c.results(bid)
    assert not check_exactly_once(res, n), check_exactly_once(res, n)
    for r in res:
        assert r["host"] == r["stdout"].strip(), r
    spread = Counter(r["host"] for r in res)
    assert set(spread) == set(net.hosts), spread
    after = Counter(r["host"] for r in res[done_at_cut + 20:])
    assert h2 not in after, after          # nothing more ran on the cut host
    dead = [e for e in c.events() if e["event"] == "worker_dead"]
    assert {"node1", "node2"} <= {e["node"] for e in dead}, dead
    assert [e for e in c.events() if e["event"] == "task_done" and
            e.get("host") == h3]
    reassigned = time.monotonic() - t_cut

    t0 = time.monotonic()
    r = c.stop(timeout=90)
    took = time.monotonic() - t0
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert took < STOP_BOUND, (took, r.stderr)
    assert f"could not clean up on {h2}" in r.stderr, r.stderr
    print(f"cut to batch end {reassigned:.1f} s, stop {took:.1f} s: "
          f"{r.stderr.strip()}")
    net.restore(h2)
    wait_until(lambda: not strays(net), 15)
    assert not strays(net), f"left on the hosts after stop: {strays(net)}"


@pytest.mark.timeout(200)
def test_host_down_at_start_comes_in_later(netns_hosts, make_cluster):
    net = netns_hosts
    h1, h2, h3 = net.hosts
    c = host_cluster(make_cluster, net)
    net.cut(h3)
    t0 = time.monotonic()
    r = c.start(timeout=90)
    took = time.monotonic() - t0
    assert took < 40, took
    assert "node3" in r.stdout and h3 in r.stdout, r.stdout
    hf = (c.state_dir / "hostfile").read_text()
    assert h3 not in hf and h1 in hf, hf
    st = c.status()
    n3 = next(n for n in st["nodes"] if n["name"] == "node3")
    assert n3["state"] in ("inactive", "down"), n3
    assert sorted(w["host"] for w in live_workers(c)) == [h1, h2]
    assert [e for e in c.events() if e["event"] == "node_inactive" and
            e["node"] == "node3" and h3 in e["reason"]], c.events()

    net.restore(h3)
    assert wait_until(lambda: h3 in [w["host"] for w in live_workers(c)],
                      60), (c.status(), c.master_log()[-3000:])
    n = 60
    rc, out, err = c.submit(host_batch(n), timeout=120)
    assert rc == 0, (out, err)
    res = c.results(batch_id_of(out))
    assert not check_exactly_once(res, n), check_exactly_once(res, n)
    assert set(r["host"] for r in res) == set(net.hosts), \
        Counter(r["host"] for r in res)
    r = c.stop(timeout=90)
    assert r.returncode == 0, (r.stdout, r.stderr)
    wait_until(lambda: not strays(net), 15)
    assert not strays(net), f"left on the hosts after stop: {strays(net)}"


@pytest.mark.timeout(150)
def test_hung_remote_worker_killed_there(netns_hosts, make_cluster):
    net = netns_hosts
    h3 = net.hosts[2]
    c = host_cluster(make_cluster, net)
    c.start(timeout=90)
    n = 120
    bid = batch_id_of(c.submit(host_batch(n), wait=False)[1])
    assert wait_until(lambda: len(c.results(bid)) >= 20, 60)
    st = c.status()
    victim = next(w for w in st["workers"] if w["host"] == h3)
    os.kill(victim["pid"], signal.SIGSTOP)
    # A hung worker is found and killed on its host by its node's agent.
    assert wait_until(lambda: not nh.pid_alive(victim["pid"]), 30), \
        c.master_log()[-3000:]
    dead = wait_until(lambda: [e for e in c.events()
                               if e["event"] == "worker_dead" and
                               e["pid"] == victim["pid"]], 10)
    assert dead and dead[0]["reason"].startswith("stopped by signal") and \
        dead[0]["killed"], dead
    # A hung agent is killed on its host over ssh (the master does not
    # signal a pid of another host itself); its slots go with it.
    assert wait_until(lambda: any(
        w["host"] == h3 and w["pid"] != victim["pid"]
        for w in live_workers(c)), 40), c.status()
    st = c.status()
    node = next(n for n in st["nodes"] if n["name"] == victim["node"])
    slots = [w["pid"] for w in st["workers"] if w["node"] == node["name"]]
    os.kill(node["agent_pid"], signal.SIGSTOP)
    assert wait_until(lambda: not nh.pid_alive(node["agent_pid"]), 30), \
        c.master_log()[-3000:]
    assert "over ssh" in c.master_log()
    assert wait_until(lambda: not any(nh.pid_alive(p) for p in slots), 10)
    assert wait_until(lambda: len(c.results(bid)) >= n, 90)
    res = c.results(bid)
    assert not check_exactly_once(res, n), check_exactly_once(res, n)
    assert wait_until(lambda: any(
        w["host"] == h3 and w["pid"] not in slots
        for w in live_workers(c)), 40), c.status()
    r = c.stop(timeout=90)
    assert r.returncode == 0, (r.stdout, r.stderr)
    wait_until(lambda: not strays(net), 15)
    assert not strays(net), f"left on the hosts after stop: {strays(net)}"


# ---- Slurm ----

@pytest.mark.slurm
@pytest.mark.timeout(240)
def test_slurm_batch_with_a_node_cut(slurm_cluster, make_cluster, tmp_path):
    sl = slurm_cluster
    s1, s2, s3 = sl.nodes
    c = make_cluster(heartbeat_ms=500, start_timeout_s=60, probe_min_s=2,
                     probe_max_s=4, network=sl.cidr,
                     mpirun_args=["--mca", "orte_tmpdir_base",
                                  str(tmp_path / "sess")])
    c.cfg["nodes"] = "slurm"
    c.config.write_text(json.dumps(c.cfg, indent=2) + "\n")
    n = 150
    batch = c.write_batch(host_batch(n, delay=0.1))
    out = tmp_path / "job.out"
    script = tmp_path / "job.sh"
    script.write_text(f"""#!/bin/sh
F={c.ftfarm}
$F start -c {c.config} || exit 10
$F submit -c {c.config} {batch}
$F wait -c {c.config} 1 >/dev/null 2>&1 || sleep 100
$F status -c {c.config} --json > {tmp_path / "status.json"}
$F stop -c {c.config}
echo "stop $?"
""")
    script.chmod(0o755)
    env = dict(sl.env, FTFARM_TEST_TAG=c.tag)
    p = sl.salloc_popen(["-N3", "--ntasks-per-node=1", "--no-kill"],
                        [str(script)], env=env, stdout=out.open("w"),
                        stderr=subprocess.STDOUT)
    results = c.state_dir / "batches" / "1" / "results.jsonl"

    def done():
        try:
            return len(results.read_text().splitlines())
        except OSError:
            return 0
    assert wait_until(lambda: done() >= 20 or p.poll() is not None, 90), \
        out.read_text()
    assert p.poll() is None, out.read_text()
    sl.cut(s3)
    try:
        p.wait(timeout=150)
    finally:
        sl.restore(s3)
    text = out.read_text()
    assert p.returncode == 0, text
    assert "up: 3 workers on 3 nodes" in text, text
    res = c.results(1)
    assert not check_exactly_once(res, n), (check_exactly_once(res, n), text)
    spread = Counter(r["host"] for r in res)
    assert set(spread) == set(sl.nodes), spread
    for r in res:
        assert r["host"] == r["stdout"].strip(), r
    assert "stop 0" in text, text
    # The cut node's worker was declared dead; its tasks went elsewhere
    # (nothing ran on it once it was found dead).
    evs = c.events()
    dead = [e for e in evs if e["event"] == "worker_dead" and
            e["node"] == s3]
    assert dead, [e for e in evs if e["event"].startswith("worker_")]
    t_dead = dead[0]["ts"]
    late = [e for e in evs if e["event"] == "task_done" and
            e["host"] == s3 and e["ts"] > t_dead]
    assert not late, late[:3]


@pytest.mark.slurm
@pytest.mark.timeout(150)
def test_sbatch_script(slurm_cluster, make_cluster, tmp_path):
    sl = slurm_cluster
    c = make_cluster(heartbeat_ms=500, start_timeout_s=60, network=sl.cidr)
    c.cfg["nodes"] = "slurm"
    c.config.write_text(json.dumps(c.cfg, indent=2) + "\n")
    n = 30
    batch = c.write_batch(host_batch(n))
    sl.env["FTFARM"] = c.ftfarm
    sl.env["FTFARM_TEST_TAG"] = c.tag
    # The shipped script, with its two arguments.
    jid = sl.sbatch(f"#!/bin/sh\nexec {ROOT / 'scripts' / 'ftfarm.sbatch'} "
                    f"{c.config} {batch}\n",
                    ["-N3", "--ntasks-per-node=1", "--no-kill"])
    assert sl.wait_job(jid, 120) == "COMPLETED", sl.job_output(jid)
    res = c.results(1)
    assert not check_exactly_once(res, n), check_exactly_once(res, n)
    assert set(r["host"] for r in res) == set(sl.nodes), sl.job_output(jid)


@pytest.mark.timeout(120)
def test_host_without_the_worker_is_named_at_start(netns_hosts, make_cluster):
    net = netns_hosts
    h3 = net.hosts[2]
    c = host_cluster(make_cluster, net)
    # On h3 (its sshd's mount namespace, which its ssh sessions share)
    # the programs' directory is empty: no ftfarm-worker there.
    bindir = os.path.dirname(c.ftfarm)
    nh.sh(["nsenter", "-t", net.sshd_pid[h3], "-m", "mount", "-t", "tmpfs",
           "tmpfs", bindir])
    t0 = time.monotonic()
    r = c.start(timeout=90)
    assert time.monotonic() - t0 < 40
    assert "node3" in r.stdout and "ftfarm-worker: missing" in r.stdout, \
        r.stdout
    assert sorted(w["host"] for w in live_workers(c)) == net.hosts[:2]
    r = c.stop(timeout=90)
    assert r.returncode == 0, (r.stdout, r.stderr)
