"""Durability: the journal (batch.json + checksummed results.jsonl) read
back by a restarted master, damaged journals repaired, a full state dir
that loses nothing and runs nothing twice, the lease that fences a master
that was only paused, and the submitter's token.

Every restart here is a real kill -9 of the real master under the real
MPI launcher; the full disk is a real tmpfs filled by a real file."""
import json
import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import (batch_id_of, check_exactly_once, exec_task, pid_alive,
                      wait_until)

pytestmark = pytest.mark.timeout(300)


# ---- CRC-32C, as the master writes it (independent of its C code) ----

def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ CRC_TABLE[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def line_checks(raw):
    """Does the result line RAW (bytes, no newline) carry a good crc?"""
    tail = b',"crc":"'
    if not raw.endswith(b'"}') or raw[-18:-10] != tail:
        return False
    return int(raw[-10:-2], 16) == crc32c(raw[:-18])


def results_path(c, bid):
    return c.state_dir / "batches" / str(bid) / "results.jsonl"


def whole_lines(c, bid):
    """The complete lines of a results file being written: a line cut by
    a full disk is not a result yet."""
    path = c.state_dir / "batches" / str(bid) / "results.jsonl"
    text = path.read_bytes()
    return text[:text.rfind(b"\n") + 1].count(b"\n")


def wait_lines(c, bid, n, timeout=120):
    return wait_until(lambda: whole_lines(c, bid) >= n, timeout)


def kill_master(c):
    """kill -9 the master; returns its pid once it is gone."""
    c._record_pids()
    pid = c.master_pid
    assert pid and pid_alive(pid)
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not pid_alive(pid), 10)
    return pid


def restart(c):
    """After a kill -9: end what is left of the job, start again (a
    supervisor, when there is one, may have restarted it already: stop
    and start works either way)."""
    c.stop(timeout=120)
    c.start()


# ---- the result lines ----

def test_result_lines_carry_checksums(cluster):
    n = 40
    rc, out, err = cluster.submit(
        {"name": "crc", "tasks": [exec_task('echo "line $0"; echo "é\\"x"',
                                            i) for i in range(n)]})
    assert rc == 0, err
    bid = batch_id_of(out)
    raw = results_path(cluster, bid).read_bytes().split(b"\n")
    assert raw[-1] == b""
    raw = raw[:-1]
    assert len(raw) == n
    bad = [r for r in raw if not line_checks(r)]
    assert not bad, f"lines whose crc does not check: {bad[:2]}"
    assert not check_exactly_once([json.loads(r) for r in raw], n,
                                  lambda i: f'line {i}\né"x\n')
    st = cluster.status()
    row = [b for b in st["batches"] if b["id"] == bid][0]
    assert row["state"] == "finished" and row["done"] == n
    summary = json.loads((results_path(cluster, bid).parent /
                          "summary.json").read_text())
    assert summary["done"] == n


# ---- restart from the journal ----

@pytest.mark.parametrize("launch", ["dynamic", pytest.param("static", marks=pytest.mark.long)])
def test_restart_replays_journal(make_cluster, launch):
    c = make_cluster(launch=launch, heartbeat_ms=1000, master_silence_ms=3000)
    c.start()
    n = 300
    batch = {"name": "replay",
             "tasks": [exec_task("sleep 0.02; echo $0", i) for i in range(n)]}
    rc, out, err = c.submit(batch, wait=False)
    assert rc == 0, err
    bid = batch_id_of(out)
    assert wait_lines(c, bid, 60)
    kill_master(c)
    before = results_path(c, bid).read_bytes()
    done_before = {json.loads(x)["task"] for x in before.splitlines()}
    restart(c)
    r = c.cli("wait", "-c", c.config, bid, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    after = results_path(c, bid).read_bytes()
    # The lines written before the kill stay as they were, first.
    assert after.startswith(before[:before.rfind(b"\n") + 1])
    res = c.results(bid)
    assert not check_exactly_once(res, n, lambda i: f"{i}\n")
    # Tasks done before the kill were not run again.
    evs = c.events()
    ups = [i for i, e in enumerate(evs) if e["event"] == "master_up"]
    assert len(ups) >= 2
    again = {e["task"] for e in evs[ups[-1]:]
             if e["event"] == "task_assigned" and e["batch"] == bid}
    assert not (again & done_before), sorted(again & done_before)[:10]
    replayed = [e for e in evs if e["event"] == "journal_replayed"]
    assert replayed and replayed[-1]["done"] >= len(done_before) - 1


def _damage(path, how):
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    assert len(lines) >= 10
    if how.startswith("cut"):
        # Inside the last line, at a fraction of it.
        frac = float(how[3:])
        last = len(data) - len(lines[-1])
        cut_at = last + max(1, int(len(lines[-1]) * frac))
        path.write_bytes(data[:cut_at])
        return len(lines) - 1, data[last:cut_at]
    # A flipped byte inside the stdout of the middle line.
    mid = len(lines) // 2
    start = sum(len(x) for x in lines[:mid])
    pos = start + lines[mid].index(b'"stdout":"') + 10
    b = bytearray(data)
    b[pos] ^= 0x01
    path.write_bytes(bytes(b))
    return len(lines) - 1, bytes(b[start:start + len(lines[mid])])


@pytest.mark.parametrize("how", ["cut0.1", "cut0.5", "cut0.99", "flip"])
def test_damaged_journal_is_repaired(make_cluster, how):
    c = make_cluster(heartbeat_ms=500, master_silence_ms=3000)
    c.start()
    n = 120
    rc, out, err = c.submit(
        {"name": "damage",
         "tasks": [exec_task("sleep 0.05; echo $0", i) for i in range(n)]},
        wait=False)
    assert rc == 0, err
    bid = batch_id_of(out)
    assert wait_lines(c, bid, 30)
    kill_master(c)
    path = results_path(c, bid)
    trusted, cut = _damage(path, how)
    restart(c)
    r = c.cli("wait", "-c", c.config, bid, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not check_exactly_once(c.results(bid), n, lambda i: f"{i}\n")
    rep = [e for e in c.events() if e["event"] == "journal_repaired"]
    assert rep, "the damage was not reported"
    assert all(e["batch"] == bid for e in rep)
    damaged = (path.parent / "results.jsonl.damaged").read_bytes()
    assert cut in damaged
    assert "cut" in c.master_log()


# ---- a full state dir ----

@pytest.fixture
def small_tmpfs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m,mode=0700",
                        "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(path):
    """Write zeros to PATH until the filesystem is full."""
    chunk = b"\0" * 65536
    with open(path, "wb") as f:
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError:
            pass


def test_full_state_dir_loses_nothing(make_cluster, small_tmpfs):
    c = make_cluster(heartbeat_ms=500, fsync="always",
                     state_dir=str(small_tmpfs / "state"))
    c.state_dir = small_tmpfs / "state"
    c.start()
    n = 400
    payload = "x" * 300
    batch = c.write_batch({"name": "full", "tasks": [
        exec_task(f"sleep 0.01; echo $0 {payload}", i) for i in range(n)]})
    waiter = subprocess.Popen([c.ftfarm, "submit", "-c", str(c.config),
                               str(batch), "--wait"], env=c.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        assert wait_until(lambda: c.status()["batches"], 30)
        bid = c.status()["batches"][0]["id"]
        assert wait_lines(c, bid, 20)
        ballast = small_tmpfs / "ballast"
        fill(ballast)
        # The master notices, holds new tasks, keeps what it cannot write.
        st = wait_until(lambda: (lambda s: s if s["store"]["state"] ==
                                 "full" else None)(c.status()), 30)
        assert st, f"no full state dir in status: {c.status()['store']}"
        assert st["store"]["path"].startswith(str(small_tmpfs))
        human = c.cli("status", "-c", c.config).stdout
        assert "state dir full" in human, human
        # Nothing is reported done that is not on disk.
        for _ in range(10):
            row = c.status()["batches"][0]
            lines = whole_lines(c, bid)
            assert row["done"] <= lines, (row, lines)
            assert row["state"] != "finished"
            time.sleep(0.3)
        assert waiter.poll() is None, "submit --wait ended on a full disk"
        ballast.unlink()
        out, err = waiter.communicate(timeout=240)
        assert waiter.returncode == 0, out + err
    finally:
        if waiter.poll() is None:
            waiter.kill()
    res = c.results(bid)
    assert not check_exactly_once(res, n,
                                  lambda i: f"{i} {payload}\n")
    # Nothing ran twice for the full disk: a second attempt only as the
    # scheduler's copy of a straggler (docs/design.md, "Slow workers") or after a
    # worker was declared dead (a missed pong on a loaded machine).
    evs = c.events()
    copies = {(e["task"], e["attempt"]) for e in evs
              if e["event"] == "task_assigned" and e.get("duplicate")}
    dead = [e for e in evs if e["event"] == "worker_dead"]
    again = [r for r in res if r["attempt"] != 1 and
             (r["task"], r["attempt"]) not in copies]
    assert not again or dead, (again[:3], [
        e for e in evs if e["event"] in ("master_up", "worker_dead",
                                         "worker_slow", "task_reassigned",
                                         "store_failed", "store_recovered")])
    # One event when the store fails and one when it recovers (the count
    # of writes that failed is in master.log and /metrics): not one per
    # file per retry.
    failed = [e for e in evs if e["event"] == "store_failed"]
    recovered = [e for e in evs if e["event"] == "store_recovered"]
    assert failed and recovered
    assert len(failed) <= len(recovered) + 1 <= 3, failed
    assert all(e["failures"] >= 1 for e in recovered), recovered
    assert c.status()["store"]["state"] == "ok"
    assert "writes had failed" in c.master_log()
    c.stop()


def test_torn_tail_on_a_full_disk_is_cut_in_place(make_cluster, small_tmpfs):
    """A master killed mid-line restarts on a full state dir: the torn
    last line is cut off in place (no room for a copy), the batch is not
    given up, and once there is room again it ends with every task once."""
    c = make_cluster(heartbeat_ms=500, master_silence_ms=3000,
                     state_dir=str(small_tmpfs / "state"))
    c.state_dir = small_tmpfs / "state"
    c.start()
    n = 60
    rc, out, err = c.submit(
        {"name": "torn", "tasks": [exec_task("sleep 0.05; echo $0", i)
                                   for i in range(n)]}, wait=False)
    assert rc == 0, err
    bid = batch_id_of(out)
    assert wait_lines(c, bid, 20)
    kill_master(c)
    path = results_path(c, bid)
    _damage(path, "cut0.5")
    ballast = small_tmpfs / "ballast"
    fill(ballast)
    restart(c)
    try:
        # Replayed on the full disk: the torn line is gone, the rest kept.
        assert wait_until(lambda: path.read_bytes().endswith(b"\n"), 30)
        time.sleep(1)
        row = c.status()["batches"][0]
        assert row["id"] == bid and row["state"] != "failed", row
        assert "cannot be replayed" not in c.master_log()
    finally:
        ballast.unlink()
    r = c.cli("wait", "-c", c.config, bid, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not check_exactly_once(c.results(bid), n, lambda i: f"{i}\n")
    rep = [e for e in c.events() if e["event"] == "journal_repaired"]
    assert rep and all(e["batch"] == bid for e in rep), rep
    c.stop()


# ---- fencing ----

def lease_record(epoch, seq, state, sup="-/0/0", master="-/0/0"):
    body = (f"ftfarm-lease 1 epoch={epoch} seq={seq} state={state} "
            f"sup={sup} master={master}").encode().ljust(243)
    return body + f"crc={crc32c(body):08x}\n".encode()


def read_lease(path):
    text = path.read_bytes()[:243].decode()
    return dict(kv.split("=", 1) for kv in text.split()[2:])


def test_paused_master_steps_down_without_writing(make_cluster):
    """A master paused while another epoch took its lease writes nothing
    when it resumes: it leaves, status 3."""
    c = make_cluster(heartbeat_ms=500, master_silence_ms=60000)
    cfg = json.loads(c.config.read_text())
    # The master alone, under the launcher, without a supervisor.
    argv = ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe",
            "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
            "--mca", "oob_tcp_if_include", "lo", "--mca",
            "orte_abort_on_non_zero_status", "0", "-n", "1",
            str(c.bindir / "ftfarm-master"), "-c", str(c.config)]
    log = open(c.dir / "launcher.log", "w")
    p = subprocess.Popen(argv, env=c.env, stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)
    try:
        assert wait_until(lambda: (c.state_dir / "control.sock").exists() and
                          len(c.worker_pids()) == len(cfg["nodes"]), 60)
        rc, out, err = c.submit(
            {"name": "fence", "tasks": [exec_task("sleep 0.1; echo $0", i)
                                        for i in range(200)]}, wait=False)
        assert rc == 0, err
        bid = batch_id_of(out)
        assert wait_lines(c, bid, 10)
        c._record_pids()
        master = c.master_pid
        os.kill(master, signal.SIGSTOP)
        time.sleep(1.0)         # results pile up in the master's sockets
        files = [results_path(c, bid), c.state_dir / "events.jsonl",
                 c.state_dir / "master.log"]
        sizes = [f.stat().st_size for f in files]
        lease = c.state_dir / "lease"
        cur = read_lease(lease)
        assert cur["state"] == "active"
        lease.write_bytes(lease_record(int(cur["epoch"]) + 1, 0, "active",
                                       sup="elsewhere/4242/1"))
        os.kill(master, signal.SIGCONT)
        assert wait_until(lambda: not pid_alive(master), 15), \
            "the paused master did not leave"
        assert [f.stat().st_size for f in files] == sizes, \
            "the master wrote after losing its lease"
        # Its last words reach the log through the launcher, a moment
        # after it is gone.
        assert wait_until(lambda: "stepping down" in
                          (c.dir / "launcher.log").read_text(), 10), \
            (c.dir / "launcher.log").read_text()
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.wait(timeout=30)
        log.close()


# ---- the submitter's token ----

def ask(sock, req):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(sock))
    s.sendall(json.dumps(req).encode() + b"\n")
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    s.close()
    return json.loads(buf)


def test_token_gets_the_same_batch(cluster):
    sock = cluster.state_dir / "control.sock"
    batch = {"name": "tok", "tasks": [exec_task("echo $0", i)
                                      for i in range(5)]}
    req = {"v": 1, "cmd": "submit", "batch": batch, "token": "abc-123_X"}
    a = ask(sock, req)
    b = ask(sock, req)
    assert a["ok"] and b["ok"], (a, b)
    assert a["batch"] == b["batch"] and b.get("again") is True
    assert len(cluster.status()["batches"]) == 1
    bad = ask(sock, dict(req, token="../etc"))
    assert bad["ok"] is False and "token" in bad["error"]


@pytest.mark.parametrize("policy", ["none", "always"])
def test_fsync_policies_finish(make_cluster, policy):
    c = make_cluster(heartbeat_ms=500, fsync=policy)
    c.start()
    rc, out, err = c.submit({"name": policy, "tasks": [
        exec_task("echo $0", i) for i in range(50)]})
    assert rc == 0, err
    assert not check_exactly_once(c.results(batch_id_of(out)), 50,
                                  lambda i: f"{i}\n")
    assert c.status()["store"]["fsync"] == policy
    c.stop()
