"""Faults together: the rules that keep several faults at once from failing
a task or a node by mistake (docs/faults.md): a task's signal 9 when its
worker dies right after, a node whose respawned workers keep dying soon
after their hello, a spawn that hangs before a power cycle, and blame that
does not depend on which of a worker's messages the master sees first."""
import json
import os
import signal
import subprocess
import time

import pytest

from bmc import bmc_sim  # noqa: F401 (fixture)
from conftest import (assert_no_leftovers, check_exactly_once, exec_task,
                      wait_until)

pytestmark = pytest.mark.timeout(180)


def test_sigkill_with_its_worker_is_lost_not_failed(make_cluster, tmp_path):
    """A task killed by signal 9 whose worker dies right after is run
    again, not failed: power loss kills a node's tasks and its workers in
    one instant, and whichever the worker sees first is no verdict on the
    task."""
    # One worker: no idle one takes a copy of the task meanwhile.
    c = make_cluster(heartbeat_ms=500, nodes=1, workers_per_node=1)
    c.start()
    mark = tmp_path / "first"
    # First attempt: the task's shell SIGKILLs itself (the worker reports
    # "signal 9"), and a moment later its worker is SIGKILLed too.
    # The killer leaves the task's process group (killed when the task
    # ends) before the task kills itself.
    ready = tmp_path / "killer-ready"
    script = (f'if [ -e {mark} ]; then echo again; exit 0; fi; '
              f'touch {mark}; '
              f'setsid sh -c "touch {ready}; sleep 0.2; kill -9 $PPID" '
              f'</dev/null >/dev/null 2>&1 & '
              f'while [ ! -e {ready} ]; do sleep 0.01; done; kill -9 $$')
    rc, out, err = c.submit({"name": "kill9", "tasks": [exec_task(script)]})
    assert rc == 0, out + err
    bid = int(out.split()[0])
    res = c.results(bid)
    assert not check_exactly_once(res, 1, lambda i: "again\n"), res
    assert res[0]["attempt"] >= 2, res
    dead = [e for e in c.events() if e["event"] == "worker_dead"]
    assert dead, "the worker was not killed: the test tested nothing"
    assert "lost, not failed" in c.master_log()
    c.stop()


# ---- a node powered off under load ----

def ipmi_cluster(make_cluster, bmc_sim, nodes=2, **cfg):
    """A cluster whose nodes have simulated BMCs booting in 1 s."""
    kw = dict(heartbeat_ms=200, heartbeat_timeout_ms=1000, reboot_wait_s=30)
    kw.update(cfg)
    c = make_cluster(nodes=nodes, **kw)
    sim = bmc_sim(c.config, boot_delay=1)
    cfgd = json.loads(c.config.read_text())
    for n in cfgd["nodes"]:
        n["bmc"]["min_gap_s"] = 0.2
    c.config.write_text(json.dumps(cfgd, indent=2) + "\n")
    c.start()
    return c, sim


def submit_load(c, n):
    """`submit --wait` of N short exec tasks in the background."""
    batch = c.write_batch({"name": "load", "tasks": [
        exec_task("sleep 0.02; echo t$0", i) for i in range(n)]})
    return subprocess.Popen([c.ftfarm, "submit", "-c", str(c.config),
                             str(batch), "--wait"], env=c.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def end_load(c, waiter, n):
    """Wait for the load's end: every task exactly once, ok."""
    try:
        out, err = waiter.communicate(timeout=150)
        assert waiter.returncode == 0, out + err
    finally:
        if waiter.poll() is None:
            waiter.kill()
    bid = c.status()["batches"][0]["id"]
    assert not check_exactly_once(c.results(bid), n, lambda i: f"t{i}\n")


def load_done(c):
    b = c.status()["batches"]
    return b[0]["done"] if b else 0


def events_of(c, node, names):
    return [e for e in c.events() if e.get("node") == node and
            e["event"] in names]


@pytest.mark.long  # about a minute each on 2 cores
@pytest.mark.timeout(240)
def test_respawns_dying_soon_after_hello_climb_the_ladder(make_cluster,
                                                          bmc_sim):
    """A node whose respawned workers each die a third of a second after
    their hello, having finished tasks meanwhile (as under power loss with
    short tasks), is power-cycled: a worker's finished tasks clear its
    node's failures only once it has lived 2 s past its hello.  No task
    fails."""
    c, sim = ipmi_cluster(make_cluster, bmc_sim, nodes=2)
    n = 1500
    waiter = submit_load(c, n)
    kills, seen = [], {}
    try:
        assert wait_until(lambda: load_done(c) > 20, 60)
        end = time.monotonic() + 25
        while time.monotonic() < end and not events_of(
                c, "node2", ("node_power_cycle", "node_inactive")):
            for w in c.status()["workers"]:
                pid = w["pid"]
                if w["node"] != "node2" or w["state"] not in (
                        "idle", "busy") or pid <= 0 or pid in kills:
                    continue
                first = seen.setdefault(pid, time.monotonic())
                if time.monotonic() - first >= 0.3:
                    os.kill(pid, signal.SIGKILL)
                    kills.append(pid)
            time.sleep(0.05)
        cycled = events_of(c, "node2", ("node_power_cycle",
                                        "node_inactive"))
        print(f"{len(kills)} kills of node2's workers before "
              f"{cycled[:1]}")
        assert cycled and cycled[0]["event"] == "node_power_cycle", \
            (kills, [e for e in c.events() if e.get("node") == "node2" and
                     e["event"].startswith(("node_", "worker_"))])
        assert len(kills) <= 4, kills
    except BaseException:
        waiter.kill()
        raise
    end_load(c, waiter, n)
    assert wait_until(lambda: [x["state"] for x in c.status()["nodes"]] ==
                      ["up", "up"], 60), c.status()["nodes"]
    c.stop()
    assert_no_leftovers(c)


@pytest.mark.long  # about a minute each on 2 cores
@pytest.mark.timeout(240)
def test_power_off_under_load_cycles_without_waiting_for_a_hung_spawn(
        make_cluster, bmc_sim):
    """A node powered off under load: its respawn's MPI_Comm_spawn hangs
    (the process it starts is killed as it starts); the power cycle does
    not wait for that spawn beyond a few seconds, the node is back well
    within reboot_wait_s, and no task fails."""
    c, sim = ipmi_cluster(make_cluster, bmc_sim, nodes=2, reboot_wait_s=60)
    n = 1500
    waiter = submit_load(c, n)
    try:
        assert wait_until(lambda: load_done(c) > 20, 60)
        t_off = time.time()
        r = sim.ipmitool("node2", "chassis", "power", "off")
        assert r.returncode == 0, r.stderr
        back = wait_until(lambda: events_of(c, "node2", (
            "node_back", "node_inactive")), 90)
        evs = [e for e in c.events() if e.get("node") == "node2" and
               e["ts"] >= t_off]
        assert back and back[0]["event"] == "node_back", evs
        rebooting = [e for e in evs if e["event"] == "node_power_cycle"]
        sent = [e for e in evs if e["event"] == "bmc_command" and
                e["command"] == "chassis power cycle"]
        assert rebooting and sent, evs
        print(f"power off -> cycle decided {rebooting[0]['ts'] - t_off:.1f}"
              f" s, sent {sent[0]['ts'] - t_off:.1f} s, back "
              f"{back[0]['ts'] - t_off:.1f} s")
        assert sent[0]["ts"] - rebooting[0]["ts"] < 10, evs
        assert back[0]["ts"] - t_off < 60, evs
    except BaseException:
        waiter.kill()
        raise
    end_load(c, waiter, n)
    c.stop()
    assert_no_leftovers(c)


# ---- blame under load ----

@pytest.mark.long  # about a minute each on 2 cores
@pytest.mark.timeout(240)
def test_poison_among_benign_under_load_charges_no_node(make_cluster,
                                                        bmc_sim):
    """Six tasks that SIGKILL their worker among a hundred benign ones, on
    the BMC cluster with two CPU hogs beside it: each poison task fails as
    poison, every benign one succeeds, and no node is charged (no power
    cycle, none inactive).  Run several times: blame must not depend on
    whether a dead worker's last result or its exit is seen first."""
    c, sim = ipmi_cluster(make_cluster, bmc_sim, nodes=3,
                          heartbeat_ms=1000, heartbeat_timeout_ms=2000)
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"])
            for _ in range(2)]
    try:
        for rnd in range(3):
            tasks = [exec_task("sleep 0.01; echo t$0", i) for i in range(100)]
            poison = set(range(7 + rnd, 100, 16))
            for i in poison:
                tasks[i] = exec_task("kill -9 $PPID")
            rc, out, err = c.submit({"name": f"mixed{rnd}",
                                     "tasks": tasks}, timeout=200)
            assert rc == 1, out + err
            res = c.results(int(out.split()[0]))
            assert len(res) == 100 and len({r["task"] for r in res}) == 100
            for r in res:
                if r["task"] in poison:
                    assert r["status"] == "failed" and \
                        "poison" in r["reason"], r
                else:
                    assert r["status"] == "ok", r
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    evs = c.events()
    bad = [e for e in evs if e["event"] in ("node_inactive",
                                            "node_power_cycle")]
    assert not bad, (bad, [e for e in evs if e["event"] in (
        "worker_dead", "worker_blamed", "node_suspect")])
    c.stop()
    assert_no_leftovers(c)


@pytest.mark.timeout(240)
def test_node_powered_off_before_a_master_restart_is_cycled(make_cluster,
                                                            bmc_sim):
    """A node powered off at the moment the master dies: the master that
    the supervisor starts next asks every BMC for its power and cycles the
    node found off at once, instead of finding it out by hung spawns."""
    c, sim = ipmi_cluster(make_cluster, bmc_sim, nodes=2)
    master = c.master_pid
    r = sim.ipmitool("node2", "chassis", "power", "off")
    assert r.returncode == 0, r.stderr
    os.kill(master, signal.SIGKILL)
    t0 = time.time()
    cycled = wait_until(lambda: [e for e in events_of(
        c, "node2", ("node_power_cycle",)) if e["ts"] >= t0], 30)
    assert cycled, [e for e in c.events() if e.get("node") == "node2"]
    assert "power off when the master started" in cycled[0]["reason"]
    assert cycled[0]["ts"] - t0 < 12, cycled
    # Back after the cycle; on a loaded machine the spawn hung onto the
    # node while it was off can hold up the next one past reboot_wait_s,
    # and the node then comes back at its first probe.
    assert wait_until(lambda: [x["state"] for x in c.status()["nodes"]] ==
                      ["up", "up"], 120), c.status()["nodes"]
    rc, out, err = c.submit({"tasks": [exec_task("echo ok")] * 6})
    assert rc == 0, out + err
    c.stop()
    assert_no_leftovers(c)
