"""The multi-host harnesses themselves (netns_hosts.py, slurm_cluster.py):
Open MPI reaches every emulated host over ssh and every Slurm node
through an allocation, ftfarm runs a batch across the ssh hosts, two
instances live side by side, and teardown leaves nothing behind.  Each
test skips with one line when this machine cannot make the hosts."""
import json
import os
import signal
import subprocess
import time
from collections import Counter

import pytest

import netns_hosts as nh
from conftest import batch_id_of, check_exactly_once, wait_until
from netns_hosts import (REGISTRY_DIR, NetnsHosts, links, netns_list,
                         netns_hosts, netns_hosts_factory, pid_alive)
from slurm_cluster import SlurmCluster, slurm_cluster, slurm_cluster_factory

__all__ = ["netns_hosts", "netns_hosts_factory", "slurm_cluster",
           "slurm_cluster_factory"]      # fixtures, imported to be found

MPIRUN = "mpirun.openmpi"


def mpirun(argv, timeout=60):
    return subprocess.run([MPIRUN, "--allow-run-as-root", *map(str, argv)],
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def instance_gone(inst):
    """Problems left by a torn-down instance (empty when all is gone)."""
    problems = [f"netns {n}" for n in inst.hosts if n in netns_list()]
    have = links()
    problems += [f"link {n}" for n in [inst.bridge, *inst.veth.values()]
                 if n in have]
    if (REGISTRY_DIR / f"{inst.tag}.json").exists():
        problems.append("registry record")
    return problems


# ---- ssh hosts ----

@pytest.mark.timeout(60)
def test_mpirun_over_ssh_runs_on_every_host(netns_hosts):
    net = netns_hosts
    hf = net.write_hostfile(slots=1)
    t0 = time.monotonic()
    r = mpirun(["--hostfile", hf, *net.mpirun_args(), "--bind-to", "none",
                "-n", len(net.hosts), "hostname"])
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == sorted(net.hosts), r.stdout
    assert took < 20, f"mpirun hostname took {took:.1f} s"
    assert net.timings["setup"] < 5, net.timings


@pytest.mark.timeout(60)
def test_run_cut_restore_and_host_processes(netns_hosts):
    net = netns_hosts
    h = net.hosts[0]
    assert net.run(h, ["hostname"]).stdout.strip() == h
    ip = net.run(h, ["ip", "-o", "-4", "addr", "show", "eth0"]).stdout
    assert net.address(h) + "/24" in ip
    r = net.ssh(h, "hostname")
    assert (r.returncode, r.stdout.strip()) == (0, h), r.stderr

    for how in ("link", "nft"):
        net.cut(h, how)
        t0 = time.monotonic()
        r = net.ssh(h, "true", connect_timeout=1, timeout=10)
        assert r.returncode == 255, f"{how} cut: ssh still works"
        assert time.monotonic() - t0 < 5
        net.restore(h)
        r = net.ssh(h, "true", timeout=15)
        assert r.returncode == 0, f"after restoring a {how} cut: {r.stderr}"

    p = net.popen(h, ["sleep", "300"])
    assert wait_until(lambda: p.pid in nh.netns_pids(h), 5)
    killed = net.kill_host_processes(h)
    assert p.pid in killed and p.wait(5) == -signal.SIGKILL
    assert net.sshd_pid[h] not in killed and pid_alive(net.sshd_pid[h])
    assert net.ssh(h, "true").returncode == 0


@pytest.mark.timeout(60)
def test_two_instances_side_by_side(netns_hosts_factory):
    a, b = netns_hosts_factory(2), netns_hosts_factory(2)
    assert a.tag != b.tag and not a.subnet.overlaps(b.subnet)
    assert not set(a.hosts) & set(b.hosts) and a.bridge != b.bridge
    for net in (a, b):
        for h in net.hosts:
            r = net.ssh(h, "hostname")
            assert r.stdout.strip() == h, (h, r.stderr)


@pytest.mark.timeout(60)
def test_teardown_leaves_nothing(tmp_path):
    reason = NetnsHosts.unavailable()
    if reason:
        pytest.skip(f"netns hosts: {reason}")
    net = NetnsHosts(tmp_path, 3)
    try:
        net.start()
        h1, h2, h3 = net.hosts
        # Something of every kind teardown must end: a tracked process,
        # one started over ssh that left its session, a stopped one, a
        # cut host with a process on it, and an open ssh session.
        tracked = net.popen(h1, ["sleep", "300"])
        r = net.ssh(h2, "setsid sleep 301 </dev/null >/dev/null 2>&1 & "
                    "echo $!")
        detached = int(r.stdout.strip())
        stopped = net.popen(h2, ["sleep", "302"])
        wait_until(lambda: nh.proc_cmdline(stopped.pid).startswith("sleep"),
                   5)
        os.kill(stopped.pid, signal.SIGSTOP)
        session = net.track(subprocess.Popen(
            net.ssh_argv(h3, "sleep 303"), stdin=subprocess.DEVNULL,
            start_new_session=True))
        wait_until(lambda: any("sleep 303" in nh.proc_cmdline(p)
                               for p in nh.netns_pids(h3)), 5)
        net.cut(h3, "both")
        ns_pids = {p for h in net.hosts for p in nh.netns_pids(h)}
        ns_pids.update(nh.session_members(session.pid))
        sshd = set(net.sshd_pid.values())
    except BaseException:
        net.teardown()
        raise
    net.teardown()
    assert net.timings["teardown"] < 10, net.timings
    watched = ns_pids | sshd | {tracked.pid, detached, stopped.pid,
                                session.pid}
    alive = [(p, nh.proc_cmdline(p)) for p in watched
             if pid_alive(p)]
    assert not alive, f"processes left: {alive}"
    assert not instance_gone(net), instance_gone(net)
    assert not net.leftovers()


@pytest.mark.timeout(60)
def test_instance_of_a_dead_owner_is_swept(tmp_path, netns_hosts_factory):
    """A test killed before its teardown leaves hosts behind; the next
    instance that starts removes them."""
    if NetnsHosts.unavailable():
        pytest.skip(f"netns hosts: {NetnsHosts.unavailable()}")
    here = os.path.dirname(os.path.abspath(__file__))
    script = ("import sys, time; sys.path.insert(0, sys.argv[1]);"
              "from netns_hosts import NetnsHosts;"
              "n = NetnsHosts(sys.argv[2], 1).start();"
              "print(n.tag, n.hosts[0], n.sshd_pid[n.hosts[0]], flush=True);"
              "time.sleep(300)")
    owner = subprocess.Popen(["/usr/bin/python3", "-c", script, here,
                              str(tmp_path / "orphan")],
                             stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        tag, host, sshd = owner.stdout.readline().split()
        sshd = int(sshd)
        assert host in netns_list() and pid_alive(sshd)
    finally:
        owner.kill()
        owner.wait()
    assert host in netns_list()             # left behind by the dead owner
    netns_hosts_factory(1)
    assert host not in netns_list() and not pid_alive(sshd)
    assert not (REGISTRY_DIR / f"{tag}.json").exists()
    assert f"{tag}br" not in links()


def test_unavailable_says_why_in_one_line(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    reason = NetnsHosts.unavailable()
    assert reason and "\n" not in reason and "root" in reason
    assert SlurmCluster.unavailable() == reason
    monkeypatch.undo()
    if NetnsHosts.unavailable() is None:
        monkeypatch.setattr(nh, "SSHD", "/nonexistent/sshd")
        reason = NetnsHosts.unavailable()
        assert "openssh-server" in reason and "\n" not in reason


# ---- ftfarm across the ssh hosts ----

@pytest.mark.timeout(180)
def test_ftfarm_batch_across_ssh_hosts(netns_hosts, make_cluster):
    net = netns_hosts
    c = make_cluster(heartbeat_ms=500, start_timeout_s=60,
                     ssh=f"ssh -F {net.ssh_config}", network=net.cidr,
                     mpirun_args=["--mca", "orte_tmpdir_base",
                                  str(net.dir / "sess")])
    c.cfg["nodes"] = [{"name": f"node{i}", "host": h, "workers": 1}
                      for i, h in enumerate(net.hosts, 1)]
    c.config.write_text(json.dumps(c.cfg, indent=2) + "\n")
    c.start(timeout=90)
    st = c.status()
    assert sorted(w["host"] for w in st["workers"]) == sorted(net.hosts), st

    n = 60
    batch = {"name": "hosts", "tasks": [
        {"type": "exec", "argv": ["sh", "-c", "sleep 0.05; hostname"]}
        for _ in range(n)]}
    rc, out, err = c.submit(batch, timeout=120)
    assert rc == 0, (out, err, c.master_log()[-2000:])
    res = c.results(batch_id_of(out))
    assert not check_exactly_once(res, n), check_exactly_once(res, n)
    spread = Counter(r["stdout"].strip() for r in res)
    assert set(spread) == set(net.hosts), spread
    t0 = time.monotonic()
    r = c.stop(timeout=90)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert time.monotonic() - t0 < 30

    # Nothing of the cluster stays on the hosts: only their sshd.
    def strays():
        return [(p, nh.proc_cmdline(p)) for h in net.hosts
                for p in nh.netns_pids(h) if p != net.sshd_pid[h]]
    wait_until(lambda: not strays(), 10)
    assert not strays(), f"left on the hosts after stop: {strays()}"


# ---- Slurm ----

@pytest.mark.slurm
@pytest.mark.timeout(90)
def test_salloc_mpirun_runs_on_every_node(slurm_cluster):
    sl = slurm_cluster
    r = sl.salloc(["-N3", "--ntasks-per-node=2", "--no-kill"],
                  [MPIRUN, "--allow-run-as-root", *sl.mpirun_args(),
                   "--bind-to", "none", "hostname"], timeout=60)
    assert r.returncode == 0, r.stderr
    assert Counter(r.stdout.split()) == {n: 2 for n in sl.nodes}, r.stdout
    assert sl.timings["setup"] < 15, sl.timings


@pytest.mark.slurm
@pytest.mark.timeout(90)
def test_slurm_teardown_leaves_nothing(tmp_path):
    reason = SlurmCluster.unavailable()
    if reason:
        pytest.skip(f"slurm cluster: {reason}")
    sl = SlurmCluster(tmp_path, 3)
    try:
        sl.start()
        jid = sl.sbatch("#!/bin/sh\nsleep 300\n", ["-N1"])
        hold = sl.salloc_popen(["-N1", "--no-kill"], ["sleep", "301"])
        wait_until(lambda: len(sl.jobs()) == 2 and
                   sl.job_state(jid) == "RUNNING", 10)
        sl.cut(sl.nodes[2])
        ns_pids = {p for n in sl.nodes for p in nh.netns_pids(n)}
        # salloc's command (`sleep 301`, in a process group of its own)
        ns_pids.update(nh.session_members(hold.pid))
        assert len(nh.session_members(hold.pid)) >= 2
        daemons = {p.pid for p in sl._daemon_procs}
    except BaseException:
        sl.teardown()
        raise
    sl.teardown()
    assert sl.timings["teardown"] < 15, sl.timings
    watched = ns_pids | daemons | {hold.pid}
    alive = [(p, nh.proc_cmdline(p)) for p in watched
             if pid_alive(p)]
    assert not alive, f"processes left: {alive}"
    assert not instance_gone(sl), instance_gone(sl)
    assert not os.path.exists(sl.sockdir)
