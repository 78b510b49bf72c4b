"""The Python package ftfarm (python/ftfarm): its Client against real
clusters (submit, wait, results, status, cancel, bad batches, a master
killed with SIGKILL under a submit and a wait, control over TCP with
MUNGE from a client that cannot reach the unix socket), and, without a
cluster, its line reader, connection, CRC-32C and config reading (held to
what the ftfarm command says of the same files)."""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import (ROOT, check_exactly_once, exec_task, pid_alive,
                      wait_until)
from remote_client import Munged, run_masked

sys.path.insert(0, str(ROOT / "python"))
import ftfarm  # noqa: E402
from ftfarm import _control, _crc32c, _lease, _lines  # noqa: E402
from ftfarm import _results  # noqa: E402

PY = "/usr/bin/python3"


def echo_batch(n, name="echo", pause=0):
    return {"name": name, "tasks": [
        exec_task(f"sleep {pause}; echo {name} $0" if pause else
                  f"echo {name} $0", i) for i in range(n)]}


def echoed(name):
    return lambda i: f"{name} {i}\n"


# ---- without a cluster: lines, connection, CRC, config ----

def test_line_buffer_cuts_lines_in_any_pieces():
    rng = random.Random(7)
    lines = [b"", b"{}", b"x" * 300_000, b"y" * 3_000_000] + \
        [bytes(rng.randrange(32, 127) for _ in range(rng.randrange(200)))
         for _ in range(500)]
    rng.shuffle(lines)
    data = b"\n".join(lines) + b"\n"
    for piece in (1 << 20, 4096, 7):
        buf, got, k = _lines.LineBuffer(), [], 0
        while k < len(data):
            n = rng.randrange(1, piece + 1)
            buf.feed(data[k:k + n])
            k += n
            while buf.has_line():
                got.append(bytes(buf.next_line()))
            assert buf.next_line() is None
        assert got == lines, piece
        assert len(buf) == 0


def test_line_buffer_bound_and_memory():
    buf = _lines.LineBuffer(max_line=10)
    buf.feed(b"0123456789\nabc")
    assert buf.next_line() == b"0123456789"
    buf.feed(b"x" * 20)
    with pytest.raises(_lines.LineTooLong):
        buf.next_line()
    # A 40 MB answer is read, then the buffer goes back to its first size.
    big = _lines.LineBuffer()
    big.feed(b"z" * 40_000_000 + b"\nnext\n")
    assert len(big.next_line()) == 40_000_000
    assert big.next_line() == b"next"
    big.feed(b"small\n")
    assert big.next_line() == b"small" and len(big._buf) <= 1 << 20


def serve(sock, nreq, chunks, pause=0.0):
    """From a thread: read NREQ request lines from SOCK (kept in the
    list returned), then write CHUNKS (bytes) to it, then close it."""
    got = []

    def run():
        f = sock.makefile("rb")
        got.extend(json.loads(f.readline()) for _ in range(nreq))
        for c in chunks:
            sock.sendall(c)
            time.sleep(pause)
        f.close()
        sock.close()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, got


def test_connection_answers_pushes_and_a_closed_end():
    a, b = socket.socketpair()
    conn = _control.Connection(a, "socketpair")
    pushed = []
    conn.on_push = pushed.append
    big = "s" * 20_000_000
    stream = (b'{"push":"event","event":"e1"}\n{"ok":true,"v":1,"n":1}\n'
              b'{"push":"alive"}\n{"ok":false,"v":1,"error":"no batch 9",'
              b'"exit":7}\n' +
              json.dumps({"ok": True, "v": 1, "big": big}).encode() +
              b'\n{"ok":true,"v":2}\n{"ok":true,"v":1}\n[1]\n')
    # Cut everywhere: inside lines, between them, in the big one.
    cuts = sorted(random.Random(3).sample(range(1, len(stream)), 50))
    t, reqs = serve(b, 3, [stream[i:j] for i, j in
                           zip([0] + cuts, cuts + [len(stream)])], 0.002)
    conn.send_many([{"cmd": "status"}, {"cmd": "wait", "batch": 9}])
    conn.send({"cmd": "submit", "bytes": 0})
    assert conn.answer(10) == {"ok": True, "v": 1, "n": 1}
    assert reqs == [{"cmd": "status", "v": 1},
                    {"cmd": "wait", "batch": 9, "v": 1},
                    {"cmd": "submit", "bytes": 0, "v": 1}]
    with pytest.raises(ftfarm.Error) as e:
        _control.check(conn.answer(10))
    assert str(e.value) == "no batch 9" and e.value.exit == 7
    assert conn.answer(10)["big"] == big
    with pytest.raises(ftfarm.Error, match="incompatible"):
        conn.answer(10)
    assert conn.buffered()
    assert conn.answer(10) == {"ok": True, "v": 1}
    with pytest.raises(_control.Broken, match="malformed line"):
        conn.read(10)
    assert [p["push"] for p in pushed] == ["event", "alive"]
    with pytest.raises(_control.Broken, match="closed the connection"):
        conn.read(10)
    t.join(10)
    assert conn.stale()
    conn.close()


def test_connection_times_out_and_survives_sigpipe():
    a, b = socket.socketpair()
    conn = _control.Connection(a, "socketpair")
    t0 = time.monotonic()
    with pytest.raises(TimeoutError) as e:
        conn.answer(0.3)
    assert isinstance(e.value, ftfarm.Error) and "did not answer" in \
        str(e.value) and time.monotonic() - t0 >= 0.29
    assert not conn.stale()
    b.close()
    assert conn.stale()
    conn.close()
    # A program that lets SIGPIPE kill it: the write raises instead.
    code = ("import signal, socket, sys\n"
            f"sys.path.insert(0, {str(ROOT / 'python')!r})\n"
            "from ftfarm import _control\n"
            "signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"
            "a, b = socket.socketpair(); b.close()\n"
            "c = _control.Connection(a, 'x')\n"
            "try:\n"
            "    c.call({'cmd': 'submit', 'bytes': 1 << 22}, b'x' * (1 << 22),"
            " 5)\n"
            "except _control.Broken as e:\n"
            "    print('raised:', e)\n")
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "raised: cannot send to the master" in \
        r.stdout, (r.returncode, r.stdout, r.stderr)


def test_crc32c_of_known_vectors():
    # RFC 3720 (iSCSI) B.4, and the check value of the Castagnoli CRC.
    assert _crc32c.crc32c(b"123456789") == 0xE3069283
    assert _crc32c.crc32c(bytes(32)) == 0x8A9136AA
    assert _crc32c.crc32c(b"\xff" * 32) == 0x62A8AB43
    assert _crc32c.crc32c(bytes(range(32))) == 0x46DD794E
    assert _crc32c.crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C
    data = bytes(range(256)) * 5 + b"tail"
    assert _crc32c.crc32c(data[700:], _crc32c.crc32c(data[:700])) == \
        _crc32c.crc32c(data)


def cli_error(*args, env=None):
    r = subprocess.run([str(ROOT / "bin" / "ftfarm"), *map(str, args)],
                       capture_output=True, text=True, timeout=30,
                       env=env or {**os.environ, "FTFARM_CONFIG": ""})
    return r.returncode, r.stderr.strip()


def py_error(config):
    with pytest.raises(ftfarm.Error) as e:
        ftfarm.Client(config)
    return e.value.exit, str(e.value)


NODES = '"nodes": [{"name": "n1", "host": "localhost"}]'


@pytest.mark.timeout(60)
@pytest.mark.parametrize("text", [
    '{"state_dir": 3, %s}' % NODES,
    '{%s,\n  "name": "x"}' % NODES,
    '{"state_dir": "s", %s, "lease_ms": "5"}' % NODES,
    '{"state_dir": "s", %s,\n "lease_ms": 5}' % NODES,
    '{"state_dir": "s", %s, "start_timeout_s": 0}' % NODES,
    '{"state_dir": "", %s}' % NODES,
    '{"state_dir": "s", %s,\n "control": {"listen": ":0",\n'
    '   "munge_socket": true}}' % NODES,
    '{"state_dir": "s", %s, "control": []}' % NODES,
    '[1, 2]',
])
def test_config_errors_read_as_the_command_says(tmp_path, text):
    cfg = tmp_path / "bad.json"
    cfg.write_text(text)
    rc, msg = cli_error("check", "-c", cfg)
    assert rc == 2 and py_error(cfg) == (2, msg)


@pytest.mark.timeout(60)
def test_config_that_is_no_json_or_missing(tmp_path, monkeypatch):
    cfg = tmp_path / "bad.json"
    cfg.write_text('{"state_dir": "s",\n  "nodes": [}\n')
    rc, msg = cli_error("check", "-c", cfg)
    exit_, text = py_error(cfg)
    assert rc == exit_ == 2 and text.startswith(f"{cfg}:2:") and \
        "invalid JSON" in text and msg.startswith(f"{cfg}:2:"), (msg, text)
    cfg.write_text('{"state_dir": "s", "state_dir": "t", %s}' % NODES)
    assert py_error(cfg) == (2, f'{cfg}:1:20: invalid JSON: duplicate '
                             'object key "state_dir"')
    assert cli_error("check", "-c", cfg)[0] == 2
    gone = tmp_path / "none.json"
    assert py_error(gone) == cli_error("check", "-c", gone)
    monkeypatch.delenv("FTFARM_CONFIG", raising=False)
    exit_, text = py_error(None)
    assert exit_ == 2 and "FTFARM_CONFIG" in text


@pytest.mark.timeout(60)
def test_state_dir_resolves_as_the_command_resolves_it(tmp_path,
                                                       monkeypatch):
    """A relative state_dir is taken against the config file's directory
    (links resolved), wherever the client runs: Python and the command
    name the same directory when no master runs there."""
    real = tmp_path / "real" / "conf"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    cfg = real / "c.json"
    cfg.write_text('{"state_dir": "../st/./x/../y/", %s}' % NODES)
    via = tmp_path / "link" / "c.json"
    monkeypatch.chdir(tmp_path)
    for path in (via, "link/c.json"):
        c = ftfarm.Client(path)
        assert c.config.state_dir == str(tmp_path / "real" / "st" / "y")
        assert c.config.name == "c"
        with pytest.raises(ftfarm.Error) as e:
            c.status()
        rc, msg = cli_error("status", "-c", path)
        assert rc == e.value.exit == 1 and msg == f"ftfarm: {e.value}", msg
    monkeypatch.setenv("FTFARM_CONFIG", str(via))
    assert ftfarm.Client().config.state_dir == c.config.state_dir


# ---- against a cluster ----

def raw_lines(c, bid):
    return (c.state_dir / "batches" / str(bid) /
            "results.jsonl").read_bytes().splitlines()


@pytest.mark.timeout(180)
def test_submit_wait_results_status(cluster):
    c = cluster
    n = 40
    with ftfarm.Client(c.config) as cl:
        bid = cl.submit(echo_batch(n, "py"))
        conn = cl._conn
        row = cl.wait(bid, timeout=120)
        assert (row["id"], row["total"], row["ok"], row["failed"],
                row["state"]) == (bid, n, n, 0, "finished"), row
        res = list(cl.results(bid))
        problems = check_exactly_once(res, n, echoed("py"))
        assert not problems, problems
        assert all("crc" not in r and r["exit"] == 0 for r in res)
        # Every field of the lines the master wrote, but the checksum.
        assert res == [{k: v for k, v in r.items() if k != "crc"}
                       for r in c.results(bid)]
        st = cl.status()
        cli = c.status()
        assert set(st) == set(cli) and "ok" not in st
        assert [w["id"] for w in st["workers"]] == \
            [w["id"] for w in cli["workers"]] and len(st["workers"]) == 3
        assert [b["id"] for b in st["batches"]] == [bid]
        # One connection served every call.
        assert cl._conn is conn and not conn.closed
        # A second batch by its JSON text.
        bid2 = cl.submit(json.dumps(echo_batch(3, "txt")))
        assert cl.wait(bid2)["ok"] == 3
    assert conn.closed
    # The master's checksums hold by this CRC, and a flipped byte fails.
    lines = raw_lines(c, bid)
    assert len(lines) == n and all(_results.check_line(x) is None
                                   for x in lines)
    bad = bytearray(lines[5])
    bad[12] ^= 1
    assert _results.check_line(bytes(bad)) == "checksum mismatch"
    # A damaged line (before the good one of its task), a second line
    # for a task, a torn tail: skipped.
    copy = c.dir / "copy.jsonl"
    copy.write_bytes(b"\n".join([lines[0], bytes(bad)] + lines[1:] +
                                [lines[3], lines[7][:-9]]))
    got = list(_results.read(copy))
    assert [r["task"] for r in got] == [json.loads(x)["task"]
                                        for x in lines]
    # The lease the supervisor wrote, read as the command reads it.
    rec = _lease.read(str(c.state_dir))
    assert rec.state == "active" and rec.sup.alive() and rec.epoch >= 1
    assert rec.master.pid == int((c.state_dir / "master.pid")
                                 .read_text().split()[0])


@pytest.mark.timeout(180)
def test_cancel_bad_batches_and_unknown_ids(cluster):
    c = cluster
    cl = ftfarm.Client(c.config, timeout=30)
    bid = cl.submit(echo_batch(12, "slow", pause=30))
    assert wait_until(lambda: any(
        w["state"] == "busy" for w in cl.status()["workers"]), 30)
    ans = cl.cancel(bid)
    assert ans["batch"] == bid and ans["running"] >= 1 and \
        ans["queued"] + ans["running"] == 12, ans
    row = cl.wait(bid, timeout=60)
    assert row["state"] == "cancelled" and row["failed"] == 12, row
    res = list(cl.results(bid))
    assert sorted(r["task"] for r in res) == list(range(12))
    assert all(r["reason"] == "cancelled" for r in res), res
    with pytest.raises(ftfarm.Error, match="has finished") as e:
        cl.cancel(bid)
    assert e.value.exit == 1
    # Bad batches: the master's message names the key; exit 2.
    for batch, words in (
            ({"name": "b", "tasks": [exec_task("true", bogus=1)]},
             ("tasks[0].bogus", "unknown key")),
            ({"name": "b", "tasks": [{"argv": ["true"]}]},
             ("tasks[0]", 'missing required key "type"')),
            ('{"name": "b", "tasks": [', ("invalid JSON",))):
        with pytest.raises(ftfarm.Error) as e:
            cl.submit(batch)
        assert e.value.exit == 2 and all(w in str(e.value) for w in words), \
            str(e.value)
    with pytest.raises(ftfarm.Error, match="cannot be written as JSON"):
        cl.submit({"tasks": {1, 2}})
    # A batch the master does not know: its words and status (3), as the
    # command's.
    with pytest.raises(ftfarm.Error) as e:
        cl.wait(987654)
    r = c.cli("wait", "-c", c.config, 987654)
    assert e.value.exit == r.returncode == 3 and \
        r.stderr.strip() == f"ftfarm: {e.value}" and "no batch 987654" in \
        str(e.value), r.stderr
    with pytest.raises(ftfarm.Error, match="does not exist"):
        cl.cancel(987654)
    with pytest.raises(ftfarm.Error, match="cannot read"):
        cl.results(987654)
    for bad in (0, -1, "3", 2.0, True):
        with pytest.raises(ftfarm.Error, match="not a batch id") as e:
            cl.wait(bad)
        assert e.value.exit == 2
    # A wait that times out leaves the client usable.
    bid = cl.submit(echo_batch(1, "late", pause=3))
    with pytest.raises(TimeoutError):
        cl.wait(bid, timeout=0.5)
    assert cl.wait(bid, timeout=60)["ok"] == 1
    # The master took none of it badly.
    assert len(cl.status()["workers"]) == 3
    assert pid_alive(c.master_pid)
    cl.close()


@pytest.mark.timeout(300)
def test_client_across_master_kill(make_cluster):
    """A wait sent before the master is killed (SIGKILL) and a submit sent
    while it is down both come through once the supervisor restarted it;
    each task of both batches has exactly one result."""
    c = make_cluster(heartbeat_ms=500)
    c.start()
    first = ftfarm.Client(c.config)
    waiter = ftfarm.Client(c.config)
    n1, n2 = 30, 20
    bid1 = first.submit(echo_batch(n1, "before", pause=0.3))
    got = {}
    t = threading.Thread(target=lambda: got.update(
        row=waiter.wait(bid1, timeout=240)), daemon=True)
    t.start()
    assert wait_until(lambda: len(c.results(bid1)) >= 3, 60)
    assert wait_until(lambda: waiter._conn is not None, 10)
    conns = (first._conn, waiter._conn)
    old = c.master_pid
    os.kill(old, signal.SIGKILL)
    assert wait_until(lambda: not pid_alive(old), 10)
    bid2 = first.submit(echo_batch(n2, "after"))
    assert bid2 != bid1
    assert first.wait(bid2, timeout=240)["ok"] == n2
    t.join(240)
    assert got["row"]["id"] == bid1 and got["row"]["ok"] == n1, got
    c._record_pids()
    assert c.master_pid != old and pid_alive(c.master_pid)
    # Both clients went on on new connections to the new master.
    assert first._conn is not conns[0] and waiter._conn is not conns[1]
    assert conns[0].closed and conns[1].closed
    for bid, n, name in ((bid1, n1, "before"), (bid2, n2, "after")):
        problems = check_exactly_once(list(first.results(bid)), n,
                                      echoed(name))
        assert not problems, (bid, problems)
    assert _lease.read(str(c.state_dir)).epoch >= 2
    first.close()
    waiter.close()


@pytest.mark.timeout(180)
def test_idle_connection_replaced_and_a_stop_ends_a_wait(make_cluster):
    """A connection the master closed as idle is replaced before the next
    call; a wait whose master is stopped (ftfarm stop: the lease goes
    free) gives up with where the results are, not after the bound."""
    c = make_cluster(heartbeat_ms=500, nodes=2,
                     control={"idle_timeout_s": 1})
    c.start()
    cl = ftfarm.Client(c.config)
    assert len(cl.status()["workers"]) == 2
    conn = cl._conn
    assert wait_until(lambda: "idle for" in c.master_log(), 30)
    assert conn.stale() and len(cl.status()["workers"]) == 2
    assert cl._conn is not conn
    bid = cl.submit(echo_batch(4, "long", pause=60))
    got = {}

    def wait():
        try:
            cl.wait(bid)
        except ftfarm.Error as e:
            got["error"] = e
        got["at"] = time.monotonic()
    t = threading.Thread(target=wait, daemon=True)
    t.start()
    assert wait_until(lambda: any(w["state"] == "busy" for w in
                                  c.status()["workers"]), 30)
    r = c.stop()
    stopped = time.monotonic()
    assert r.returncode == 0, r.stderr
    t.join(60)
    e = got["error"]
    assert f"the master stopped before batch {bid} finished; its results " \
        f"so far are in {c.state_dir}/batches/{bid}" == str(e) and \
        e.exit == 1, e
    assert got["at"] - stopped < 10, got["at"] - stopped


# ---- over TCP with MUNGE ----

needs_root_munged = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("munged") or
    not shutil.which("unshare"),
    reason="needs root (a mount namespace hides the unix socket) and munged")

TCP_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import ftfarm
from ftfarm import _munge
cfg, mode = sys.argv[2], sys.argv[3]
out = {}
if mode == "command":
    _munge.LIBRARY = "libmunge-not-there.so.9"
if mode == "nothing":
    _munge.LIBRARY = "libmunge-not-there.so.9"
    _munge.COMMAND = "/nonexistent/munge"
c = ftfarm.Client(cfg)
try:
    out["nodes"] = [n["name"] for n in c.status()["nodes"]]
    out["where"] = c._conn.where
    bid = c.submit({"name": "tcp", "tasks": [
        {"type": "exec", "argv": ["sh", "-c", "echo tcp $0", str(i)]}
        for i in range(int(sys.argv[4]))]})
    out["row"] = c.wait(bid)
    out["results"] = list(c.results(bid))
except ftfarm.Error as e:
    out["error"], out["exit"] = str(e), e.exit
print(json.dumps(out))
"""


@needs_root_munged
@pytest.mark.timeout(240)
def test_client_over_tcp_with_munge(make_cluster, open_dir):
    munged = Munged().start()
    try:
        over_tcp(make_cluster, open_dir, munged)
    finally:
        munged.stop()


def over_tcp(make_cluster, open_dir, munged):
    c = make_cluster(base=open_dir, heartbeat_ms=500, nodes=2,
                     control={"listen": "127.0.0.1:0",
                              "munge_socket": str(munged.socket)})
    c.config.chmod(0o644)
    c.start()
    pkg = open_dir / "python"
    shutil.copytree(ROOT / "python" / "ftfarm", pkg / "ftfarm",
                    ignore=shutil.ignore_patterns("__pycache__"))
    script = open_dir / "tcp_client.py"
    script.write_text(TCP_SCRIPT)
    os.chmod(open_dir / "c0", 0o755)
    env = {**c.env, "PYTHONDONTWRITEBYTECODE": "1"}
    port = json.loads((c.state_dir / "control.tcp").read_text())["port"]

    def client(mode, n=10, user=None):
        r = run_masked([PY, script, pkg, c.config, mode, n], c.state_dir,
                       user=user, env=env, timeout=120)
        assert r.returncode == 0, (r.stdout, r.stderr)
        return json.loads(r.stdout)

    for mode, n in (("library", 25), ("command", 5)):
        out = client(mode, n)
        assert "error" not in out, out
        assert out["nodes"] == ["node1", "node2"]
        assert out["where"] == f"127.0.0.1:{port}", out
        assert out["row"]["ok"] == n and out["row"]["state"] == "finished"
        problems = check_exactly_once(out["results"], n, echoed("tcp"))
        assert not problems, (mode, problems)
    assert c.master_log().count(" authenticated as uid 0") >= 2
    out = client("nothing")
    assert out["exit"] == 1 and f"127.0.0.1:{port}: munge: no way to make " \
        "a credential: libmunge-not-there.so.9" in out["error"], out
    # Another user: reads, but may not submit (the unix socket's roles).
    out = client("library", user="nobody")
    assert out["nodes"] == ["node1", "node2"] and out["exit"] == 1 and \
        "permission denied: submit" in out["error"], out
    assert "authenticated as uid 65534" in c.master_log()
    assert pid_alive(c.master_pid)
