"""A munged that hangs (SIGSTOP) while the master serves TCP clients:
the master decodes credentials on threads of their own, so its loop
(heartbeats, results, unix-socket clients) goes on, TCP clients are told
munged did not answer, and they work again once munged does.

The master's munged and the client's are two daemons of one key, as on
two hosts of a cluster: the client runs masked (remote_client.masked)
with its own munged at the config's munge_socket, so stopping the
master's does not stop the client's encoding."""
import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import check_exactly_once, exec_task, pid_alive, wait_until
from remote_client import Munged, masked

STOPPED_S = 30          # how long munged stays stopped
TCP_VERDICT_S = 10      # what the CLI waits for the greeting's verdict
TASKS = 600             # sleep 0.25 on 4 workers: about 40 s


@pytest.fixture
def munged():
    m = Munged().start()
    yield m
    if m.proc and m.proc.poll() is None:
        os.kill(m.proc.pid, signal.SIGCONT)
    m.stop()


@pytest.fixture
def own_munged(munged):
    """The client host's munged: the same key, another daemon."""
    m = Munged(key=munged.key).start()
    yield m
    m.stop()


def threads_of(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def fds_of(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class StatusPoller(threading.Thread):
    """`ftfarm status` over the unix socket, again and again: each call's
    exit status and seconds."""

    def __init__(self, c):
        super().__init__(daemon=True)
        self.c = c
        self.calls = []
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            t0 = time.monotonic()
            r = self.c.cli("status", "-c", self.c.config, "--json",
                           timeout=60)
            self.calls.append((r.returncode, time.monotonic() - t0,
                               r.stderr))
            self.done.wait(0.3)

    def stop(self):
        self.done.set()
        self.join(timeout=90)


def tcp_clients(c, munged, own, n):
    """N `ftfarm status` over TCP at once: [(rc, seconds, stderr)]."""
    argv = masked([c.ftfarm, "status", "-c", c.config], c.state_dir,
                  munge=(munged.socket, own.socket))
    t0 = time.monotonic()
    procs = [subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, env=c.env,
                              stdin=subprocess.DEVNULL) for _ in range(n)]
    out = []
    for p in procs:
        err = p.communicate(timeout=60)[1]
        out.append((p.returncode, time.monotonic() - t0, err))
    return out


def no_heartbeat_missed(c):
    """Problems with heartbeats: deaths and late agents in the events,
    the counters and the log (an empty list when there is none)."""
    bad = [e for e in c.events() if e["event"] in (
        "worker_dead", "agent_dead", "node_suspect", "node_down",
        "node_inactive", "worker_inactive")]
    st = c.status()
    problems = [f"event {e}" for e in bad]
    if st["counters"]["agents_starved"]:
        problems.append(f"counters {st['counters']}")
    log = c.master_log()
    for words in ("missed a ping", "late with a pong"):
        if words in log:
            problems.append(f"master.log: {words}")
    return problems


@pytest.mark.long
@pytest.mark.timeout(400)
def test_munged_stopped_under_load(make_cluster, munged, own_munged):
    c = make_cluster(heartbeat_ms=500, nodes=2, workers_per_node=2,
                     control={"listen": "127.0.0.1:0",
                              "munge_socket": str(munged.socket)})
    c.start()
    ok = tcp_clients(c, munged, own_munged, 1)
    assert ok[0][0] == 0, ok
    pid = c.master_pid
    threads0, fds0 = threads_of(pid), fds_of(pid)

    r = c.cli("submit", "-c", c.config, c.write_batch({
        "name": "load", "tasks": [exec_task("sleep 0.25; echo $0", i)
                                  for i in range(TASKS)]}))
    assert r.returncode == 0, r.stderr
    bid = int(r.stdout.split()[0])
    poller = StatusPoller(c)
    poller.start()
    try:
        assert wait_until(lambda: len(c.results(bid)) >= 20, 60)
        os.kill(munged.proc.pid, signal.SIGSTOP)
        t_stop = time.monotonic()
        done_before = len(c.results(bid))
        refused = []
        for at in (1, 14):
            time.sleep(max(0, t_stop + at - time.monotonic()))
            # Four at once: both decoding threads held, two queued.
            clients = threading.Thread(target=lambda: refused.extend(
                tcp_clients(c, munged, own_munged, 4)))
            clients.start()
            time.sleep(3)
            # Stuck decodes hold the master's threads, never add some.
            assert threads_of(pid) == threads0, (threads_of(pid), threads0)
            clients.join(timeout=60)
        time.sleep(max(0, t_stop + STOPPED_S - time.monotonic()))
        done_during = len(c.results(bid)) - done_before
        os.kill(munged.proc.pid, signal.SIGCONT)
        t_cont = time.monotonic()
        # TCP clients work again, the master as it was.
        assert wait_until(lambda: tcp_clients(c, munged, own_munged,
                                              1)[0][0] == 0, 20, 1)
        took = time.monotonic() - t_cont
    finally:
        poller.stop()

    for rc, secs, err in refused:
        assert rc == 1 and "munged" in err, (rc, err)
        assert secs < TCP_VERDICT_S + 2, (secs, err)
    assert any("did not answer within 5 s" in e for _, _, e in refused), \
        refused
    assert took < 15, took
    # Results went on while munged was stopped (16 a second expected).
    assert done_during >= 50, done_during
    # Unix-socket clients were served throughout, none held up.
    assert poller.calls and all(rc == 0 for rc, _, _ in poller.calls), \
        [x for x in poller.calls if x[0] != 0][:3]
    slowest = max(secs for _, secs, _ in poller.calls)
    assert slowest < 5, slowest
    r = c.cli("wait", "-c", c.config, bid, timeout=300)
    assert r.returncode == 0, r.stderr
    res = c.results(bid)
    assert not check_exactly_once(res, TASKS, lambda i: f"{i}\n"), \
        check_exactly_once(res, TASKS, lambda i: f"{i}\n")
    assert not no_heartbeat_missed(c), no_heartbeat_missed(c)
    # Nothing the stuck decodes took is kept.
    assert wait_until(lambda: threads_of(pid) == threads0 and
                      fds_of(pid) == fds0, 15), \
        (threads_of(pid), threads0, fds_of(pid), fds0)
    assert "munged did not answer within 5 s" in c.master_log()


@pytest.mark.timeout(200)
def test_stop_with_a_decode_stuck_in_munged(make_cluster, munged,
                                            own_munged):
    """`ftfarm stop` while a decode is stuck in a stopped munged (libmunge
    holds such a call about 10 s): the master exits as promptly as
    without one."""
    c = make_cluster(heartbeat_ms=500, nodes=1,
                     control={"listen": "127.0.0.1:0",
                              "munge_socket": str(munged.socket)})
    c.start()
    assert tcp_clients(c, munged, own_munged, 1)[0][0] == 0
    pid = c.master_pid
    os.kill(munged.proc.pid, signal.SIGSTOP)
    argv = masked([c.ftfarm, "status", "-c", c.config], c.state_dir,
                  munge=(munged.socket, own_munged.socket))
    client = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, env=c.env,
                              stdin=subprocess.DEVNULL)
    try:
        time.sleep(0.5)          # its credential is in munged's hands
        assert client.poll() is None
        t0 = time.monotonic()
        r = c.stop()
        assert r.returncode == 0, r.stderr
        assert wait_until(lambda: not pid_alive(pid), 30)
        took = time.monotonic() - t0
    finally:
        os.kill(munged.proc.pid, signal.SIGCONT)
        err = client.communicate(timeout=60)[1]
    assert client.returncode == 1 and err, err
    # libmunge gives up on a stopped munged after about 10 s: a stop that
    # waited for the decode would take that long at least.
    assert took < 8, took
