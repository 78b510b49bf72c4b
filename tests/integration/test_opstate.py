"""Operator and node state that outlives the master: a drain, an undrain,
a node given up on and why, the ladder's counts and a reboot under way
come back after kill -9 of the master (the supervisor restarts it), a
standby's takeover and `ftfarm stop` / `ftfarm start` of the same state
dir; a damaged <state_dir>/nodes.state is reported and ignored.

Real clusters, real kill -9, the simulated BMCs of scripts/bmc-sim (real
ipmitool against ipmi_sim) for the reboots."""
import json
import os
import signal
import subprocess
import time

import pytest

from bmc import bmc_sim  # noqa: F401 (fixture)
from conftest import (assert_no_leftovers, batch_id_of, check_exactly_once,
                      exec_task, wait_until)
from test_nodes import ipmi_cluster, node_row, worker_of
from test_durable import fill, small_tmpfs  # noqa: F401 (fixture)
from test_supervise import kill, live_master, read_pid

pytestmark = pytest.mark.timeout(240)

# Pings that a loaded machine does not miss; a short lease and backoff,
# so that a killed master is back in seconds.
FAST = dict(heartbeat_ms=200, heartbeat_timeout_ms=1000, lease_ms=1000,
            master_silence_ms=3000, restart_backoff_ms=200,
            restart_backoff_max_ms=1000)


# ---- helpers ----

def nodes_json(c):
    """{name: row} from `ftfarm nodes --json` (the contract's command)."""
    r = c.cli("nodes", "-c", c.config, "--json", timeout=30)
    assert r.returncode == 0, r.stderr
    return {n["name"]: n for n in json.loads(r.stdout)["nodes"]}


def state_of(c, node):
    return nodes_json(c)[node]["state"]


def saved(c):
    """{node: record} of <state_dir>/nodes.state, after its header."""
    lines = (c.state_dir / "nodes.state").read_text().splitlines()
    head = json.loads(lines[0])
    assert head["file"] == "nodes.state" and head["version"] == 1, head
    recs = [json.loads(x) for x in lines[1:]]
    assert head["nodes"] == len(recs), lines
    return {r["node"]: r for r in recs}


def restart_master(c):
    """kill -9 the master; wait for the supervisor's next one to answer
    and for every worker it should have to be there.  Its events from
    then on are those after the returned index."""
    mark = len(c.events())
    epoch, master = live_master(c)
    kill(master)
    live_master(c, after_epoch=epoch, timeout=90)
    return mark


def events_since(c, mark, name, node=None):
    return [e for e in c.events()[mark:] if e["event"] == name and
            (node is None or e.get("node") == node)]


def workers_of(c, node):
    return {w["id"] for w in c.status()["workers"] if w["node"] == node}


def settled(c, want):
    """Wait until every node is in the state WANT names (others: up) and
    every worker of a node in service is idle or busy."""
    def ok():
        st = c.status()
        nodes = {n["name"]: n["state"] for n in st["nodes"]}
        if any(nodes[n] != want.get(n, "up") for n in nodes):
            return False
        return all(w["state"] in ("idle", "busy") for w in st["workers"]
                   if nodes[w["node"]] in ("up", "drained"))
    assert wait_until(ok, 90, interval=0.2), \
        (c.status()["nodes"], c.master_log()[-3000:])


def kill_twice(c, node):
    """SIGKILL NODE's worker, then its respawn: two failures in a row,
    which give up on a node without a BMC (respawn_limit 1)."""
    for k in range(2):
        _, pid = wait_until(lambda: worker_of(c, node)[1] and
                            worker_of(c, node), 30)
        os.kill(pid, signal.SIGKILL)
        if k == 0:
            assert wait_until(lambda: node_row(c, node)["state"] ==
                              "suspect", 30)


def spread_batch(n=60, name="spread"):
    return {"name": name, "tasks": [
        exec_task("sleep 0.05; echo t$0", i) for i in range(n)]}


def run_spread(c, n=60):
    """A batch over the whole cluster, every task exactly once: its
    results."""
    rc, out, err = c.submit(spread_batch(n))
    assert rc == 0, err
    res = c.results(batch_id_of(out))
    assert check_exactly_once(res, n, lambda i: f"t{i}\n") == []
    return res


# ---- drain and undrain ----

@pytest.mark.parametrize("launch", ["dynamic", "static"])
def test_drain_survives_kill9_then_undrain_does(make_cluster, launch):
    """Drain node2, kill -9 the master: the next master has node2
    drained (a node_restored event says so) and a batch spread over the
    cluster runs none of its tasks there.  Undrain it, kill -9 again: it
    is up and takes tasks.  In a static world (the whole job restarted)
    as in a dynamic one."""
    c = make_cluster(nodes=3, workers_per_node=2, launch=launch, **FAST)
    c.start()
    r = c.cli("drain", "-c", c.config, "node2", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["node"]["state"] == "drained"
    # Answered only once on disk.
    rec = saved(c)["node2"]
    assert rec["state"] == "drained" and rec["drained"] is True, rec

    mark = restart_master(c)
    settled(c, {"node2": "drained"})
    assert state_of(c, "node2") == "drained"
    back = events_since(c, mark, "node_restored", "node2")
    assert back and back[0]["state"] == "drained" and back[0]["drained"], \
        back
    node2 = workers_of(c, "node2")
    res = run_spread(c)
    used = {r["worker"] for r in res}
    assert not used & node2, (used, node2)
    assert used - node2, used

    r = c.cli("undrain", "-c", c.config, "node2")
    assert r.returncode == 0 and r.stdout.startswith("node2: up"), r
    assert saved(c)["node2"]["drained"] is False
    restart_master(c)
    settled(c, {})
    assert state_of(c, "node2") == "up"
    res = run_spread(c)
    assert {r["worker"] for r in res} & node2, "no task ran on node2"
    c.stop()
    assert_no_leftovers(c)


def test_stop_start_keeps_a_drain(make_cluster):
    """`ftfarm stop` then `ftfarm start` of the same state dir: the drain
    stands."""
    c = make_cluster(nodes=2, **FAST)
    c.start()
    assert c.cli("drain", "-c", c.config, "node1").returncode == 0
    assert c.stop().returncode == 0
    c.start()
    assert state_of(c, "node1") == "drained"
    node1 = workers_of(c, "node1")
    assert not {r["worker"] for r in run_spread(c, 20)} & node1
    c.stop()
    assert_no_leftovers(c)


def test_a_node_out_of_the_config_keeps_its_state(make_cluster):
    """A node is its name in the config: node3, drained, then left out of
    the config for a start, keeps its record (logged, written back
    unchanged) and is drained again when it returns."""
    c = make_cluster(nodes=3, **FAST)
    c.start()
    assert c.cli("drain", "-c", c.config, "node3").returncode == 0
    assert c.stop().returncode == 0
    cfg = json.loads(c.config.read_text())
    three = list(cfg["nodes"])
    cfg["nodes"] = three[:2]
    c.config.write_text(json.dumps(cfg))
    c.start()
    assert set(nodes_json(c)) == {"node1", "node2"}
    assert "node node3 is not in the config: its saved state (drained) " \
        "is kept" in c.master_log()
    assert c.cli("drain", "-c", c.config, "node1").returncode == 0
    recs = saved(c)
    assert recs["node1"]["drained"] and recs["node3"]["drained"], recs
    assert c.stop().returncode == 0
    cfg["nodes"] = three
    c.config.write_text(json.dumps(cfg))
    c.start()
    nodes = nodes_json(c)
    assert nodes["node3"]["state"] == "drained", nodes
    assert nodes["node1"]["state"] == "drained", nodes
    c.stop()
    assert_no_leftovers(c)


def test_standby_takeover_keeps_a_drain(make_cluster):
    """A standby that takes over from a killed supervisor and master
    finds node2 drained."""
    c = make_cluster(nodes=2, **dict(FAST, lease_ms=2000))
    c.start()
    r = c.cli("start", "--standby", "-c", c.config)
    assert r.returncode == 0, r.stderr
    standby = read_pid(c, f"standby.{os.uname().nodename}.pid")
    assert c.cli("drain", "-c", c.config, "node2").returncode == 0
    epoch, master = live_master(c)
    kill(read_pid(c, "supervisor.pid"))
    kill(master)
    live_master(c, after_epoch=epoch, timeout=90)
    assert read_pid(c, "supervisor.pid") == standby
    settled(c, {"node2": "drained"})
    node2 = workers_of(c, "node2")
    assert not {r["worker"] for r in run_spread(c, 20)} & node2
    c.stop()
    assert_no_leftovers(c)


# ---- the ladder ----

def test_ladder_counts_survive_restart(make_cluster, bmc_sim):
    """A reboot through the simulated BMC, then a failure of node2's
    worker: reboots, the last reboot's time and the failure charged come
    back after kill -9 of the master, and count: the next failure climbs
    the ladder to a power cycle at once."""
    c, sim = ipmi_cluster(make_cluster, bmc_sim, nodes=2, **FAST)
    r = c.cli("reboot", "-c", c.config, "node2", timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("node2: up, reboots 1"), r
    _, pid = wait_until(lambda: worker_of(c, "node2")[1] and
                        worker_of(c, "node2"), 30)
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: node_row(c, "node2")["failures"] == 1, 30), \
        node_row(c, "node2")
    before = node_row(c, "node2")
    assert before["state"] == "suspect" and before["reboots"] == 1, before
    assert wait_until(lambda: saved(c)["node2"]["failures"] == 1, 10)

    mark = restart_master(c)
    settled(c, {"node2": "suspect"})
    after = node_row(c, "node2")
    assert after["reboots"] == 1 and after["failures"] == 1, after
    assert abs(after["last_reboot"] - before["last_reboot"]) < 1e-3, \
        (before, after)
    back = events_since(c, mark, "node_restored", "node2")
    assert back and back[0]["reboots"] == 1 and back[0]["failures"] == 1, \
        back
    # The failure charged before the restart counts: one more is the
    # second in a row, a power cycle.
    _, pid = wait_until(lambda: worker_of(c, "node2")[1] and
                        worker_of(c, "node2"), 30)
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: events_since(c, mark, "node_power_cycle",
                                           "node2"), 30), c.master_log()[-3000:]
    assert wait_until(lambda: node_row(c, "node2")["reboots"] == 2, 30)
    c.stop()
    assert_no_leftovers(c)


def test_inactive_stays_inactive_with_its_reason(make_cluster):
    """node2 (no BMC) given up on after two failures stays inactive with
    its reason across kill -9 of the master and a stop and start, and
    runs nothing; undrain brings it back, for good."""
    c = make_cluster(nodes=3, probe_min_s=3600, probe_max_s=3600, **FAST)
    c.start()
    kill_twice(c, "node2")
    assert wait_until(lambda: node_row(c, "node2")["state"] == "inactive",
                      30), node_row(c, "node2")
    reason = node_row(c, "node2")["reason"]
    assert "no \"bmc\"" in reason, reason
    assert wait_until(lambda: saved(c)["node2"]["state"] == "inactive", 10)

    mark = restart_master(c)
    settled(c, {"node2": "inactive"})
    row = node_row(c, "node2")
    assert row["state"] == "inactive" and row["reason"] == reason, row
    back = events_since(c, mark, "node_restored", "node2")
    assert back and back[0]["state"] == "inactive", back
    assert all(w["state"] == "inactive" for w in c.status()["workers"]
               if w["node"] == "node2")
    node2 = workers_of(c, "node2")
    assert not {r["worker"] for r in run_spread(c, 30)} & node2

    # Stop and start: `start` returns, naming the node given up on.
    assert c.stop().returncode == 0
    r = c.start()
    assert "nodes inactive" in r.stdout and "node2" in r.stdout, r.stdout
    row = node_row(c, "node2")
    assert row["state"] == "inactive" and row["reason"] == reason, row

    r = c.cli("undrain", "-c", c.config, "node2")
    assert r.returncode == 0, r.stderr
    settled(c, {})
    restart_master(c)
    settled(c, {})
    assert {r["worker"] for r in run_spread(c, 60)} & node2
    c.stop()
    assert_no_leftovers(c)


def test_an_inactive_node_is_probed_on_its_own_time(make_cluster):
    """The backoff of a node given up on goes on across a restart: its
    probe comes when it was due (8 s after it was given up on), not a
    whole backoff after the new master's start."""
    c = make_cluster(nodes=2, probe_min_s=8, probe_max_s=8, **FAST)
    c.start()
    kill_twice(c, "node2")
    gone = wait_until(lambda: [e for e in c.events() if e["event"] ==
                               "node_inactive" and e["node"] == "node2"], 30)
    assert gone, c.master_log()[-2000:]
    assert wait_until(lambda: saved(c)["node2"]["next_probe"] > 0, 10)
    wait_until(lambda: time.time() > gone[0]["ts"] + 4, 10)
    mark = restart_master(c)
    up = events_since(c, mark, "master_up")[0]["ts"]
    probe = wait_until(lambda: events_since(c, mark, "node_down", "node2"),
                       60)
    assert probe, c.master_log()[-2000:]
    assert probe[0]["ts"] - up < 6, (up, probe, gone)
    settled(c, {})
    c.stop()
    assert_no_leftovers(c)


def test_restart_mid_reboot_probes_the_node(make_cluster, bmc_sim):
    """The master killed while node2 boots after its power cycle: the
    next master probes node2 (power, ready, workers) rather than cycle
    it again, and node2 is back with its one reboot."""
    c, sim = ipmi_cluster(make_cluster, bmc_sim, nodes=2, start=False,
                          **FAST)
    c.start()
    sim.boot_delay("node2", 6)
    mark = len(c.events())
    p = subprocess.Popen([c.ftfarm, "reboot", "-c", str(c.config), "node2",
                          "--force"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=c.env,
                         stdin=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: events_since(c, mark, "node_power_on",
                                               "node2") or
                          events_since(c, mark, "node_power_cycle",
                                       "node2"), 30)
        assert wait_until(lambda: saved(c)["node2"]["state"] ==
                          "rebooting", 10), saved(c)
        mark = restart_master(c)
    finally:
        out, err = p.communicate(timeout=120)
    assert p.returncode != 0, (out, err)     # its master went away
    back = wait_until(lambda: events_since(c, mark, "node_back", "node2"),
                      60)
    assert back, c.master_log()[-3000:]
    restored = events_since(c, mark, "node_restored", "node2")
    assert restored and restored[0]["was"] == "rebooting" and \
        restored[0]["state"] == "down", restored
    assert not events_since(c, mark, "node_power_cycle", "node2")
    row = node_row(c, "node2")
    assert row["state"] == "up" and row["reboots"] == 1, row
    c.stop()
    assert_no_leftovers(c)


# ---- damage ----

@pytest.mark.parametrize("damage", ["flip", "torn", "garbage"])
def test_damaged_state_is_reported_and_ignored(make_cluster, damage):
    """A flipped byte in node2's record, a file cut in the middle of it,
    or a file that is not ours at all: the master starts, reports it (a
    node_state_damaged event, master.log), keeps it aside as
    nodes.state.damaged, ignores what is damaged and keeps the rest."""
    c = make_cluster(nodes=3, **FAST)
    c.start()
    for n in ("node2", "node3"):
        assert c.cli("drain", "-c", c.config, n).returncode == 0
    assert c.stop().returncode == 0
    path = c.state_dir / "nodes.state"
    data = bytearray(path.read_bytes())
    lines = data.split(b"\n")
    start2 = len(lines[0]) + len(lines[1]) + 2       # node2's line
    if damage == "flip":
        at = start2 + lines[2].index(b"drained") + 2
        data[at] ^= 0x01
    elif damage == "torn":
        data = data[:start2 + len(lines[2]) // 2]
    else:
        data = bytearray(b"not what ftfarm writes\n")
    path.write_bytes(bytes(data))

    mark = len(c.events())
    c.start()
    bad = events_since(c, mark, "node_state_damaged")
    assert bad, c.master_log()[-2000:]
    assert all(e["file"] == str(path) for e in bad), bad
    assert "nodes.state" in c.master_log()
    assert (c.state_dir / "nodes.state.damaged").read_bytes() == bytes(data)
    nodes = nodes_json(c)
    assert nodes["node2"]["state"] == "up", nodes["node2"]
    if damage == "flip":
        assert bad[0]["line"] == 3 and "checksum" in bad[0]["reason"], bad
        assert nodes["node3"]["state"] == "drained"     # untouched line
    # The file is whole again.
    assert saved(c)["node2"]["state"] == "up"
    run_spread(c, 20)
    c.stop()
    assert_no_leftovers(c)


# ---- a full disk ----

def test_drain_on_a_full_disk_says_so_then_lands(make_cluster, small_tmpfs):
    """A drain on a full state dir: node2 drains, but `ftfarm drain`
    exits 1 saying its record is not on disk; once there is room again
    the record is written by itself, and a master killed then finds node2
    drained."""
    c = make_cluster(nodes=2, state_dir=str(small_tmpfs / "state"), **FAST)
    c.state_dir = small_tmpfs / "state"
    c.start()
    ballast = small_tmpfs / "ballast"
    fill(ballast)
    try:
        r = c.cli("drain", "-c", c.config, "node2")
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert "node node2 is drained, but the state dir did not take " \
            "its record" in r.stderr and "No space left" in r.stderr, \
            r.stderr
        assert node_row(c, "node2")["state"] == "drained"
        assert c.status()["store"]["state"] == "full"
        assert saved(c)["node2"]["drained"] is False
    finally:
        ballast.unlink()
    assert wait_until(lambda: saved(c)["node2"]["drained"], 30)
    assert wait_until(lambda: c.status()["store"]["state"] == "ok", 30)
    restart_master(c)
    settled(c, {"node2": "drained"})
    c.stop()
    assert_no_leftovers(c)
