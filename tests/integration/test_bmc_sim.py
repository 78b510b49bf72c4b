"""The simulated BMCs (scripts/bmc-sim) under the real ipmitool: power
status, off, on and cycle act on the node's processes and only on them,
`ready` follows the boot, and the faults behave as a broken BMC would.

The node's workers are fake: a small script named ftfarm-worker started
with the argv the master gives real workers, with a plain child and a
detached child carrying FTFARM_WORKER_PID (as a task's processes do)."""
import json
import os
import signal
import subprocess
import time

import pytest

from bmc import BMC_SIM, bmc_sim, udp_port_bound  # noqa: F401 (fixture)
from conftest import pid_alive, wait_until

FAKE_WORKER = """#!/bin/sh
# Stands in for ftfarm-worker: a detached task process that carries
# FTFARM_WORKER_PID (its parent, a subshell, exits at once), and a plain
# child.  Their PIDs go to $FAKE_PIDFILE.
( FTFARM_WORKER_PID=$$ sleep 600 </dev/null >/dev/null 2>&1 &
  echo $! >> "$FAKE_PIDFILE" )
sleep 600 &
echo $! >> "$FAKE_PIDFILE"
wait
"""


class FakeWorkers:
    """Fake workers of this test; every process of them is killed at the
    end (by the PIDs recorded)."""

    def __init__(self, base):
        self.dir = base / "fakebin"
        self.dir.mkdir()
        self.prog = self.dir / "ftfarm-worker"
        self.prog.write_text(FAKE_WORKER)
        self.prog.chmod(0o755)
        self.n = 0
        self.all = []           # every PID of every fake worker
        self.popens = []

    def start(self, node, state_dir, slot=0):
        """Start a worker of NODE of the cluster whose state dir is
        STATE_DIR: {"worker": pid, "task": pid (detached, carrying
        FTFARM_WORKER_PID), "child": pid (plain child)}."""
        self.n += 1
        pidfile = self.dir / f"pids{self.n}"
        p = subprocess.Popen(
            [str(self.prog), "--slot", str(slot), "--node", node,
             "--state-dir", str(state_dir)],
            env=dict(os.environ, FAKE_PIDFILE=str(pidfile)),
            stdin=subprocess.DEVNULL, start_new_session=True)
        self.all.append(p.pid)
        assert wait_until(lambda: pidfile.exists() and
                          len(pidfile.read_text().split()) == 2, 10), \
            "the fake worker did not start its children"
        task, child = map(int, pidfile.read_text().split())
        self.all += [task, child]
        self.popens.append(p)
        return {"worker": p.pid, "task": task, "child": child}

    def cleanup(self):
        for pid in self.all:
            if pid_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        for p in self.popens:
            p.wait(timeout=10)


@pytest.fixture
def fake_workers(tmp_path):
    fw = FakeWorkers(tmp_path)
    yield fw
    fw.cleanup()


def write_config(path, nodes=3, state_dir="state"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "name": path.stem, "state_dir": state_dir,
        "nodes": [{"name": f"node{i + 1}", "host": "localhost", "workers": 1}
                  for i in range(nodes)]}) + "\n")
    return path


@pytest.fixture
def sim(bmc_sim, tmp_path):
    """Three started BMCs (node1..node3) of a config in tmp_path."""
    return bmc_sim(write_config(tmp_path / "c" / "cluster.json"))


def all_dead(procs):
    return not any(pid_alive(p) for p in procs.values())


def all_alive(procs):
    return all(pid_alive(p) for p in procs.values())


@pytest.mark.timeout(60)
def test_power_status_off_on(sim):
    r = sim.ipmitool("node1", "chassis", "power", "status")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Chassis Power is on\n"

    r = sim.ipmitool("node1", "chassis", "power", "off")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Chassis Power Control: Down/Off\n"
    assert sim.power("node1") == "off"
    assert sim.power("node2") == "on"
    st = sim.status()
    assert st["node1"]["power"] == "off"
    assert wait_until(lambda: sim.status()["node1"]["guards"], 5), \
        "a node that is off must have a guard"
    guard, = sim.status()["node1"]["guards"]

    r = sim.ipmitool("node1", "chassis", "power", "on")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Chassis Power Control: Up/On\n"
    assert sim.power("node1") == "on"
    assert wait_until(lambda: not pid_alive(guard), 5), \
        "the guard of a node powered on must stop"
    r = sim.ipmitool("node1", "mc", "info")
    assert r.returncode == 0 and "IPMI Version" in r.stdout, r


@pytest.mark.timeout(60)
def test_cycle_kills_the_nodes_processes_only(sim, fake_workers, tmp_path):
    a = fake_workers.start("node1", sim.state_dir)
    b = fake_workers.start("node2", sim.state_dir, slot=1)
    # node1 of another cluster (another state dir) is another machine.
    c = fake_workers.start("node1", tmp_path / "other" / "state")
    assert all_alive(a) and all_alive(b) and all_alive(c)

    t0 = time.monotonic()
    r = sim.ipmitool("node1", "chassis", "power", "cycle")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Chassis Power Control: Cycle\n"
    assert wait_until(lambda: all_dead(a), 2), \
        f"node1's processes survived a power cycle: {a}"
    assert all_alive(b), "a cycle of node1 killed node2's processes"
    assert all_alive(c), "a cycle of node1 killed another cluster's node1"

    assert wait_until(lambda: sim.power("node1") == "on", 10), \
        "node1 did not come back on after the cycle"
    assert time.monotonic() - t0 < 10
    assert all_alive(b) and all_alive(c)


@pytest.mark.timeout(60)
def test_worker_started_while_off_is_killed(sim, fake_workers):
    assert sim.ipmitool("node2", "chassis", "power", "off").returncode == 0
    w = fake_workers.start("node2", sim.state_dir)
    assert wait_until(lambda: all_dead(w), 3), \
        f"a worker of a node that is off was not killed: {w}"

    assert sim.ipmitool("node2", "chassis", "power", "on").returncode == 0
    w = fake_workers.start("node2", sim.state_dir)
    time.sleep(1)
    assert all_alive(w), "a worker of a node powered on again was killed"


@pytest.mark.timeout(60)
def test_ready_fails_while_booting_and_passes_after(sim):
    assert sim.ready("node3") == 0, "a started node is booted"
    sim.boot_delay("node3", 2)
    assert sim.ipmitool("node3", "chassis", "power", "off").returncode == 0
    assert sim.ready("node3") == 1, "a node that is off is not ready"
    assert sim.ipmitool("node3", "chassis", "power", "on").returncode == 0
    t_on = time.monotonic()
    r = sim.run("ready", "node3")
    assert r.returncode == 1 and "booting" in r.stderr, r
    assert wait_until(lambda: sim.ready("node3") == 0, 6, interval=0.2)
    waited = time.monotonic() - t_on
    assert waited >= 1.5, f"ready after {waited:.2f} s, boot delay is 2 s"
    assert sim.ready("node1") == 0


@pytest.mark.timeout(60)
def test_stuck_off_node_stays_off(sim, fake_workers):
    w = fake_workers.start("node1", sim.state_dir)
    sim.fault("node1", "stuck-off")
    r = sim.ipmitool("node1", "chassis", "power", "cycle")
    assert r.returncode == 0, r.stderr
    assert wait_until(lambda: all_dead(w), 2)
    time.sleep(3)           # ipmi_sim tries to power on about 1 s after
    assert sim.power("node1") == "off"
    r = sim.ipmitool("node1", "chassis", "power", "on")
    assert r.returncode == 0, "a stuck BMC still says yes"
    assert sim.power("node1") == "off"
    assert sim.ready("node1") == 1

    sim.fault("node1", "ok")
    assert sim.ipmitool("node1", "chassis", "power", "on").returncode == 0
    assert sim.power("node1") == "on"


@pytest.mark.timeout(60)
def test_dead_bmc_does_not_answer(sim, fake_workers):
    w = fake_workers.start("node2", sim.state_dir)
    sim.fault("node2", "dead")
    assert not udp_port_bound(sim.ports["node2"]), "a dead BMC's port " \
        "must be silent"
    r = sim.ipmitool("node2", "chassis", "power", "status")
    assert r.returncode == 1, r
    assert r.seconds < 6, f"-N 1 -R 1 against nothing took {r.seconds:.1f} s"
    assert "Unable to establish IPMI v2 / RMCP+ session" in r.stderr, r.stderr
    st = sim.status()
    assert st["node2"]["bmc"] == "dead" and st["node2"]["power"] == "on"
    assert sim.run("status").returncode == 1
    assert all_alive(w), "a dead BMC does not turn its node off"
    assert sim.ready("node2") == 0, "the node itself is still up"

    sim.fault("node2", "ok")
    assert sim.power("node2") == "on"
    assert all_alive(w)


@pytest.mark.timeout(60)
def test_wrong_password_fails_fast(sim, tmp_path):
    bad = tmp_path / "wrong-password"
    bad.write_text("not-the-password\n")
    r = sim.ipmitool("node1", "chassis", "power", "off", password_file=bad)
    assert r.returncode == 1, r
    assert r.seconds < 3, f"wrong password took {r.seconds:.2f} s"
    assert "Unable to establish IPMI v2 / RMCP+ session" in r.stderr, r.stderr
    assert sim.power("node1") == "on", "a refused command changed the power"


@pytest.mark.timeout(60)
def test_lan_interface_answers(sim):
    r = sim.ipmitool("node3", "chassis", "power", "status", interface="lan")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Chassis Power is on\n"


@pytest.mark.timeout(60)
def test_taken_port_is_refused(sim, bmc_sim, tmp_path):
    other = write_config(tmp_path / "d" / "cluster.json", nodes=1)
    second = bmc_sim(other, start=False)
    second._write_ports()
    cfg = json.loads(other.read_text())
    cfg["nodes"][0]["bmc"]["port"] = sim.ports["node1"]
    other.write_text(json.dumps(cfg))
    second.ports = {"node1": sim.ports["node1"]}
    r = second.run("start")
    assert r.returncode == 3, r
    assert "already in use" in r.stderr and str(sim.ports["node1"]) in r.stderr
    assert not second.processes(), "a refused start left processes"
    assert sim.power("node1") == "on", "the first BMC must still answer"
    second.ports = {}       # the port is the first simulator's
