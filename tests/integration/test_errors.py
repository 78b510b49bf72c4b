"""Bad input: config files, batch files and control-socket requests.

Each error is one line naming the file, line:column and the key, with exit
status 2; nothing is started for a bad config; a running master survives
every bad batch and bad request and keeps its work."""
import json
import re
import socket
import subprocess
import time
import uuid

import pytest

from conftest import (batch_id_of, exec_task, pid_alive, tagged_pids,
                      wait_until)

pytestmark = pytest.mark.timeout(120)

@pytest.fixture
def run(bins):
    """run(args, env=None) -> CompletedProcess of bin/ftfarm ARGS."""
    ftfarm = str(bins["openmpi"] / "ftfarm")

    def run_(args, env=None, timeout=60):
        return subprocess.run([ftfarm, *map(str, args)], capture_output=True,
                              text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL)
    return run_


def pos_of(text, needle, nth=0):
    """1-based (line, column) of the NTH occurrence of NEEDLE in TEXT."""
    i = -1
    for _ in range(nth + 1):
        i = text.index(needle, i + 1)
    line = text.count("\n", 0, i) + 1
    col = i - (text.rfind("\n", 0, i) + 1) + 1
    return line, col


def one_error_line(r):
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, f"expected one error line, got: {r.stderr!r}"
    return lines[0]


def parse_loc(line, path):
    """FILE:LINE:COL: REST -> (line, col, rest); asserts the file is named."""
    m = re.match(re.escape(str(path)) + r":(\d+):(\d+): (.*)$", line)
    assert m, f"error does not start with {path}:LINE:COL: {line!r}"
    return int(m.group(1)), int(m.group(2)), m.group(3)


# ---- config files ----

GOOD_NODE = '{"name": "n1", "host": "localhost", "workers": 1}'


def config_cases(sd):
    """(id, text, expected (line, col) or None, key, words)."""
    return [
        ("missing_state_dir",
         '{\n  "name": "x",\n  "nodes": [' + GOOD_NODE + ']\n}\n',
         (1, 1), "state_dir", "missing"),
        ("workers_not_int",
         '{\n  "state_dir": "' + sd + '",\n  "nodes": [\n'
         '    {"name": "n1",\n     "workers": "3"}\n  ]\n}\n',
         ['"workers"', '"3"'], "nodes[0].workers", "integer"),
        ("unknown_top_key",
         '{\n  "state_dir": "' + sd + '",\n  "nodes": [' + GOOD_NODE +
         '],\n  "heartbeat": 100\n}\n',
         ['"heartbeat"'], "heartbeat", "unknown"),
        ("unknown_node_key",
         '{\n  "state_dir": "' + sd + '",\n  "nodes": [\n    ' + GOOD_NODE +
         ',\n    {"name": "n2",\n     "cores": 4}\n  ]\n}\n',
         ['"cores"'], "nodes[1].cores", "unknown"),
        ("bad_launch",
         '{\n  "state_dir": "' + sd + '",\n  "launch": "magic",\n'
         '  "nodes": [' + GOOD_NODE + ']\n}\n',
         ['"launch"', '"magic"'], "launch", "static"),
        ("heartbeat_out_of_range",
         '{\n  "state_dir": "' + sd + '",\n  "heartbeat_ms": 0,\n'
         '  "nodes": [' + GOOD_NODE + ']\n}\n',
         ['"heartbeat_ms"', '0,'], "heartbeat_ms", ""),
    ]


@pytest.mark.parametrize("case", range(6))
def test_config_errors(tmp_path, run, case):
    sd = str(tmp_path / "state")
    cid, text, where, key, word = config_cases(sd)[case]
    path = tmp_path / f"{cid}.json"
    path.write_text(text)
    tag = uuid.uuid4().hex
    env = {"PATH": "/usr/bin:/bin", "FTFARM_TEST_TAG": tag}
    for cmd in ("check", "start"):
        t0 = time.monotonic()
        r = run([cmd, "-c", path], env=env)
        assert r.returncode == 2, f"{cmd}: rc {r.returncode}: {r.stderr}"
        assert time.monotonic() - t0 < 10
        line, col, rest = parse_loc(one_error_line(r), path)
        if isinstance(where, tuple):
            want = [where]
        else:
            # The key's position, or its value's.
            want = [pos_of(text, w) for w in where]
        assert (line, col) in want, \
            f"{cmd}: position {line}:{col}, expected one of {want}: {rest}"
        assert key in rest, f"{cmd}: key {key} not named: {rest!r}"
        assert word in rest, f"{cmd}: {word!r} not said: {rest!r}"
        assert not tagged_pids(tag), "a bad config left processes"
    assert not (tmp_path / "state" / "control.sock").exists()


def test_config_bad_json(tmp_path, run):
    sd = str(tmp_path / "state")
    text = ('{\n  "state_dir": "' + sd + '",\n  "nodes": [' + GOOD_NODE +
            ']\n  "name": "x"\n}\n')      # missing comma before line 4
    path = tmp_path / "badjson.json"
    path.write_text(text)
    for cmd in ("check", "start"):
        r = run([cmd, "-c", path])
        assert r.returncode == 2, r
        line, col, rest = parse_loc(one_error_line(r), path)
        assert line == 4, f"syntax error reported at line {line}: {rest}"
        assert 1 <= col <= len('  "name": "x"') + 1
        assert "JSON" in rest or "json" in rest, rest


@pytest.mark.parametrize("kind", ["directory", "missing", "empty"])
def test_config_unreadable(tmp_path, run, kind):
    if kind == "directory":
        path = tmp_path / "adir"
        path.mkdir()
    elif kind == "missing":
        path = tmp_path / "nope.json"
    else:
        path = tmp_path / "empty.json"
        path.write_text("")
    tag = uuid.uuid4().hex
    env = {"PATH": "/usr/bin:/bin", "FTFARM_TEST_TAG": tag}
    for cmd in ("check", "start"):
        r = run([cmd, "-c", path], env=env)
        assert r.returncode == 2, f"{cmd}: rc {r.returncode}: {r.stderr}"
        line = one_error_line(r)
        assert line.startswith(str(path)), line
        assert not tagged_pids(tag)


# ---- batch files against a running cluster ----

def batch_text(task3):
    """A batch with one task per line; task 3 is TASK3 (raw JSON text)."""
    tasks = ['    {"type": "exec", "argv": ["echo", "t%d"]}' % i
             for i in range(5)]
    tasks[3] = "    " + task3
    return '{\n  "name": "bad",\n  "tasks": [\n' + ",\n".join(tasks) + \
        '\n  ]\n}\n'


BATCH_CASES = [
    # id, text, position needle (None: check the line only), key path, words
    ("unknown_type", batch_text('{"type": "teleport", "argv": ["x"]}'),
     '"type": "teleport"', "tasks[3].type", "teleport"),
    ("missing_argv", batch_text('{"type": "exec"}'),
     '{"type": "exec"}', "tasks[3]", "argv"),
    ("argv_not_list", batch_text('{"type": "exec", "argv": "echo hi"}'),
     '"argv": "echo hi"', "tasks[3].argv", "array"),
    ("argv_not_strings", batch_text('{"type": "exec", "argv": ["echo", 7]}'),
     '7]', "tasks[3].argv[1]", "string"),
    ("unknown_task_key",
     batch_text('{"type": "exec", "argv": ["x"], "retries": 3}'),
     '"retries"', "tasks[3].retries", "unknown"),
    ("empty_tasks", '{\n  "name": "e",\n  "tasks": []\n}\n',
     '"tasks"', "tasks", "task"),
    ("unknown_batch_key", '{\n  "name": "e",\n  "urgency": 1,\n'
     '  "tasks": [{"type": "sleep", "seconds": 0}]\n}\n',
     '"urgency"', "urgency", "unknown"),
    ("priority_out_of_range", '{\n  "name": "e",\n  "priority": 999,\n'
     '  "tasks": [{"type": "sleep", "seconds": 0}]\n}\n',
     '"priority"', "priority", "between"),
    ("cpus_not_integer",
     batch_text('{"type": "exec", "argv": ["x"], "cpus": "4"}'),
     '"cpus"', "tasks[3].cpus", "integer"),
    ("bad_json", batch_text('{"type": "exec" "argv": ["x"]}'),
     None, None, "JSON"),
    ("not_an_object", '[\n  {"type": "sleep", "seconds": 0}\n]\n',
     None, None, "object"),
]


def test_bad_batches_leave_master_running(cluster):
    master = cluster.master_pid
    assert master and pid_alive(master)
    for cid, text, needle, key, word in BATCH_CASES:
        path = cluster.write_batch(text, name=f"{cid}.json")
        for args in (["check", "-c", cluster.config, path],
                     ["submit", "-c", cluster.config, path, "--wait"]):
            r = cluster.cli(*args, timeout=30)
            assert r.returncode == 2, \
                f"{cid}: {args[0]} rc {r.returncode}: {r.stdout} {r.stderr}"
            line, col, rest = parse_loc(one_error_line(r), path)
            if needle is not None:
                want = pos_of(text, needle)
                if key == "tasks[3].argv[1]":
                    want = [want, pos_of(text, '"argv": ["echo", 7]')]
                else:
                    want = [want]
                assert (line, col) in want, \
                    f"{cid}: at {line}:{col}, expected {want}: {rest}"
                assert rest.startswith(key + ":"), \
                    f"{cid}: key path {key} not named first: {rest!r}"
            elif cid == "bad_json":
                assert line == 7, f"{cid}: line {line}: {rest}"
            assert word.lower() in rest.lower(), f"{cid}: {rest!r}"
            if args[0] == "submit":
                assert r.stdout == "", f"{cid}: submit printed an id"
    # Nothing was queued, the master runs, and good work still gets done.
    st = cluster.status()
    assert st["batches"] == [], st["batches"]
    assert pid_alive(master)
    assert len(cluster.worker_pids(st)) == 3
    n = 30
    rc, out, err = cluster.submit({"name": "good", "tasks": [
        exec_task("echo good-$0", i) for i in range(n)]})
    assert rc == 0, err
    res = cluster.results(batch_id_of(out))
    assert sorted(r["task"] for r in res) == list(range(n))
    for r in res:
        assert r["status"] == "ok" and r["stdout"] == f"good-{r['task']}\n"


# ---- the control socket ----

def recv_line(sock, timeout=10):
    sock.settimeout(timeout)
    buf = b""
    while b"\n" not in buf:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return None
        if not chunk:
            return None if not buf else buf
        buf += chunk
    return buf.split(b"\n", 1)[0]


def ask(path, payload, timeout=10):
    """Send PAYLOAD (bytes, a line) on a new connection: the answer as a
    dict, or None if the master closed the connection."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(path))
        s.settimeout(timeout)
        try:
            s.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            return None
        line = recv_line(s, timeout)
        return None if line is None else json.loads(line)
    finally:
        s.close()


NL = b"\n"
GARBAGE = [
    b"hello world\n",
    b"\n",
    b"[1, 2, 3]\n",
    b'"status"\n',
    b"\xff\xfe\x00garbage\n",
    b'{"cmd": "status"}\n',
    b'{"v": 1, "cmd": "nope"}\n',
    b'{"v": 1, "cmd": 7}\n',
    b'{"v": 99, "cmd": "status"}\n',
    b'{"v": "1", "cmd": "status"}\n',
    b'{"v": 1, "cmd": "submit"}\n',
    b'{"v": 1, "cmd": "submit", "batch": {"tasks": "x"}}\n',
    b'{"v": 1, "cmd": "submit", "batch": {"tasks": []}}\n',
    b'{"v": 1, "cmd": "submit", "batch": {"tasks": [{"type": "exec", '
    b'"argv": "ls"}]}}\n',
    b'{"v": 1, "cmd": "submit", "batch": [1]}\n',
    b'{"v": 1, "cmd": "wait", "batch": 424242}\n',
    b'{"v": 1, "cmd": "wait", "batch": "x"}\n',
    b'{"v": 1, "cmd": "log_level", "level": "loud"}\n',
    b'{"v": 1, "v": 1, "cmd": "status"}\n',
]


def test_control_socket_garbage(cluster):
    sock = cluster.state_dir / "control.sock"
    assert sock.exists()
    master = cluster.master_pid

    # One connection each.
    for g in GARBAGE:
        ans = ask(sock, g)
        assert ans is not None, f"{g[:60]!r}: connection closed, no answer"
        assert ans.get("ok") is False, f"{g[:60]!r}: answered {ans}"
        assert isinstance(ans.get("error"), str) and ans["error"], ans

    # The batch error names the key path.
    ans = ask(sock, GARBAGE[13])
    assert "tasks[0].argv" in ans["error"], ans

    # All on one connection, pipelined: one answer per line, in order,
    # and the connection still serves a good request after them.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(sock))
    s.sendall(b"".join(GARBAGE) + b'{"v": 1, "cmd": "status"}\n')
    s.settimeout(10)
    buf = b""
    while buf.count(b"\n") < len(GARBAGE) + 1:
        chunk = s.recv(1 << 20)
        assert chunk, f"connection closed after {buf.count(NL)} answers"
        buf += chunk
    answers = [json.loads(x) for x in buf.split(b"\n") if x]
    s.close()
    assert len(answers) == len(GARBAGE) + 1
    assert all(a.get("ok") is False for a in answers[:-1]), answers
    assert answers[-1].get("ok") is True and "workers" in answers[-1]

    # A client that connects and says nothing, and one that hangs up in
    # the middle of a line, do not block the others.
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    idle.connect(str(sock))
    half = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    half.connect(str(sock))
    half.sendall(b'{"v": 1, "cmd": "sta')
    half.close()
    t0 = time.monotonic()
    st = cluster.status()
    assert time.monotonic() - t0 < 5
    assert len(cluster.worker_pids(st)) == 3

    # A 5 MB line: an error answer or a closed connection.
    big = b'{"v": 1, "cmd": "status", "pad": "' + b"x" * (5 << 20) + b'\n'
    ans = ask(sock, big, timeout=30)
    assert ans is None or ans.get("ok") is False, str(ans)[:200]
    big = b"y" * (5 << 20) + b"\n"
    ans = ask(sock, big, timeout=30)
    assert ans is None or ans.get("ok") is False, str(ans)[:200]
    idle.close()

    # The master still serves: status, and a batch end to end.
    assert pid_alive(master)
    st = cluster.status()
    assert st["batches"] == [], "a bad request created a batch"
    assert len(cluster.worker_pids(st)) == 3
    rc, out, err = cluster.submit({"tasks": [exec_task("echo $0", i)
                                             for i in range(10)]})
    assert rc == 0, err
    res = cluster.results(batch_id_of(out))
    assert sorted((r["task"], r["stdout"]) for r in res) == \
        [(i, f"{i}\n") for i in range(10)]
    # A good raw request works too.
    ans = ask(sock, b'{"v": 1, "cmd": "status"}\n')
    assert ans["ok"] is True and len(ans["workers"]) == 3
    assert wait_until(lambda: pid_alive(master), 1)


def test_good_config_and_batch_check_ok(tmp_path, run):
    """The positive control of the error tests: `check` accepts a good
    config and batch (exit 0), so the errors above come from the input."""
    cfg = tmp_path / "good.json"
    cfg.write_text('{\n  "state_dir": "' + str(tmp_path / "state") +
                   '",\n  "nodes": [' + GOOD_NODE + ']\n}\n')
    b = tmp_path / "b.json"
    b.write_text(batch_text('{"type": "sleep", "seconds": 0}'))
    r = run(["check", "-c", cfg, b])
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout
    assert not (tmp_path / "state" / "control.sock").exists()


def test_control_socket_many_idle_clients(cluster):
    """Clients that connect and say nothing, or wait for a long batch as
    every `ftfarm wait` and `submit --wait` does, must not lock the others
    out: with 70 of them connected, a status request is still answered
    (here within 5 s), and `ftfarm stop` still stops the cluster."""
    sock = str(cluster.state_dir / "control.sock")
    idle = []
    try:
        # 70: more than the master serves at once (64 in control.c), few
        # enough for its listen backlog, so that every connect completes.
        for _ in range(70):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            end = time.monotonic() + 3
            while True:
                try:
                    s.connect(sock)
                    break
                except (BlockingIOError, InterruptedError):
                    if time.monotonic() > end:
                        break
                    time.sleep(0.02)
            idle.append(s)
        time.sleep(0.3)
        t0 = time.monotonic()
        try:
            ans = ask(sock, b'{"v": 1, "cmd": "status"}\n', timeout=5)
            outcome = "answered" if ans and ans.get("ok") else f"got {ans}"
        except socket.timeout:
            outcome = "no answer"
        took = time.monotonic() - t0
    finally:
        for s in idle:
            s.close()
    assert outcome == "answered", \
        f"status request with {len(idle)} idle clients connected: " \
        f"{outcome} after {took:.1f} s"
    r = cluster.stop()
    assert r.returncode == 0
    assert wait_until(lambda: not cluster.leftovers(), 10), \
        cluster.leftovers()
