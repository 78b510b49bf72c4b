"""Control over TCP, authenticated by MUNGE, as a client on another host
sees it: the state dir's socket masked (remote_client.masked), the CLI
falls back to the address the master published, proves its uid with a
credential bound to the master's nonce, and gets the unix socket's roles.
Each test runs a munged of its own."""
import json
import shutil
import subprocess
import time

import pytest

import remote_flow
from conftest import check_exactly_once, exec_task, pid_alive, wait_until
from remote_client import Raw, credential, masked, run_masked
from slurm_cluster import slurm_cluster, slurm_cluster_factory  # noqa: F401


def remote_cluster(make_cluster, munged, base=None, **kw):
    c = make_cluster(base=base, heartbeat_ms=500, nodes=2,
                     control={"listen": "127.0.0.1:0",
                              "munge_socket": str(munged.socket)}, **kw)
    if base is not None:
        c.config.chmod(0o644)
    c.start()
    return c


def tcp_clients(c):
    """Clients the master authenticated over TCP so far."""
    return c.master_log().count(" authenticated as uid ")


@pytest.mark.heavy
@pytest.mark.timeout(120)
def test_every_command_over_tcp(make_cluster, munged):
    c = remote_cluster(make_cluster, munged)
    ft = c.ftfarm

    def cli(*args, timeout=60):
        return run_masked([ft, *args], c.state_dir, timeout=timeout,
                          env=c.env)

    r = cli("status", "-c", c.config, "--json")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert [n["name"] for n in st["nodes"]] == ["node1", "node2"]
    assert tcp_clients(c) == 1, c.master_log()
    # events --follow over TCP sees what another client does.
    ev = subprocess.Popen(
        masked([ft, "events", "-c", c.config, "--follow"], c.state_dir),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=c.env, start_new_session=True)
    try:
        assert wait_until(lambda: tcp_clients(c) == 2, 10)
        for cmd in (["nodes"], ["drain", "node2"], ["undrain", "node2"],
                    ["rotate"]):
            r = cli(cmd[0], "-c", c.config, *cmd[1:])
            assert r.returncode == 0, (cmd, r.stderr)
        # The batch file's bytes go over the connection.
        n = 40
        batch = c.write_batch({"name": "tcp", "tasks": [
            exec_task(f"echo {i}") for i in range(n)]})
        r = cli("submit", "-c", c.config, batch, "--wait")
        assert r.returncode == 0, r.stderr
        res = c.results(1)
        assert not check_exactly_once(res, n), check_exactly_once(res, n)
        assert cli("wait", "-c", c.config, "1").returncode == 0
        r = cli("cancel", "-c", c.config, "1")
        assert "has finished" in r.stderr, r.stderr
        r = cli("reboot", "-c", c.config, "node1")
        assert r.returncode != 0 and "BMC" in r.stderr.upper(), r.stderr
        r = run_masked(["timeout", "2", ft, "watch", "-c", c.config],
                       c.state_dir, env=c.env)
        assert "node2" in r.stdout or "2 workers" in r.stdout, r.stdout
    finally:
        ev.terminate()
        out, err = ev.communicate(timeout=10)
    names = [json.loads(x)["event"] for x in out.splitlines() if x.strip()]
    assert "node_drained" in names and "node_back" in names, (out, err)
    r = cli("stop", "-c", c.config, timeout=90)
    assert r.returncode == 0, r.stderr
    c.started = False
    assert not (c.state_dir / "control.tcp").exists()
    assert not pid_alive(c.master_pid)


@pytest.mark.timeout(120)
def test_roles_and_credentials_over_tcp(make_cluster, munged, open_dir):
    c = remote_cluster(make_cluster, munged, base=open_dir)
    prog = c.dir / "ftfarm-open"
    shutil.copy(c.ftfarm, prog)
    prog.chmod(0o755)
    batch = c.write_batch({"tasks": [exec_task("echo hi")]})
    batch.chmod(0o644)

    def nobody(*args):
        return run_masked([prog, *args], c.state_dir, user="nobody",
                          env=c.env)

    r = nobody("status", "-c", c.config, "--json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["workers"]) == 2
    assert "authenticated as uid 65534" in c.master_log()
    r = nobody("submit", "-c", c.config, batch, "--wait")
    assert r.returncode != 0 and "permission denied: submit" in r.stderr, \
        r.stderr
    r = nobody("stop", "-c", c.config)
    assert r.returncode != 0 and "permission denied" in r.stderr, r.stderr
    assert pid_alive(c.master_pid)
    assert not (c.state_dir / "batches" / "1").exists()

    secret = ("node1", "node2", "workers", c.cfg["name"])

    def refused(raw, why):
        lines = raw.lines()
        raw.close()
        assert len(lines) == 1, lines
        ans = json.loads(lines[0])
        assert ans["ok"] is False and why in ans["error"], ans
        assert not any(s in lines[0] for s in secret), lines

    # A raw client: requests instead of a credential get nothing.
    raw = Raw(c.state_dir)
    assert set(raw.hello) == {"v", "auth", "nonce"}
    raw.send({"v": 1, "cmd": "status"})
    refused(raw, "greeting")
    raw = Raw(c.state_dir)
    raw.send({"v": 1, "cmd": "stop"})
    refused(raw, "greeting")
    # A credential made for another connection's nonce.
    raw = Raw(c.state_dir)
    raw.send({"v": 1, "munge": credential(munged.socket, "0" * 32)})
    refused(raw, "not made for this connection")
    # A forged one (a byte of a good one changed).
    raw = Raw(c.state_dir)
    good = credential(munged.socket, raw.hello["nonce"])
    k = len(good) // 2
    raw.send({"v": 1, "munge": good[:k] + ("A" if good[k] != "A" else "B")
              + good[k + 1:]})
    refused(raw, "credential refused")
    # The good one works once; replayed, munged refuses it.
    raw = Raw(c.state_dir)
    good = credential(munged.socket, raw.hello["nonce"])
    raw.send({"v": 1, "munge": good})
    assert json.loads(raw.f.readline())["ok"] is True
    raw.send({"v": 1, "cmd": "status"})
    assert json.loads(raw.f.readline())["workers"]
    raw.close()
    raw = Raw(c.state_dir)
    raw.send({"v": 1, "munge": good})
    refused(raw, "Replayed")
    # A greeting past the bound.
    raw = Raw(c.state_dir)
    raw.send(b"x" * 5000)
    refused(raw, "too long")
    assert pid_alive(c.master_pid)
    assert c.status()["workers"]


@pytest.mark.slurm
@pytest.mark.timeout(240)
def test_login_flow(slurm_cluster, bins, open_dir):
    """The outside check (scripts/check-remote-slurm) with fewer tasks.
    (A short name: slurmstepd's socket path under the test's directory
    must stay within 108 bytes.)"""
    remote_flow.run(slurm_cluster, n=60, bindir=bins["openmpi"],
                    workdir=open_dir, log=lambda s: None)


@pytest.mark.long
@pytest.mark.timeout(120)
def test_unauthenticated_peers_are_bounded(make_cluster, munged):
    """A peer that never authenticates is closed after 10 s; past 64 such
    peers at once, newcomers are refused at once; neither gets data."""
    c = remote_cluster(make_cluster, munged)
    idle = [Raw(c.state_dir) for _ in range(64)]
    extra = Raw(c.state_dir)        # its first line: the refusal, no nonce
    rest = extra.lines()
    extra.close()
    assert extra.hello["ok"] is False and "too many connections" in \
        extra.hello["error"] and rest == [], (extra.hello, rest)
    time.sleep(11)
    for raw in idle:
        lines = raw.lines()
        raw.close()
        assert len(lines) == 1 and "no credential in time" in lines[0], \
            lines
    # The master is as it was, and a client authenticates again.
    r = run_masked([c.ftfarm, "status", "-c", c.config, "--json"],
                   c.state_dir, env=c.env)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["workers"]) == 2
