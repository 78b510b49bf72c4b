"""Nodes that join a running master over TCP (`ftfarm join`), on this
host: a master with no node of its own fed by joined agents, an MPI node
and joined ones in one farm, leave, the faults a joined agent meets
(SIGKILL, SIGSTOP, the master killed -9, SIGTERM) with every task exactly
once, a join as another user refused, a drained joined node drained
across a master restart.  The same across hosts and a Slurm allocation is
in test_join_slurm.py."""
import json
import os
import signal
import socket
import subprocess
import time
from collections import Counter

import pytest

from bmc import bmc_sim  # noqa: F401
from conftest import ROOT, check_exactly_once, exec_task, pid_alive, wait_until
from remote_client import open_bins, run_masked

pytestmark = pytest.mark.timeout(180)


def join_cluster(make_cluster, munged, nodes=0, base=None, **kw):
    """A started cluster whose nodes join over TCP (NODES of its own over
    MPI, 2 slots each), heartbeat 500 ms."""
    kw.setdefault("heartbeat_ms", 500)
    c = make_cluster(nodes=nodes, workers_per_node=2, base=base,
                     control={"listen": "127.0.0.1:0",
                              "munge_socket": str(munged.socket)}, **kw)
    if base is not None:
        c.config.chmod(0o644)
    c.start()
    return c


class Agent:
    """An `ftfarm join` of cluster C (its output in a file beside the
    config)."""

    def __init__(self, c, name, slots=2, extra=()):
        self.c = c
        self.name = name
        self.log = c.dir / f"join-{name}.log"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [c.ftfarm, "join", "-c", str(c.config), "--name", name,
                 "--slots", str(slots), *extra],
                env=c.env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT)

    @property
    def pid(self):
        return self.proc.pid

    def text(self):
        return self.log.read_text()

    def wait(self, timeout=30):
        return self.proc.wait(timeout=timeout)


def submit(c, batch, wait=True):
    """Submit BATCH: its id (waited for, unless not WAIT)."""
    rc, out, err = c.submit(batch, wait=wait)
    assert rc == 0, (rc, out, err)
    return int(out.split()[0])


def node_rows(c):
    return {n["name"]: n for n in
            json.loads(c.cli("nodes", "-c", c.config, "--json").stdout)
            ["nodes"]}


def up_workers(c, node):
    return [w for w in c.status()["workers"] if w["node"] == node and
            w["state"] in ("idle", "busy")]


def joined(c, agent, slots=2, timeout=30):
    """Wait until AGENT's node is up with SLOTS workers up."""
    ok = wait_until(lambda: len(up_workers(c, agent.name)) == slots and
                    node_rows(c)[agent.name]["state"] == "up", timeout)
    assert ok, (node_rows(c).get(agent.name), agent.text(),
                [w for w in c.status()["workers"]],
                c.master_log()[-1500:])


def restart_master(c):
    """SIGKILL C's master; wait until the supervisor's next one answers."""
    old = c._read_pid("master.pid")
    os.kill(old, signal.SIGKILL)

    def new():
        p = c._read_pid("master.pid")
        return p if p not in (None, old) and pid_alive(p) and \
            c.cli("status", "-c", c.config, timeout=30).returncode == 0 \
            else None
    assert wait_until(new, 60, 0.1), "no new master"
    c._record_pids()


def node_of_results(c, bid):
    """{task index: the node of the worker that ran it}."""
    wnode = {w["id"]: w["node"] for w in c.status()["workers"]}
    return {r["task"]: wnode[r["worker"]] for r in c.results(bid)}


def test_joined_nodes_run_a_batch_then_one_leaves(make_cluster, munged):
    c = join_cluster(make_cluster, munged)
    a, b = Agent(c, "j1"), Agent(c, "j2")
    joined(c, a)
    joined(c, b)
    rows = node_rows(c)
    assert rows["j1"]["via"] == "tcp" and rows["j1"]["agent_pid"] == a.pid
    assert rows["j1"]["allocation"] is None and rows["j1"]["workers"] == 2
    # The slots are the agent's children, here.
    for w in up_workers(c, "j1"):
        assert int(open(f"/proc/{w['pid']}/stat").read().rsplit(")", 1)[1]
                   .split()[1]) == a.pid
    n = 300
    bid = submit(c, {"name": "j", "tasks": [
        exec_task("echo $(($0 * 3)); sleep 0.01", i) for i in range(n)]})
    problems = check_exactly_once(c.results(bid), n,
                                  lambda i: f"{i * 3}\n")
    assert not problems, problems
    spread = Counter(node_of_results(c, bid).values())
    assert spread["j1"] > 30 and spread["j2"] > 30, spread

    # j2 leaves while a long task runs there: given back, unfinished,
    # and run again on j1; j2's agent exits 0.
    bid = submit(c, {"name": "long", "tasks": [
        exec_task("sleep 3; echo done") for _ in range(4)]}, wait=False)
    assert wait_until(lambda: any(w["state"] == "busy"
                                  for w in up_workers(c, "j2")), 20)
    r = c.cli("leave", "-c", c.config, "j2", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["node"]["state"] == "leaving"
    assert b.wait(30) == 0, b.text()
    assert "stopped by the master" in b.text()
    assert wait_until(lambda: node_rows(c)["j2"]["state"] == "left", 10)
    c.cli("wait", "-c", c.config, bid, timeout=120)
    res = c.results(bid)
    assert not check_exactly_once(res, 4, lambda i: "done\n")
    assert set(node_of_results(c, bid).values()) == {"j1"}
    ev = [e for e in c.events() if e["event"] == "task_interrupted"]
    assert ev, "the running task on j2 was not given back"
    # Left, not failed: no failure charged to it.
    assert node_rows(c)["j2"]["failures"] == 0
    # A leave of a node of the config, or of an unknown one: refused.
    r = c.cli("leave", "-c", c.config, "nosuch")
    assert r.returncode != 0 and "nosuch" in r.stderr


@pytest.mark.heavy
def test_agent_killed_stopped_and_master_killed(make_cluster, munged):
    c = join_cluster(make_cluster, munged)
    agents = [Agent(c, f"k{i}") for i in range(3)]
    for a in agents:
        joined(c, a)
    n = 600
    bid = submit(c, {"name": "faults", "tasks": [
        exec_task("sleep 0.05; echo $0", i) for i in range(n)]}, wait=False)
    done = lambda k: len(c.results(bid)) >= k  # noqa: E731

    assert wait_until(lambda: done(60), 60)
    t0 = time.time()
    os.kill(agents[0].pid, signal.SIGKILL)
    # Its tasks go back at once: its connection closes with it.
    dead = wait_until(lambda: [e for e in c.events()
                               if e["event"] == "agent_dead" and
                               e["node"] == "k0"], 5, 0.02)
    assert dead and dead[0]["ts"] - t0 < 1.0, dead

    assert wait_until(lambda: done(200), 60)
    os.kill(agents[1].pid, signal.SIGSTOP)
    t1 = time.time()
    try:
        dead = wait_until(lambda: [e for e in c.events()
                                   if e["event"] == "agent_dead" and
                                   e["node"] == "k1"], 10, 0.05)
        assert dead and dead[0]["ts"] - t1 <= 2 * 0.5 + 0.75, dead
        time.sleep(max(0, 8 - (time.time() - t1)))
    finally:
        os.kill(agents[1].pid, signal.SIGCONT)

    assert wait_until(lambda: done(350), 60)
    restart_master(c)
    r = c.cli("wait", "-c", c.config, bid, "--reconnect-timeout", "60",
              timeout=240)
    assert r.returncode == 0, (r.stdout, r.stderr)
    problems = check_exactly_once(c.results(bid), n, lambda i: f"{i}\n")
    assert not problems, problems
    # The stopped agent and the survivors joined again (new incarnations).
    assert wait_until(lambda: all(node_rows(c).get(f"k{i}", {})
                                  .get("state") == "up"
                                  for i in (1, 2)), 30), node_rows(c)
    assert "joining again" in agents[1].text()
    assert agents[0].proc.poll() is not None


def test_sigterm_interrupts_and_gives_back(make_cluster, munged):
    c = join_cluster(make_cluster, munged)
    a, b = Agent(c, "s1", slots=1), Agent(c, "s2", slots=1)
    joined(c, a, 1)
    joined(c, b, 1)
    bid = submit(c, {"name": "term", "tasks": [
        exec_task("sleep 2; echo $0", i) for i in range(4)]}, wait=False)
    assert wait_until(lambda: any(w["state"] == "busy"
                                  for w in up_workers(c, "s1")), 20)
    a.proc.send_signal(signal.SIGTERM)      # its allocation ends
    assert a.wait(30) == 0, a.text()
    c.cli("wait", "-c", c.config, bid, timeout=120)
    res = c.results(bid)
    assert not check_exactly_once(res, 4, lambda i: f"{i}\n")
    assert all(r["status"] == "ok" for r in res)
    st = node_rows(c)["s1"]
    assert st["state"] == "left" and "SIGTERM" in st["reason"], st
    assert st["failures"] == 0


def test_join_as_another_user_refused(make_cluster, munged, open_dir):
    c = join_cluster(make_cluster, munged, base=open_dir)
    r = run_masked([open_bins(c.ftfarm, c.dir / "bin"), "join", "-c",
                    c.config, "--name", "evil",
                    "--reconnect-timeout", "5"], c.state_dir, user="nobody",
                   env=c.env, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "may not join" in r.stderr and "owner" in r.stderr, r.stderr
    assert "evil" not in node_rows(c)
    assert c.status()["workers"] == []


def test_mpi_and_joined_nodes_in_one_farm(make_cluster, munged):
    c = join_cluster(make_cluster, munged, nodes=1)
    a = Agent(c, "tcp1")
    joined(c, a)
    rows = node_rows(c)
    assert rows["node1"]["via"] == "mpi" and rows["tcp1"]["via"] == "tcp"
    # A name of the config's is not a joined node's.
    dup = Agent(c, "node1", extra=("--reconnect-timeout", "3"))
    assert dup.wait(30) == 2 and "one of the config's nodes" in dup.text()
    n = 200
    bid = submit(c, {"name": "both", "tasks": [
        exec_task("sleep 0.02; echo $0", i) for i in range(n)]})
    assert not check_exactly_once(c.results(bid), n, lambda i: f"{i}\n")
    spread = Counter(node_of_results(c, bid).values())
    assert spread["node1"] > 20 and spread["tcp1"] > 20, spread


def test_joined_drain_outlives_a_master_restart(make_cluster, munged):
    c = join_cluster(make_cluster, munged)
    a, b = Agent(c, "d1"), Agent(c, "d2")
    joined(c, a)
    joined(c, b)
    r = c.cli("drain", "-c", c.config, "d1")
    assert r.returncode == 0, r.stderr
    restart_master(c)
    # Both agents join the next master; d1 is drained there too.
    assert wait_until(lambda: len(up_workers(c, "d1")) == 2 and
                      len(up_workers(c, "d2")) == 2, 60), node_rows(c)
    assert node_rows(c)["d1"]["state"] == "drained"
    bid = submit(c, {"name": "after", "tasks": [
        exec_task("echo $0", i) for i in range(40)]})
    assert set(node_of_results(c, bid).values()) == {"d2"}
    r = c.cli("undrain", "-c", c.config, "d1")
    assert r.returncode == 0 and node_rows(c)["d1"]["state"] == "up"


@pytest.mark.timeout(120)
def test_joined_node_rebooted_over_its_hosts_bmc(make_cluster, munged,
                                                bmc_sim):
    host = socket.gethostname()
    c = make_cluster(nodes=0, workers_per_node=2, heartbeat_ms=500,
                     reboot_wait_s=20, respawn_limit=1,
                     control={"listen": "127.0.0.1:0",
                              "munge_socket": str(munged.socket)},
                     join={"hosts": {host: {}}})
    bmc_sim(c.config, boot_delay=1)
    c.start()
    a = Agent(c, "b1")
    joined(c, a)
    assert node_rows(c)["b1"]["bmc"].startswith("127.0.0.1:")
    r = c.cli("reboot", "-c", c.config, "b1", timeout=90)
    assert r.returncode == 0, (r.stdout, r.stderr, c.master_log()[-2000:])
    assert r.stdout.startswith("b1: up, reboots 1"), r.stdout
    evs = [e["event"] for e in c.events() if e.get("node") == "b1"]
    # Idle: no drain needed; cycled, then back with its workers.
    assert evs.index("node_power_cycle") < evs.index("node_back"), evs
    bid = submit(c, {"name": "after", "tasks": [
        exec_task("echo $0", i) for i in range(20)]})
    assert not check_exactly_once(c.results(bid), 20, lambda i: f"{i}\n")


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.timeout(180)
def test_nodes_come_and_go_nothing_piles_up(make_cluster, munged):
    """Thirty nodes of thirty names join and leave in turn: the master's
    descriptors stay as they were, and the place of a node that left goes
    to the next (its table does not grow)."""
    c = join_cluster(make_cluster, munged)
    master = c._read_pid("master.pid")
    first = Agent(c, "warm", slots=1)
    joined(c, first, 1)
    c.cli("leave", "-c", c.config, "warm")
    assert first.wait(30) == 0
    base = fds(master)
    for i in range(30):
        a = Agent(c, f"n{i}", slots=1)
        joined(c, a, 1)
        bid = submit(c, {"name": "one", "tasks": [exec_task("echo $0", i)]})
        assert c.results(bid)[0]["stdout"] == f"{i}\n"
        r = c.cli("leave", "-c", c.config, f"n{i}")
        assert r.returncode == 0, r.stderr
        assert a.wait(30) == 0, a.text()
    rows = node_rows(c)
    assert len(rows) == 1 and "n29" in rows, sorted(rows)
    assert len(c.status()["workers"]) == 1
    assert abs(fds(master) - base) <= 2, (base, fds(master))


def test_time_requests_go_where_there_is_time(make_cluster, munged):
    """A node that joins for 5 s (`--time-limit`) takes plain tasks but not
    one asking for 60 s; at its end it leaves by itself and gives its task
    back (not failed); the task asking for time waits, says why, and runs
    on a node with no end."""
    c = join_cluster(make_cluster, munged)
    a = Agent(c, "short", slots=1, extra=("--time-limit", "5"))
    joined(c, a, 1)
    assert 0 < node_rows(c)["short"]["time_left"] <= 5
    bid = submit(c, {"name": "t", "tasks": [
        exec_task("echo $0", 0, time_request=60),
        exec_task("sleep 6; echo $0", 1)]}, wait=False)
    assert wait_until(lambda: any(w["state"] == "busy"
                                  for w in up_workers(c, "short")), 20)

    def waiting():
        rows = [b for b in c.status()["batches"] if b["id"] == bid]
        return rows and rows[0].get("waiting")
    why = wait_until(waiting, 10)
    assert why and "60 s left" in why, c.status()["batches"]
    assert a.wait(30) == 0, a.text()
    assert "its time here is up" in a.text()
    Agent(c, "long", slots=2)
    r = c.cli("wait", "-c", c.config, str(bid), timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    res = c.results(bid)
    assert not check_exactly_once(res, 2, lambda i: f"{i}\n")
    assert all(r["status"] == "ok" for r in res), res
    assert set(node_of_results(c, bid).values()) == {"long"}
    left = [json.loads(x) for x in c.cli(
        "events", "-c", c.config, "--type", "node_left").stdout.split("\n")
        if x.strip()]
    assert [e["reason"] for e in left if e["node"] == "short"] == \
        ["its time here is up"], left


def test_time_request_no_queue_can_meet_is_refused(make_cluster, munged):
    """On a farm whose nodes all come from allocation queues, a task asking
    more time than the longest queue gives is refused at submit (exit 2,
    the key named)."""
    q = {"name": "q1", "nodes": 1, "time_limit_s": 120, "max_nodes": 1,
         "sbatch": []}
    c = make_cluster(nodes=0, control={"listen": "127.0.0.1:0",
                                       "munge_socket": str(munged.socket)},
                     allocations=[q])
    c.start()
    r = c.cli("submit", "-c", c.config, "--time-request", "100", "--",
              "true", timeout=30)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "time_request" in r.stderr and "no allocation queue" in r.stderr
    batch = c.dir / "t.json"
    batch.write_text(json.dumps({"tasks": [
        exec_task("true", time_request=50),
        exec_task("true", time_request=5000)]}))
    r = c.cli("submit", "-c", c.config, str(batch), timeout=30)
    assert r.returncode == 2 and "tasks[1]" in r.stderr, r.stderr


def test_executor_time_request(make_cluster, munged):
    """Executor(time_request=S): its calls start only where S seconds are
    left; without it they go anywhere."""
    import sys
    sys.path.insert(0, str(ROOT / "python"))
    import ftfarm
    c = join_cluster(make_cluster, munged)
    a = Agent(c, "brief", slots=1, extra=("--time-limit", "40"))
    b = Agent(c, "lasting", slots=1)
    joined(c, a, 1)
    joined(c, b, 1)
    with pytest.raises(ValueError, match="time_request"):
        ftfarm.Executor(str(c.config), time_request=0)
    with ftfarm.Executor(str(c.config), time_request=60) as ex:
        assert list(ex.map(abs, range(-6, 0))) == [6, 5, 4, 3, 2, 1]
        asked = ex.batch
    with ftfarm.Executor(str(c.config)) as ex:
        fs = [ex.submit(time.sleep, 0.5) for _ in range(6)]
        [f.result(timeout=60) for f in fs]
        free = ex.batch
    assert set(node_of_results(c, asked).values()) == {"lasting"}
    assert set(node_of_results(c, free).values()) == {"brief", "lasting"}
