"""One node agent per node: the agent (ftfarm-worker, the node's one MPI
process) starts the node's worker slots (ftfarm-slot) as its children,
watches them and relays their messages.  A slot that dies or hangs is
seen by its agent and respawned through it; an agent that dies is one
failure of its node: its slots' tasks go back, done exactly once, and the
agent comes back with new slots."""
import os
import signal
import time

import pytest

from conftest import (LIVE_STATES, assert_no_leftovers, batch_id_of,
                      check_exactly_once, is_cluster_agent, pid_alive,
                      proc_cmdline, proc_environ, proc_state, tagged_pids,
                      wait_until)

pytestmark = pytest.mark.timeout(150)


def ppid_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def node_of(st, name):
    return next(n for n in st["nodes"] if n["name"] == name)


def slots_of(st, name):
    return [w for w in st["workers"] if w["node"] == name]


def agents(c):
    return sorted(p for p in tagged_pids(c.tag) if is_cluster_agent(c.tag, p))


def events_of(c, kind, since):
    return [e for e in c.events() if e["event"] == kind and e["ts"] >= since]


def test_agent_killed_is_one_node_failure(make_cluster):
    c = make_cluster(nodes=2, workers_per_node=3, heartbeat_ms=500)
    c.start()
    st = c.status()
    assert len(agents(c)) == 2, agents(c)
    for name in ("node1", "node2"):
        ag = node_of(st, name)
        assert ag["agent"] == "up" and pid_alive(ag["agent_pid"]), ag
        assert ag["agent_host"] and ag["agent_respawns"] == 0, ag
        for w in slots_of(st, name):
            assert ppid_of(w["pid"]) == ag["agent_pid"], (w, ag)
    n = 30
    rc, out, err = c.submit({"name": "agent-kill", "tasks": [
        {"type": "exec",
         "argv": ["sh", "-c", 'sleep 0.4; printf "a-%s\\n" "$0"', str(i)]}
        for i in range(n)]}, wait=False)
    assert rc == 0, err
    bid = batch_id_of(out)

    def node1_busy():
        s = c.status()
        return s if any(w["state"] == "busy"
                        for w in slots_of(s, "node1")) else None

    st = wait_until(node1_busy, 10)
    assert st, "no slot of node1 got a task"
    old_agent = node_of(st, "node1")["agent_pid"]
    old_slots = {w["id"]: w["pid"] for w in slots_of(st, "node1")}
    t_kill = time.time()
    os.kill(old_agent, signal.SIGKILL)

    assert c.cli("wait", "-c", c.config, bid, timeout=90).returncode == 0
    problems = check_exactly_once(c.results(bid), n, lambda i: f"a-{i}\n")
    assert not problems, problems

    dead = [e for e in events_of(c, "worker_dead", t_kill)
            if e["worker"] in old_slots]
    assert sorted(e["worker"] for e in dead) == sorted(old_slots), dead
    assert all(e["reason"].startswith("its node agent") for e in dead), dead
    # One failure of the node, not one per slot.
    blamed = [e for e in events_of(c, "worker_blamed", t_kill)
              if e["node"] == "node1"]
    assert len(blamed) == 1 and blamed[0]["charged"] == "node", blamed
    # Every slot of the agent went with it, and every task process.
    assert wait_until(lambda: not any(pid_alive(p)
                                      for p in old_slots.values()), 5), \
        [(p, proc_state(p)) for p in old_slots.values()]
    mark = f"FTFARM_AGENT_PID={old_agent}".encode()
    left = wait_until(lambda: not [p for p in tagged_pids(c.tag)
                                   if mark in proc_environ(p)], 5)
    assert left, [(p, proc_cmdline(p)) for p in tagged_pids(c.tag)
                  if mark in proc_environ(p)]

    def back():
        s = c.status()
        ag = node_of(s, "node1")
        ws = slots_of(s, "node1")
        ok = ag["agent"] == "up" and ag["agent_pid"] != old_agent and \
            all(w["state"] in LIVE_STATES and w["pid"] not in
                old_slots.values() for w in ws)
        return (ag, ws) if ok else None

    got = wait_until(back, 30)
    assert got, f"node1 not back: {c.status()['nodes']}"
    ag, ws = got
    assert all(ppid_of(w["pid"]) == ag["agent_pid"] for w in ws), (ag, ws)
    assert ag["agent_respawns"] == 1 and ag["agent_host"], ag
    assert node_of(c.status(), "node2")["agent_respawns"] == 0
    assert all(w["respawns"] == 1 for w in ws), ws
    assert len(agents(c)) == 2, agents(c)
    assert c.stop().returncode == 0
    assert_no_leftovers(c)


def test_slot_killed_and_stopped_respawned_by_its_agent(make_cluster):
    hb = 0.5
    c = make_cluster(nodes=1, workers_per_node=4, heartbeat_ms=int(hb * 1000))
    c.start()
    st = c.status()
    agent = node_of(st, "node1")["agent_pid"]
    n = 40
    rc, out, err = c.submit({"name": "slot-faults", "tasks": [
        {"type": "exec",
         "argv": ["sh", "-c", 'sleep 0.3; printf "s-%s\\n" "$0"', str(i)]}
        for i in range(n)]}, wait=False)
    assert rc == 0, err
    bid = batch_id_of(out)

    def busy(exclude=()):
        ws = [w for w in c.status()["workers"]
              if w["state"] == "busy" and w["id"] not in exclude]
        return ws[0] if ws else None

    victims = {}
    for sig in (signal.SIGKILL, signal.SIGSTOP):
        w = wait_until(lambda: busy(victims), 10)
        assert w, "no busy slot"
        t0 = time.time()
        os.kill(w["pid"], sig)
        victims[w["id"]] = (w["pid"], sig, t0)

    def death(pid):
        return next((e for e in c.events() if e["event"] == "worker_dead"
                     and e.get("pid") == pid), None)

    for slot, (pid, sig, t0) in victims.items():
        dead = wait_until(lambda: death(pid), 10)
        assert dead, f"slot {slot} (pid {pid}, {sig.name}) not declared dead"
        after = dead["ts"] - t0
        print(f"{sig.name}: declared dead {after:.3f} s after: {dead}")
        if sig == signal.SIGKILL:
            assert dead["reason"] == "its process exited", dead
            assert after <= 0.5, dead
        else:
            assert dead["reason"].startswith("stopped by signal"), dead
            assert dead["killed"] is True, dead
            assert after <= 2 * hb + 0.5, dead
    assert c.cli("wait", "-c", c.config, bid, timeout=60).returncode == 0
    problems = check_exactly_once(c.results(bid), n, lambda i: f"s-{i}\n")
    assert not problems, problems

    def respawned():
        ws = {w["id"]: w for w in c.status()["workers"]}
        ok = all(ws[s]["state"] in LIVE_STATES and ws[s]["pid"] != p and
                 ws[s]["respawns"] == 1 for s, (p, _, _) in victims.items())
        return ws if ok else None

    ws = wait_until(respawned, 20)
    assert ws, c.status()["workers"]
    for s in victims:
        assert ppid_of(ws[s]["pid"]) == agent, ws[s]
    for pid, _, _ in victims.values():
        assert wait_until(lambda: not pid_alive(pid), 5), (pid,
                                                           proc_state(pid))
    # The agent itself never changed.
    node = node_of(c.status(), "node1")
    assert node["agent_pid"] == agent and pid_alive(agent), node
    assert c.stop().returncode == 0
    assert_no_leftovers(c)


def test_many_slots_on_one_node(make_cluster):
    slots = 24
    c = make_cluster(nodes=1, workers_per_node=slots, heartbeat_ms=1000)
    c.start()
    st = c.status()
    agent = node_of(st, "node1")["agent_pid"]
    pids = [w["pid"] for w in st["workers"]]
    assert len(set(pids)) == slots and all(ppid_of(p) == agent
                                           for p in pids), st["workers"]
    assert agents(c) == [agent]
    n = 2000
    tasks = []
    for i in range(n):
        if i % 10 == 0:
            tasks.append({"type": "exec", "argv": [
                "sh", "-c", 'sleep 0.05; printf "m-%s\\n" "$0"', str(i)]})
        else:
            tasks.append({"type": "sleep", "seconds": 0})
    rc, out, err = c.submit({"name": "many", "tasks": tasks}, timeout=120)
    assert rc == 0, err
    res = c.results(batch_id_of(out))
    problems = check_exactly_once(
        res, n, lambda i: f"m-{i}\n" if i % 10 == 0 else "")
    assert not problems, problems
    used = {r["worker"] for r in res if r["task"] % 10 == 0}
    assert len(used) >= slots // 2, sorted(used)
    assert c.stop().returncode == 0
    assert_no_leftovers(c)


def test_wide_batch_goes_out_in_passes(make_cluster):
    """A batch far larger than the workers' windows goes out in passes of
    at most 8192 tasks, the loop reading results in between: every task
    exactly once, every worker used."""
    c = make_cluster(nodes=2, workers_per_node=12, heartbeat_ms=1000)
    c.start()
    # Short tasks first, so that the windows are wide.
    rc, out, err = c.submit({"name": "warm", "tasks": [
        {"type": "sleep", "seconds": 0}] * 2000}, timeout=60)
    assert rc == 0, err
    n = 60000
    rc, out, err = c.submit({"name": "wide", "tasks": [
        {"type": "sleep", "seconds": 0}] * n}, timeout=120)
    assert rc == 0, err
    res = c.results(batch_id_of(out))
    problems = check_exactly_once(res, n, lambda i: "")
    assert not problems, problems[:5]
    used = {r["worker"] for r in res}
    assert len(used) == 24, sorted(used)
    assert c.stop().returncode == 0
    assert_no_leftovers(c)


def comm_of(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def zygotes(c):
    return [p for p in tagged_pids(c.tag) if comm_of(p) == "ftfarm-zygote"]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP])
def test_slots_forked_by_the_zygote_and_by_exec_once_it_is_gone(
        make_cluster, sig):
    """A node's slots are forked by its zygote once it is ready, as the
    agent's own children.  When the zygote is killed the agent reaps it;
    when it is stopped, the agent finds it so (as it finds stopped slots,
    every half heartbeat, rather than 2 s after a request went
    unanswered), kills it and starts by exec what was asked of it.  Slots
    then start by exec, and a batch through both runs each task exactly
    once."""
    c = make_cluster(nodes=1, workers_per_node=3, heartbeat_ms=200)
    c.start()
    agent = node_of(c.status(), "node1")["agent_pid"]
    zs = wait_until(lambda: zygotes(c), 5)
    assert len(zs) == 1 and ppid_of(zs[0]) == agent, zs
    zygote = zs[0]
    n = 30
    rc, out, err = c.submit({"name": "zygote", "tasks": [
        {"type": "exec",
         "argv": ["sh", "-c", 'sleep 0.3; printf "z-%s\\n" "$0"', str(i)]}
        for i in range(n)]}, wait=False)
    assert rc == 0, err
    bid = batch_id_of(out)

    def respawn_of(old):
        """Kill a busy slot other than OLD's; its new process."""
        w = wait_until(lambda: next((x for x in c.status()["workers"]
                                     if x["state"] == "busy" and
                                     x["pid"] not in old), None), 10)
        assert w, "no busy slot"
        os.kill(w["pid"], signal.SIGKILL)
        old.add(w["pid"])
        new = wait_until(lambda: next(
            (x for x in c.status()["workers"] if x["id"] == w["id"] and
             x["pid"] not in old and x["state"] in LIVE_STATES), None), 10)
        assert new, f"slot {w['id']} not respawned"
        assert ppid_of(new["pid"]) == agent, new
        return new

    old = set()
    forked = respawn_of(old)
    # A forked slot writes a slot's words over the zygote's command line,
    # less --fd: its socket is not on descriptor 3, an exec'd slot's is.
    # `ftfarm start` finds a cluster's leftover slots by --state-dir.
    cmd = proc_cmdline(forked["pid"])
    assert f"--slot {forked['id']} --node node1 " \
        f"--state-dir {c.state_dir} " in cmd, cmd
    assert "--zygote" not in cmd and "--fd" not in cmd, cmd
    assert comm_of(forked["pid"]) == "ftfarm-slot", forked
    os.kill(zygote, sig)

    def reaped():
        return not pid_alive(zygote) and proc_state(zygote) is None

    if sig == signal.SIGKILL:
        # Reaped by the agent within a heartbeat: no zombie left behind.
        assert wait_until(reaped, 3), proc_state(zygote)
    t_zygote = time.time()
    execd = respawn_of(old)
    assert wait_until(reaped, 3), proc_state(zygote)
    cmd = proc_cmdline(execd["pid"])
    assert "--zygote" not in cmd and "--fd 3" in cmd, cmd
    assert f"--slot {execd['id']}" in cmd, execd
    # The respawn asked of a stopped zygote went to exec: one death (the
    # kill above), not a second one for a slot that never started.
    deaths = [e for e in c.events() if e["ts"] >= t_zygote and
              e["event"] in ("worker_dead", "worker_spawn_failed")]
    assert len(deaths) == 1 and deaths[0]["pid"] > 0, deaths
    if sig == signal.SIGSTOP:
        assert "the zygote was stopped by signal 19" in c.mpirun_log()

    assert c.cli("wait", "-c", c.config, bid, timeout=90).returncode == 0
    problems = check_exactly_once(c.results(bid), n, lambda i: f"z-{i}\n")
    assert not problems, problems
    assert not [e for e in c.events() if e["event"] == "agent_dead"]
    assert c.stop().returncode == 0
    assert_no_leftovers(c)


def test_agent_waiting_for_a_cpu_keeps_its_node(make_cluster):
    """An agent of the master's host that misses its pings only for want
    of a CPU is not declared dead while its main thread is runnable: here
    the drained node1's agent runs at SCHED_IDLE while two tasks on node2
    keep 24 processes busy for 2.5 s (5 heartbeat rounds; 8 are
    spared)."""
    c = make_cluster(nodes=2, workers_per_node=2, heartbeat_ms=500)
    c.start()
    r = c.cli("drain", "-c", c.config, "node1")
    assert r.returncode == 0, r.stderr
    st = c.status()
    agent = node_of(st, "node1")["agent_pid"]
    node2 = {w["id"] for w in slots_of(st, "node2")}
    for tid in os.listdir(f"/proc/{agent}/task"):
        os.sched_setscheduler(int(tid), os.SCHED_IDLE, os.sched_param(0))
    t0 = time.time()
    # Twelve busy loops per task: a SCHED_IDLE sleeper here waited up
    # to 0.5 s for a CPU beside 16 of them, 0.3 s beside 8.
    busy = ('for k in 1 2 3 4 5 6 7 8 9 10 11 12; do '
            'timeout 2.5 sh -c "while :; do :; done" & done; wait; '
            'echo "busy-$0"')
    rc, out, err = c.submit({"name": "busy", "tasks": [
        {"type": "exec", "argv": ["sh", "-c", busy, str(i)]}
        for i in range(2)]}, wait=True, timeout=60)
    assert rc == 0, (out, err)
    res = c.results(batch_id_of(out))
    assert not check_exactly_once(res, 2), check_exactly_once(res, 2)
    assert all(x["worker"] in node2 for x in res), (res, node2)
    assert not events_of(c, "agent_dead", t0), events_of(c, "agent_dead", t0)
    st = c.status()
    assert node_of(st, "node1")["agent_pid"] == agent and pid_alive(agent)
    # The rule did the sparing: without it, the agent is declared dead.
    assert st["counters"]["agents_starved"] >= 1, st["counters"]
    r = c.stop(timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
