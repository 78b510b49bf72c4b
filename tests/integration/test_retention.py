"""Batches forgotten on time (retain_s) or at once (ftfarm forget), their
directories gone and their ids never given again, across restarts too; a
refused batch uses no id; wait, cat and batch of a forgotten batch say
so."""
import json
import os
import signal
import time

import pytest

from conftest import batch_id_of, wait_until


def batch_dirs(c):
    d = c.state_dir / "batches"
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit())


@pytest.mark.timeout(300)
@pytest.mark.cluster_opts(heartbeat_ms=500, retain_s=3, lease_ms=2000)
def test_150_batches_forgotten_on_time_and_ids_not_reused(cluster):
    n = 150
    ids = []
    for i in range(n):
        r = cluster.cli("submit", "-c", cluster.config, "--", "echo", i)
        assert r.returncode == 0, r.stderr
        ids.append(batch_id_of(r.stdout))
    assert ids == list(range(1, n + 1))
    # (Only the last: under load 150 submissions take past retain_s, and
    # the first batch may be forgotten already; each batch's batch_done
    # is checked below.)
    assert cluster.cli("wait", "-c", cluster.config, ids[-1]).returncode == 0
    assert wait_until(lambda: batch_dirs(cluster) == [], 30), \
        batch_dirs(cluster)
    assert wait_until(lambda: sum(e["event"] == "batch_forgotten"
                                  for e in cluster.events()) == n, 10)
    evs = cluster.events()
    done = {e["batch"]: e["ts"] for e in evs if e["event"] == "batch_done"}
    gone = {e["batch"]: e for e in evs if e["event"] == "batch_forgotten"}
    assert sorted(gone) == ids
    for bid in ids:
        late = gone[bid]["ts"] - done[bid]
        assert 3.0 - 0.05 <= late <= 3.0 + 2.5, (bid, late)
        assert 3.0 - 0.05 <= gone[bid]["age"] <= 3.0 + 2.5
    st = cluster.status()
    assert st["batches"] == [], "forgotten batches still in status"
    left = [p.name for p in (cluster.state_dir / "batches").iterdir()]
    assert left == ["last_id"], left
    # A forgotten batch says so (exit 4); one never given does not (3).
    for cmd in (("wait",), ("batch",), ("cat",)):
        r = cluster.cli(*cmd, "-c", cluster.config, ids[5])
        assert r.returncode == 4 and "forgotten" in r.stderr, (cmd, r)
    r = cluster.cli("batch", "-c", cluster.config, n + 40)
    assert r.returncode == 3 and "no batch" in r.stderr
    # Ids go on after a master killed, and after stop and start.
    pid = int((cluster.state_dir / "master.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: cluster.cli("status", "-c", cluster.config)
                      .returncode == 0, 60)
    r = cluster.cli("submit", "-c", cluster.config, "--wait", "--", "true")
    assert batch_id_of(r.stdout) == n + 1, r.stdout
    cluster.stop()
    cluster.start()
    r = cluster.cli("submit", "-c", cluster.config, "--wait", "--", "true")
    assert batch_id_of(r.stdout) == n + 2, r.stdout


@pytest.mark.timeout(200)
def test_forget_and_refused_batches_use_no_id(cluster, tmp_path):
    c = cluster
    first = batch_id_of(c.cli("submit", "-c", c.config, "--wait", "--",
                              "echo", "kept").stdout)
    # Refused: bad input, a batch it would run after that does not exist.
    assert c.cli("submit", "-c", c.config, "--", "").returncode == 2
    assert c.cli("submit", "-c", c.config, "--after", "77", "--",
                 "true").returncode == 2
    bad = c.write_batch({"name": "bad", "tasks": [{"type": "nope"}]})
    assert c.cli("submit", "-c", c.config, bad).returncode == 2
    running = batch_id_of(c.cli("submit", "-c", c.config, "--", "sleep",
                                "30").stdout)
    assert running == first + 1, "a refused batch used an id"
    r = c.cli("forget", "-c", c.config, running)
    assert r.returncode == 1 and "has not ended" in r.stderr, r
    assert c.cli("cancel", "-c", c.config, running).returncode == 0
    assert c.cli("wait", "-c", c.config, running).returncode == 1
    assert (c.state_dir / "batches" / str(first)).is_dir()
    r = c.cli("forget", "-c", c.config, first)
    assert r.returncode == 0, r.stderr
    assert not (c.state_dir / "batches" / str(first)).exists()
    r = c.cli("forget", "-c", c.config, first)
    assert r.returncode == 1 and "forgotten already" in r.stderr
    assert c.cli("forget", "-c", c.config, 999).returncode == 1
    for cmd in ("wait", "batch", "cat"):
        r = c.cli(cmd, "-c", c.config, first)
        assert r.returncode == 4 and "forgotten" in r.stderr, (cmd, r)
    assert c.cli("forget", "-c", c.config, running).returncode == 0
    ids = [b["id"] for b in c.status()["batches"]]
    assert first not in ids and running not in ids
    nxt = batch_id_of(c.cli("submit", "-c", c.config, "--", "true").stdout)
    assert nxt == running + 1


# ---- a long life: a batch a moment, forgotten after retain_s ----

RETAIN_SOAK = int(os.environ.get("FTFARM_RETAIN_SOAK", "300000"))


def state_dir_size(d):
    """Bytes and inodes of the state dir."""
    size = inodes = 0
    for root, dirs, files in os.walk(d):
        inodes += len(dirs) + len(files)
        for f in files:
            try:
                size += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return size, inodes


@pytest.mark.long
@pytest.mark.timeout(3600)
def test_retention_soak_state_dir_rss_fds_flat(make_cluster):
    """RETAIN_SOAK (300,000) one-task batches with retain_s 5: the state
    dir's size and inodes, the master's RSS and descriptors stay flat
    (the logs rotate past log_max_bytes; results are forgotten)."""
    from test_daemon import connect, recv_lines, rss_kib, settled_fd_count
    c = make_cluster(heartbeat_ms=500, nodes=1, workers_per_node=2,
                     task_events=False, retain_s=5, fsync="none",
                     log_max_bytes=1 << 20, log_keep=2)
    c.env["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=0"
    c.start()
    master = c.master_pid
    one = {"name": "one", "tasks": [{"type": "sleep", "seconds": 0}]}
    s = connect(c, timeout=120)
    req = (json.dumps({"v": 1, "cmd": "submit", "batch": one}) +
           "\n").encode()
    curve, sent, t0, burst = [], 0, time.monotonic(), 500
    while sent < RETAIN_SOAK:
        s.sendall(req * burst)
        ids = [a["batch"] for a in recv_lines(s, burst)]
        assert len(ids) == burst and ids[-1] == sent + burst, ids[-3:]
        sent += burst
        if sent % (RETAIN_SOAK // 30) < burst:
            size, inodes = state_dir_size(c.state_dir)
            curve.append((sent, time.monotonic() - t0, size, inodes,
                          rss_kib(master), settled_fd_count(master)))
    s.close()
    report = "\n".join(f"{n} batches at {t:.0f} s: state dir {sz / 2**20:.1f}"
                       f" MiB, {ino} inodes, master {rss / 1024:.1f} MiB, "
                       f"{fds} fds" for n, t, sz, ino, rss, fds in curve)
    print(report)
    # Once batches are forgotten (after retain_s), what the state dir
    # holds follows the rate, not the count: the second half of the run
    # holds no more than the first (the rate moves with the machine's
    # load; ext4 slows a little as it reuses inodes).  RSS and
    # descriptors are flat.
    warm = [x for x in curve if x[1] >= 15]
    assert len(warm) >= 6, report
    first, second = warm[:len(warm) // 2], warm[len(warm) // 2:]
    for k, what, slack in ((2, "state dir bytes", 4 << 20),
                           (3, "inodes", 3000)):
        assert max(x[k] for x in second) <= \
            1.5 * max(x[k] for x in first) + slack, (what, report)
    for k, what, slack in ((4, "RSS KiB", 4 * 1024), (5, "fds", 2)):
        vals = [x[k] for x in warm]
        assert max(vals) - min(vals) <= slack, (what, report)
    # The last batches are forgotten too, and nothing else is left.
    assert wait_until(lambda: batch_dirs(c) == [], 60), batch_dirs(c)[:5]
