"""A worker process that dies on the master's machine is seen at once (the
master watches it through a pidfd), not at its next request deadline.
With pings every 5 s, which would take 3.75 s or more to notice the death,
a SIGKILLed worker is declared dead at once, its task reassigned and done
exactly once, and a replacement spawned; workers that exit because they
were told to stop are not taken for dead."""
import os
import signal
import time

import pytest

from conftest import (LIVE_STATES, batch_id_of, check_lost_worker_batch,
                      pid_alive, wait_until)

pytestmark = pytest.mark.timeout(90)

HEARTBEAT_MS = 5000
# A ping answered just before the kill leaves the next round 5 s away,
# and its deadline 3.75 s after that; the first ping after the kill
# cannot miss its deadline sooner than 3.75 s.  Half of that leaves room
# for a loaded machine and still tells the two apart.
SEEN_WITHIN = 0.75 * HEARTBEAT_MS / 1000 / 2
N = 6


@pytest.mark.cluster_opts(heartbeat_ms=HEARTBEAT_MS)
def test_killed_worker_seen_at_once(cluster):
    c = cluster
    rc, out, err = c.submit({"name": "killed", "tasks": [
        {"type": "exec",
         "argv": ["sh", "-c", 'sleep 1.5; printf "k-%s\\n" "$0"', str(i)]}
        for i in range(N)]}, wait=False)
    assert rc == 0, err
    bid = batch_id_of(out)

    def busy():
        ws = [w for w in c.status()["workers"] if w["state"] == "busy"]
        return ws[0] if ws else None

    w = wait_until(busy, 10)
    assert w, f"no busy worker: {c.status()['workers']}"
    slot, pid = w["id"], w["pid"]
    t_kill = time.time()
    os.kill(pid, signal.SIGKILL)

    def death():
        return next((e for e in c.events() if e["event"] == "worker_dead"
                     and e.get("pid") == pid), None)

    dead = wait_until(death, 10)
    assert dead, f"worker {slot} (pid {pid}) never declared dead"
    after = dead["ts"] - t_kill
    print(f"declared dead {after:.3f} s after SIGKILL: {dead}")
    assert dead["worker"] == slot
    assert dead["reason"] == "its process exited", dead
    assert dead["killed"] is False, dead
    assert after <= SEEN_WITHIN, \
        f"declared dead {after:.2f} s after SIGKILL (the pidfd should " \
        f"have told at once; deadlines take {0.75 * HEARTBEAT_MS} ms)"

    check_lost_worker_batch(c, bid, N, lambda i: f"k-{i}\n", slot)

    def respawned():
        st = c.status()
        x = [x for x in st["workers"] if x["id"] == slot][0]
        return x if x["state"] in LIVE_STATES and x["pid"] != pid else None

    x = wait_until(respawned, 30)
    assert x, f"worker {slot} not respawned: {c.status()['workers']}"
    assert x["respawns"] == 1 and pid_alive(x["pid"]), x
    assert c.status()["counters"]["exits_seen"] == 1

    # Told to stop, the workers exit: that is no death.
    assert c.stop().returncode == 0
    deaths = [e for e in c.events() if e["event"] == "worker_dead"]
    assert [e["pid"] for e in deaths] == [pid], deaths
