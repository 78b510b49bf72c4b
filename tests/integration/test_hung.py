"""A hung worker (SIGSTOP while it runs a task) is declared dead within
about two heartbeats, killed by the master, its task reassigned and done
exactly once, and a replacement is spawned."""
import os
import signal
import time

import pytest

from conftest import (LIVE_STATES, batch_id_of, check_lost_worker_batch,
                      pid_alive, proc_cmdline, proc_state, wait_until)

pytestmark = pytest.mark.timeout(90)

HEARTBEAT_MS = 200
N = 9


@pytest.mark.cluster_opts(heartbeat_ms=HEARTBEAT_MS)
def test_sigstop_busy_worker(cluster):
    c = cluster
    batch = {"name": "hung", "tasks": [
        {"type": "exec",
         "argv": ["sh", "-c", 'sleep 2; printf "h-%s\\n" "$0"', str(i)]}
        for i in range(N)]}
    rc, out, err = c.submit(batch, wait=False)
    assert rc == 0, err
    bid = batch_id_of(out)

    # A busy worker, some way into its task, on a node with no failure
    # yet: the stop must be its node's first failure, or the ladder may
    # take the node out instead of respawning the worker (at this
    # heartbeat a loaded machine can miss an agent's ping at the start).
    def busy():
        st = c.status()
        sound = {n["name"] for n in st["nodes"] if n.get("failures") == 0}
        ws = [w for w in st["workers"]
              if w["state"] == "busy" and w.get("inflight", 1) > 0 and
              w["node"] in sound]
        return ws[0] if ws else None

    w = wait_until(busy, 10)
    assert w, f"no busy worker: {c.status()['workers']}"
    time.sleep(0.5)
    slot, pid = w["id"], w["pid"]
    running = [e for e in c.events() if e["event"] == "task_assigned" and
               e["worker"] == slot and e["batch"] == bid]
    assert running, "no task_assigned event for the busy worker"
    t_stop = time.time()
    os.kill(pid, signal.SIGSTOP)

    # Declared dead within 2 x heartbeat + 1 s.
    limit = 2 * HEARTBEAT_MS / 1000 + 1

    def death():
        for e in c.events():
            if e["event"] == "worker_dead" and e.get("pid") == pid:
                return e
        return None

    dead = wait_until(death, limit + 5)
    assert dead, f"worker {slot} (pid {pid}) never declared dead"
    assert dead["worker"] == slot
    # Found by a deadline, and killed by the master: a stopped process
    # has not exited.
    assert dead["reason"] != "its process exited" and dead["killed"], dead
    print(f"declared dead {dead['ts'] - t_stop:.3f} s after SIGSTOP: {dead}")
    assert dead["ts"] - t_stop <= limit, \
        f"declared dead {dead['ts'] - t_stop:.2f} s after SIGSTOP " \
        f"(limit {limit:.2f} s)"

    # The master killed the stopped process.
    wait_until(lambda: not pid_alive(pid), 3)
    assert not pid_alive(pid), \
        f"hung worker {pid} still there, state {proc_state(pid)}"

    evs = check_lost_worker_batch(c, bid, N, lambda i: f"h-{i}\n", slot)

    respawned = [e for e in evs if e["event"] == "worker_respawned" and
                 e["worker"] == slot and e["ts"] >= dead["ts"]]
    assert respawned, "no worker_respawned event after its death"
    new_pid = respawned[-1]["pid"]
    assert new_pid != pid and pid_alive(new_pid)
    st = c.status()
    w = [x for x in st["workers"] if x["id"] == slot][0]
    assert w["state"] in LIVE_STATES and w["pid"] == new_pid, w
    assert w["respawns"] == 1, w


def children(pid):
    """PIDs whose parent is PID."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(name))
    return out


def pgid_members(pgid):
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and pid_alive(int(name)):
            out.append(int(name))
    return out


@pytest.mark.parametrize("sig", [signal.SIGSTOP, signal.SIGKILL],
                         ids=["sigstop", "sigkill"])
@pytest.mark.cluster_opts(heartbeat_ms=HEARTBEAT_MS)
def test_dead_worker_task_command_does_not_survive(cluster, sig):
    """When the master gives up on a worker (hung and killed, or crashed),
    the command its lost task was running must not keep running next to
    the reassigned attempt, nor outlive `ftfarm stop`."""
    c = cluster
    rc, out, err = c.submit({"name": "orphans", "tasks": [
        {"type": "exec",
         "argv": ["sh", "-c", 'sleep 30; echo "o-$0"', f"orphan-{i}"]}
        for i in range(3)]}, wait=False)
    assert rc == 0, err

    def all_busy():
        st = c.status()
        ws = [w for w in st["workers"] if w["state"] == "busy"]
        return ws if len(ws) == 3 and all(children(w["pid"]) for w in ws) \
            else None

    ws = wait_until(all_busy, 10)
    assert ws, f"workers not all busy: {c.status()['workers']}"
    victim = ws[0]
    pid = victim["pid"]
    kids = children(pid)
    # The exec task runs its command as a process group of its own.
    groups = {k: pgid_members(k) for k in kids}
    assert any(groups.values()), f"no task process group under {pid}: {kids}"
    os.kill(pid, sig)

    def death():
        return any(e["event"] == "worker_dead" and e.get("pid") == pid
                   for e in c.events())

    assert wait_until(death, 5), "worker never declared dead"
    wait_until(lambda: not pid_alive(pid), 3)
    assert not pid_alive(pid)
    # Its task went elsewhere; the lost attempt's command must be gone.
    wait_until(lambda: not any(pgid_members(g) for g in groups), 3)
    left = {g: pgid_members(g) for g in groups if pgid_members(g)}
    assert not left, \
        f"the lost task's command of dead worker {pid} still runs: " \
        f"{[(p, proc_cmdline(p)) for m in left.values() for p in m]}"

    r = c.stop()
    assert r.returncode == 0
    wait_until(lambda: not c.tagged_leftovers(), 5)
    assert not c.tagged_leftovers(), \
        f"processes of the cluster left after stop: {c.tagged_leftovers()}"


@pytest.mark.timeout(120)
@pytest.mark.cluster_opts(heartbeat_ms=HEARTBEAT_MS)
def test_cli_gives_up_on_hung_master(cluster):
    """`ftfarm status` waits at most 30 s for the master's answer (cli
    commands.c); with a hung (SIGSTOPped) master it must fail with an error
    in about that time, not hang forever."""
    import subprocess
    master = cluster.master_pid
    assert master and pid_alive(master)
    os.kill(master, signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        try:
            r = cluster.cli("status", "-c", cluster.config, "--json",
                            timeout=40)
            rc, err = r.returncode, r.stderr
        except subprocess.TimeoutExpired:
            rc, err = None, ""
        took = time.monotonic() - t0
    finally:
        try:
            os.kill(master, signal.SIGCONT)
        except ProcessLookupError:
            pass    # hung past lease_ms: the supervisor killed it (below)
    assert rc is not None, \
        f"`ftfarm status` still hung after {took:.0f} s on a hung master"
    assert rc != 0 and err.strip(), (rc, err)
    assert took < 38
    # The cluster serves again: the master resumed, or (hung past
    # lease_ms) the supervisor replaced it.
    assert wait_until(lambda: cluster.cli("status", "-c", cluster.config)
                      .returncode == 0, 90)
