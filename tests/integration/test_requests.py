"""Requests of any size the bounds allow, and clients that outlive their
master's connection.

A command-line batch goes to the master as the bytes after a short
request line, as a batch file does; a request past a bound gets the
master's error (exit 2), never a signal; a master killed while a
command waits for it, or while a command is still sending, ends that
command with a message and exit 1."""
import json
import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import check_exactly_once, pid_alive, wait_until
from remote_client import Munged, masked


def timed(argv, env, timeout=600):
    """Run ARGV under /usr/bin/time: (CompletedProcess, seconds, peak
    RSS in KiB)."""
    r = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M", *map(str, argv)],
                       capture_output=True, text=True, env=env,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    line = [x for x in r.stderr.splitlines() if x.startswith("TIME ")][-1]
    _, secs, kib = line.split()
    r.stderr = r.stderr.replace(line + "\n", "")
    return r, float(secs), int(kib)


@pytest.mark.long
@pytest.mark.timeout(400)
def test_million_task_array_taken_and_cancelled(make_cluster, tmp_path):
    """`submit --array 1-1000000` is taken (the CLI in seconds and under
    300 MiB: some 100 MB of batch text here, where it built 800 MiB of
    JSON objects for the shorter `true {}`); cancelled at once, every
    task is accounted for and none ran twice."""
    c = make_cluster(nodes=2, workers_per_node=2)
    c.start()
    ran = tmp_path / "ran"
    n = 1_000_000
    r, secs, kib = timed([c.ftfarm, "submit", "-c", c.config, "--array",
                          f"1-{n}", "--", "sh", "-c", f"echo $0 >> {ran}",
                          "{}"], c.env)
    assert r.returncode == 0, r.stderr
    bid = int(r.stdout.split()[0])
    assert secs < 60 and kib < 300 * 1024, (secs, kib)
    row = [b for b in c.status()["batches"] if b["id"] == bid][0]
    assert row["total"] == n, row
    assert wait_until(lambda: ran.exists() and ran.stat().st_size > 0, 60)
    r = c.cli("cancel", "-c", c.config, bid, "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    ans = json.loads(r.stdout)
    r = c.cli("wait", "-c", c.config, bid, timeout=300)
    assert r.returncode == 1 and "failed of 1000000" in r.stderr, r.stderr
    row = [b for b in c.status()["batches"] if b["id"] == bid][0]
    assert row["state"] == "cancelled" and row["done"] == n, row
    res = c.results(bid)
    tasks = [x["task"] for x in res]
    assert len(res) == n and len(set(tasks)) == n, len(res)
    ok = {x["task"] for x in res if x["status"] == "ok"}
    cancelled = [x for x in res if x.get("reason") == "cancelled"]
    assert len(ok) + len(cancelled) == n
    assert len(cancelled) == ans["queued"] + ans["running"], ans
    # The commands that ran: each once; every ok one among them.
    lines = ran.read_text().split()
    assert len(lines) == len(set(lines)), "a task ran twice"
    ran_tasks = {int(x) - 1 for x in lines}
    assert ok <= ran_tasks and len(ran_tasks - ok) <= ans["running"], \
        (len(ok), len(ran_tasks), ans)


def run_command_batch(c, n):
    r = c.cli("submit", "-c", c.config, "--wait", "--array", f"1-{n}", "--",
              "echo", "{}", timeout=1800)
    assert r.returncode == 0, r.stderr
    bid = int(r.stdout.split()[0])
    res = c.results(bid)
    problems = check_exactly_once(res, n, lambda i: f"{i + 1}\n")
    assert not problems, problems


@pytest.mark.heavy
@pytest.mark.timeout(300)
def test_command_batch_of_4000_runs_once_each(make_cluster):
    # 100,000 in `make test-long` (below): the same path at scale.
    c = make_cluster(nodes=2, workers_per_node=2)
    c.start()
    run_command_batch(c, 4_000)


@pytest.mark.long
@pytest.mark.timeout(1800)
def test_command_batch_of_100000_runs_once_each(make_cluster):
    c = make_cluster(nodes=2, workers_per_node=2)
    c.start()
    run_command_batch(c, 100_000)


def bounded_cluster(make_cluster, **control):
    c = make_cluster(nodes=1, control={"max_request_bytes": 1024,
                                       "max_batch_bytes": 4096, **control})
    c.start()
    return c


def check_refusals(c, run):
    """A line and a body past the bounds, through RUN(args): the master's
    message, exit 2, nothing queued, the master as it was."""
    r = run(["drain", "-c", c.config, "n" * 5000])
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "request too long" in r.stderr and "max_request_bytes" in \
        r.stderr, r.stderr
    # 2.5 MB of tasks against 4096 bytes; then a file past the bound.
    r = run(["submit", "-c", c.config, "--array", "1-60000", "--", "true",
             "{}"])
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "max_batch_bytes" in r.stderr and "takes 1 to 4096" in \
        r.stderr, r.stderr
    big = c.write_batch({"name": "big", "tasks": [
        {"type": "exec", "argv": ["true", str(i)]} for i in range(100000)]})
    r = run(["submit", "-c", c.config, big])
    assert r.returncode == 2 and "max_batch_bytes" in r.stderr, \
        (r.returncode, r.stderr)
    assert pid_alive(c.master_pid)
    assert c.status()["batches"] == []
    # What fits is taken.
    r = run(["submit", "-c", c.config, "--wait", "--array", "1-5", "--",
             "true"])
    assert r.returncode == 0, r.stderr


@pytest.mark.timeout(120)
def test_requests_past_the_bounds(make_cluster):
    """(SIGPIPE killed the CLI here: exit 141, nothing printed.)"""
    c = bounded_cluster(make_cluster)
    check_refusals(c, lambda args: c.cli(*args))
    # A client that sends a line past the bound and never looks: the
    # master answers, closes, and goes on.
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(c.state_dir / "control.sock"))
    try:
        s.sendall(b'{"v":1,"cmd":"status","x":"' + b"y" * (1 << 20))
    except (BrokenPipeError, ConnectionResetError):
        pass
    ans = json.loads(s.makefile("rb").readline())
    s.close()
    assert ans["ok"] is False and ans["exit"] == 2 and \
        "request too long" in ans["error"], ans
    assert c.status()["workers"]


@pytest.mark.timeout(120)
def test_requests_past_the_bounds_over_tcp(make_cluster):
    munged = Munged().start()
    try:
        c = bounded_cluster(make_cluster, listen="127.0.0.1:0",
                            munge_socket=str(munged.socket))
        check_refusals(c, lambda args: subprocess.run(
            masked([c.ftfarm, *args], c.state_dir), capture_output=True,
            text=True, env=c.env, timeout=60, stdin=subprocess.DEVNULL))
        assert c.master_log().count(" authenticated as uid ") >= 4
    finally:
        munged.stop()


@pytest.mark.timeout(240)
def test_commands_outlive_a_killed_master(make_cluster, tmp_path):
    """Every command that talks to the master, started while it is
    stopped (its request sent, or still being sent), or streaming from
    it, then the master SIGKILLed: a message and exit 1 (stop: its own
    way, 0), never a signal."""
    c = make_cluster(nodes=2, heartbeat_ms=500)
    c.start()
    r = c.cli("submit", "-c", c.config, "--array", "1-3", "--", "sleep", "1")
    assert r.returncode == 0, r.stderr
    words = tmp_path / "words.txt"
    words.write_text("a b c\n")
    big = c.write_batch({"name": "big", "tasks": [
        {"type": "exec", "argv": ["true", str(i)]} for i in range(300000)]})
    no = ["--reconnect-timeout", "0"]
    cmds = {
        "status": ["status"], "nodes": ["nodes", "--json"],
        "drain": ["drain", "node1"], "undrain": ["undrain", "node1"],
        "reboot": ["reboot", "node1"], "cancel": ["cancel", "1"],
        "rotate": ["rotate"], "wait": ["wait", "1", *no],
        "batch": ["batch", "1", "--json", *no], "forget": ["forget", "1"],
        "cat": ["cat", "99"],       # no results: it asks the master why
        "submit": ["submit", *no, "--", "true"],
        # Bodies of megabytes: still being written when the master dies.
        "submit-array": ["submit", *no, "--array", "1-300000", "--",
                         "true", "{}"],
        "submit-file": ["submit", *no, big],
        "wordcount": ["wordcount", *no, "-o", tmp_path / "wc.out", words],
        "events": ["events"],
    }
    streams = {"events --follow": ["events", "--follow"], "watch": ["watch"]}

    def start(args):
        return subprocess.Popen([c.ftfarm, args[0], "-c", c.config,
                                 *map(str, args[1:])],
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=c.env,
                                stdin=subprocess.DEVNULL)

    pid = c.master_pid
    live = {k: start(v) for k, v in streams.items()}
    time.sleep(1)
    os.kill(pid, signal.SIGSTOP)
    procs = {k: start(v) for k, v in cmds.items()}
    try:
        time.sleep(2)
        assert all(p.poll() is None for p in procs.values()), \
            {k: p.returncode for k, p in procs.items()}
    finally:
        os.kill(pid, signal.SIGKILL)
    procs.update(live)
    out = {k: (p.wait(timeout=120), p.stderr.read()) for k, p in
           procs.items()}
    for k, (rc, err) in out.items():
        assert rc == 1, (k, rc, err)
        assert err.startswith("ftfarm: ") or "\nftfarm: " in err, (k, err)
    # stop, its request sent to the next master (the supervisor's), which
    # is then killed: it stops the cluster by itself.
    assert wait_until(lambda: c.master_pid != pid and pid_alive(
        c.master_pid) and c.cli("status", "-c", c.config).returncode == 0
        or c._record_pids(), 90, 0.5)
    pid = c.master_pid
    os.kill(pid, signal.SIGSTOP)
    p = start(["stop"])
    try:
        time.sleep(2)
        assert p.poll() is None
    finally:
        os.kill(pid, signal.SIGKILL)
    out, err = p.communicate(timeout=120)
    c.started = False
    assert p.returncode == 0 and "stopped" in out, (p.returncode, err)
    assert not c.leftovers(), c.leftovers()


@pytest.mark.timeout(120)
def test_followers_end_with_a_stop(make_cluster):
    """`events --follow` and `watch` end with 0 when the master stops
    (it says so before it closes), where a master that died is exit 1."""
    c = make_cluster(nodes=1)
    c.start()
    procs = {k: subprocess.Popen([c.ftfarm, *args, "-c", c.config],
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True,
                                 env=c.env, stdin=subprocess.DEVNULL)
             for k, args in (("follow", ["events", "--follow"]),
                             ("watch", ["watch"]))}
    time.sleep(1)
    r = c.stop()
    assert r.returncode == 0, r.stderr
    for k, p in procs.items():
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0, (k, p.returncode, err)
    assert "the master stopped" in err, err
