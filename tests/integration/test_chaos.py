"""Chaos: 2000 exec tasks on 3 workers while a killer SIGKILLs and SIGSTOPs
random live workers at random moments.  Every task must complete exactly
once with its own output, the master must detect every victim (killing the
stopped ones itself: nobody sends SIGCONT), respawn replacements, and leave
no process behind at stop."""
import os
import random
import signal
import subprocess
import threading
import time

import pytest

from conftest import (is_cluster_worker, LIVE_STATES, batch_id_of, check_exactly_once,
                      pid_alive, proc_cmdline, proc_state,
                      wait_until)

pytestmark = pytest.mark.timeout(240)

N = 2000
STALL = 30         # seconds without a task done: the batch is stuck


def task(i):
    # Each task's stdout names it; every 10th sleeps a little so that the
    # batch lasts long enough for many kills.
    script = 'printf "task-%s\\n" "$0"'
    if i % 10 == 0:
        script = "sleep 0.05; " + script
    return {"type": "exec", "argv": ["sh", "-c", script, str(i)]}


def expected_stdout(i):
    return f"task-{i}\n"


class Killer(threading.Thread):
    """Every 0.3-1.0 s, SIGKILL or SIGSTOP one random live worker."""

    def __init__(self, cluster, seed):
        super().__init__(daemon=True)
        self.c = cluster
        self.rng = random.Random(seed)
        self.halt = threading.Event()
        self.hits = []          # (pid, signal name, wall time)
        self.errors = []

    def ours(self, pid):
        return is_cluster_worker(self.c.tag, pid)

    def run(self):
        hit = set()
        sigs = [signal.SIGKILL, signal.SIGSTOP]
        while not self.halt.wait(self.rng.uniform(0.3, 1.0)):
            try:
                st = self.c.status(timeout=20)
            except Exception as e:          # keep going; report at the end
                self.errors.append(repr(e))
                continue
            pids = [w["pid"] for w in st["workers"]
                    if w["state"] in LIVE_STATES and w["pid"] > 0 and
                    w["pid"] not in hit]
            pids = [p for p in pids if pid_alive(p) and
                    proc_state(p) not in ("T", "t") and self.ours(p)]
            if not pids or self.halt.is_set():
                continue
            pid = self.rng.choice(pids)
            # The first two are one of each, then at random.
            sig = sigs[len(self.hits)] if len(self.hits) < 2 else \
                self.rng.choice(sigs)
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                continue
            hit.add(pid)
            self.hits.append((pid, sig.name, time.time()))


def test_chaos_kill_and_stop_workers(make_cluster):
    c = make_cluster(heartbeat_ms=200, respawn_limit=1000,
                     # a task may be lost with several workers in a row;
                     # that is not what this test is about
                     max_attempts=10)
    c.start()
    master = c.master_pid
    assert master and pid_alive(master)
    batch = {"name": "chaos", "tasks": [task(i) for i in range(N)]}
    path = c.write_batch(batch)

    seed = random.randrange(1 << 30)
    killer = Killer(c, seed)
    killer.start()
    t0 = time.monotonic()
    sub = subprocess.Popen([c.ftfarm, "submit", "-c", str(c.config),
                            str(path), "--wait"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=c.env,
                           stdin=subprocess.DEVNULL)
    stall = None
    try:
        # Watch the batch: it must keep making progress.
        last_done, last_change = -1, time.monotonic()
        st = None
        while sub.poll() is None:
            time.sleep(1)
            try:
                st = c.status(timeout=10)
                done = sum(b["done"] for b in st["batches"])
            except Exception as e:      # the master does not answer
                st, done = {"error": repr(e)}, last_done
            if done != last_done:
                last_done, last_change = done, time.monotonic()
            if time.monotonic() - last_change > STALL or \
                    time.monotonic() - t0 > 170:
                stall = (done, st)
                break
    finally:
        killer.halt.set()
        killer.join(30)
    if stall is not None:
        sub.kill()
        sub.communicate()
        done, st = stall
        ev = [e for e in c.events() if e["event"] not in
              ("task_assigned", "task_done")]
        if "error" not in st:
            st = {k: st.get(k) for k in ("queued", "open", "workers",
                                         "batches")}
        pytest.fail(
            f"the batch stalled (or crawled) at {done}/{N} tasks done "
            f"({time.monotonic() - t0:.0f} s, seed {seed}, "
            f"{len(killer.hits)} hits, last {killer.hits[-3:]}):\n"
            f"status: {st}\n"
            f"last events: {ev[-12:]}\n"
            f"master.log: {c.master_log()[-3000:]}")
    out, err = sub.communicate()
    rc = sub.returncode
    took = time.monotonic() - t0
    hits = killer.hits
    info = f"seed {seed}, {len(hits)} hits in {took:.1f} s: {hits}"
    print(info)
    assert rc == 0, f"submit --wait rc {rc}: {out} {err} ({info})"
    assert len(hits) >= 4, f"too few kills landed to mean much ({info})"
    assert {h[1] for h in hits} == {"SIGKILL", "SIGSTOP"}, info

    bid = batch_id_of(out)
    res = c.results(bid)
    problems = check_exactly_once(res, N, expected_stdout)
    assert not problems, f"{problems} ({info})"

    # Every victim was seen dead; the stopped ones were killed by the
    # master (this test never sends SIGCONT).
    def dead_pids():
        return {e["pid"] for e in c.events() if e["event"] == "worker_dead"}

    def replaced(hit):
        """Was the whole job replaced after HIT (the supervisor restarts
        a master that stalls past lease_ms on a loaded machine)?  Its
        workers went with it, declared dead or not."""
        return any(e["event"] == "master_up" and e.get("epoch", 1) > 1 and
                   e["ts"] > hit[2] for e in c.events())

    wait_until(lambda: {h[0] for h in hits} <= dead_pids(), 5)
    missed = [h for h in hits if h[0] not in dead_pids() and
              not replaced(h)]
    assert not missed, f"victims never declared dead: {missed} ({info})"
    wait_until(lambda: not any(pid_alive(h[0]) for h in hits), 5)
    alive = [(h, proc_state(h[0])) for h in hits if pid_alive(h[0])]
    assert not alive, f"victims still alive (stopped ones not killed?): " \
        f"{alive} ({info})"

    # The cluster is back at full strength, through respawns.
    def full():
        st = c.status()
        return sum(w["state"] in LIVE_STATES for w in st["workers"]) == 3

    assert wait_until(full, 20), f"workers not all back: " \
        f"{c.status()['workers']} ({info})"
    # (events.jsonl is written through a buffer: give it a moment)
    wait_until(lambda: len([e for e in c.events() if e["event"] ==
                            "worker_respawned"]) >= len(hits), 5)
    evs = c.events()
    deaths = [e for e in evs if e["event"] == "worker_dead"]
    respawns = [e for e in evs if e["event"] == "worker_respawned"]
    assert len(deaths) >= len(hits) >= 1
    assert len(respawns) >= len(hits), \
        f"{len(respawns)} respawns for {len(hits)} victims ({info})"
    assert sum(w["respawns"] for w in c.status()["workers"]) >= len(hits)
    assert pid_alive(master), "the master died"

    # Stop leaves nothing: no worker ever seen is alive, and no
    # agent or slot of this cluster remains.
    seen = set(c.seen_pids)
    r = c.stop()
    assert r.returncode == 0, r.stderr
    wait_until(lambda: not any(pid_alive(p) for p in seen), 10)
    left = [(p, proc_state(p), proc_cmdline(p)) for p in seen
            if pid_alive(p)]
    assert not left, f"workers alive after stop: {left}"
    wait_until(lambda: not c.leftovers(), 5)
    left = c.leftovers()
    assert not left, f"cluster processes alive after stop: {left}"
    assert not [x for x in c.tagged_leftovers() if "ftfarm-worker" in x[2] or "ftfarm-slot" in x[2]]
