"""The master's HTTP listener: /metrics read by a real Prometheus parser
and held to `status --json`, the status page in headless Chromium, and
clients that misbehave (never reading, thousands of connections, garbage)
without disturbing heartbeats or the control socket."""
import json
import os
import random
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from urllib.parse import urlparse

import pytest

from conftest import (ROOT, batch_id_of, check_exactly_once, exec_task,
                      wait_until)
import webdriver

pytestmark = pytest.mark.timeout(150)


def http_get(url, timeout=10, headers=None, method="GET"):
    """(status, body bytes) of URL."""
    req = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def start_http_cluster(make_cluster, **kw):
    kw.setdefault("http", {"listen": "127.0.0.1:0"})
    c = make_cluster(**kw)
    c.start()
    url = c.status().get("http")
    assert url and url.startswith("http://127.0.0.1:"), url
    return c, url


def metrics(url):
    """{(name, frozenset(labels)): value} of URL's /metrics, parsed by
    python3-prometheus-client; also the exposition's text."""
    from prometheus_client.parser import text_string_to_metric_families
    status, body = http_get(url + "metrics")
    assert status == 200
    text = body.decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out, text


def m(ms, metric, **labels):
    return ms[(metric, frozenset(labels.items()))]


def test_metrics_match_status(make_cluster, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families
    c, url = start_http_cluster(make_cluster, heartbeat_ms=1000)
    rc, out, _ = c.submit({"name": "mix", "tasks":
                           [{"type": "sleep", "seconds": 0}] * 500 +
                           [exec_task("exit 3")] * 5})
    assert rc == 1          # the failed ones
    bid = batch_id_of(out)
    st = c.status()
    ms, text = metrics(url)
    row = [b for b in st["batches"] if b["id"] == bid][0]
    assert m(ms, "ftfarm_batch_tasks", batch=str(bid)) == row["total"] == 505
    assert m(ms, "ftfarm_batch_tasks_done_total", batch=str(bid)) == \
        row["ok"] == 500
    assert m(ms, "ftfarm_batch_tasks_failed_total", batch=str(bid)) == \
        row["failed"] == 5
    assert m(ms, "ftfarm_batch_running", batch=str(bid)) == 0
    assert m(ms, "ftfarm_batch_info", batch=str(bid), name="mix", job="") == 1
    assert m(ms, "ftfarm_tasks_submitted_total", type="sleep") == 500
    assert m(ms, "ftfarm_tasks_done_total", type="sleep") == 500
    assert m(ms, "ftfarm_tasks_failed_total", type="exec") == 5
    assert m(ms, "ftfarm_task_run_seconds_count", type="sleep") == 500
    assert m(ms, "ftfarm_tasks_queued") == st["queued"] == 0
    assert m(ms, "ftfarm_tasks_open") == st["open"] == 0
    assert m(ms, "ftfarm_results_received_total") == \
        st["counters"]["results_in"]
    for state in {w["state"] for w in st["workers"]} | {"dead", "busy"}:
        assert m(ms, "ftfarm_workers", state=state) == \
            sum(w["state"] == state for w in st["workers"]), state
    for n in st["nodes"]:
        assert m(ms, "ftfarm_node_state", node=n["name"], state=n["state"]) == 1
        assert m(ms, "ftfarm_node_reboots_total", node=n["name"]) == \
            n["reboots"]
    assert m(ms, "ftfarm_nodes", state="up") == len(st["nodes"])
    assert m(ms, "ftfarm_batches_finished_total") == 1
    assert m(ms, "ftfarm_state_dir_free_bytes") > 0
    assert m(ms, "ftfarm_loop_lag_seconds_count") > 0
    # Every name under one prefix; no task id anywhere in a label.
    assert all(k[0].startswith("ftfarm_") for k in ms)
    assert all(name not in ("task", "task_id", "pid")
               for k in ms for name, _ in k[1])
    # The manual (ftfarm-events(7), METRICS) names every family, and only
    # those.
    page = (ROOT / "man" / "ftfarm-events.7").read_text()
    section = page.split("\n.SH METRICS")[1].split("\n.SH ")[0]
    documented = set(re.findall(r"^\.BR? (ftfarm_[a-z_]+)", section, re.M))
    families = {f.name + ("_total" if f.type == "counter" else "")
                for f in text_string_to_metric_families(text)}
    assert families == documented, (families ^ documented)
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "metrics"], input=text,
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
    # /status.json tells the same.
    status, body = http_get(url + "status.json")
    sj = json.loads(body)
    assert [b for b in sj["batches"] if b["id"] == bid][0]["ok"] == 500
    assert any(e["event"] == "batch_done" for e in sj["events"])
    # A killed worker: its failure detected, its respawn counted.
    victim = [w for w in st["workers"] if w["state"] == "idle"][0]
    os.kill(victim["pid"], 9)
    assert wait_until(lambda: any(
        e["event"] == "worker_respawned" and e["worker"] == victim["id"]
        for e in c.events()), 30)
    # /metrics serves a snapshot up to 0.25 s old (SNAPSHOT_MAX_AGE), and
    # the respawn can come sooner than that after the last fetch above.
    respawns = ("ftfarm_worker_respawns_total",
                frozenset({"node": victim["node"]}.items()))
    assert wait_until(lambda: metrics(url)[0].get(respawns) == 1, 5)
    ms, _ = metrics(url)
    assert m(ms, "ftfarm_failure_detection_seconds_count") >= 1
    assert m(ms, "ftfarm_worker_respawns_total", node=victim["node"]) == 1


def test_http_refusals(make_cluster, tmp_path):
    c, url = start_http_cluster(make_cluster, nodes=1)
    assert http_get(url + "nope")[0] == 404
    assert http_get(url + "metrics", method="POST")[0] == 405
    # DNS rebinding: a loopback listener answers loopback names only.
    for host in ("evil.example", "127.0.0.1.evil.example:80",
                 "localhost.evil.example"):
        assert http_get(url + "metrics", headers={"Host": host})[0] == 421
    assert http_get(url + "metrics",
                    headers={"Host": "localhost:1"})[0] == 200
    # The port taken: the second master says so and does not start.
    port = urlparse(url).port
    d = make_cluster(name="d", nodes=1,
                     http={"listen": f"127.0.0.1:{port}"})
    r = d.start(check=False, timeout=60)
    assert r.returncode != 0
    assert "http.listen" in r.stderr + d.mpirun_log() + d.master_log()


def batch_row(chrome, bid):
    """The page's row of batch BID as a dict of its data attributes, or
    None."""
    return chrome.execute(
        "var r = document.querySelector('tr[data-batch=\"' + arguments[0]"
        " + '\"]'); return r ? Object.assign({}, r.dataset) : null;", bid)


@pytest.mark.skipif(not webdriver.available(),
                    reason="needs chromium and chromium-driver")
@pytest.mark.timeout(240)
def test_status_page_in_chromium(make_cluster, tmp_path):
    c, url = start_http_cluster(make_cluster)
    chrome = webdriver.Chrome(str(tmp_path))
    try:
        chrome.get(url)
        n = 150
        path = c.write_batch({"name": "page", "tasks": [
            {"type": "sleep", "seconds": 0.1}] * n})
        sub = subprocess.Popen([c.ftfarm, "submit", "-c", str(c.config),
                                str(path), "--wait"], env=c.env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        try:
            bid = int(sub.stdout.readline())
            during = wait_until(lambda: (lambda r: r if r and
                                         r["state"] == "running" and
                                         int(r["done"]) > 0 else None)(
                                             batch_row(chrome, bid)), 60)
            assert during, "the page never showed the batch running"
            png = chrome.screenshot(str(tmp_path / "during.png"))
            assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
            _, err = sub.communicate(timeout=120)
            assert sub.returncode == 0, err
        finally:
            if sub.poll() is None:
                sub.kill()
        final = [b for b in c.status()["batches"] if b["id"] == bid][0]
        after = wait_until(lambda: (lambda r: r if r and
                                    r["state"] == "finished" else None)(
                                        batch_row(chrome, bid)), 30)
        assert after, "the page never showed the batch finished"
        png = chrome.screenshot(str(tmp_path / "after.png"))
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
        assert int(after["done"]) == int(after["total"]) == final["total"] == n
        assert int(after["ok"]) == final["ok"] == n
        assert int(after["failed"]) == final["failed"] == 0
        text = chrome.execute("return document.body.innerText;")
        assert f"{n} / {n}" in text and "finished in" in text
        assert "worker_up" in text          # the latest events
        rows = chrome.execute(
            "return document.querySelectorAll('#workers tbody tr').length;")
        assert rows == len(c.status()["workers"])
    finally:
        chrome.quit()
    keep = os.environ.get("FTFARM_SCREENSHOT_DIR")
    if keep:                # to look at them after the run
        os.makedirs(keep, exist_ok=True)
        for name in ("during.png", "after.png"):
            shutil.copy(tmp_path / name, os.path.join(keep, name))
    print(f"screenshots: {tmp_path}/during.png {tmp_path}/after.png")


# ---- hostile clients ----

def hold_unread(port, n):
    """N connections that ask for /metrics and never read the answer."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 50)
        socks.append(s)
    return socks


def connect_storm(port, n):
    """N connections in a row, each closed at once (some with a request
    cut short)."""
    for i in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            if i % 10 == 0:
                s.sendall(b"GET /metr")
            s.close()
        except OSError:
            pass


def garbage(port, n, rnd):
    for i in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            kind = i % 4
            if kind == 0:
                s.sendall(bytes(rnd.randrange(256) for _ in range(2000)))
            elif kind == 1:
                s.sendall(b"GET /" + b"A" * 100000 + b" HTTP/1.1\r\n\r\n")
            elif kind == 2:
                s.sendall(b"\r\n\r\nNOT A REQUEST\x00\xff\r\n\r\n")
            else:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"X: " + b"y" * 50000 + b"\r\n\r\n")
            s.settimeout(2)
            try:
                s.recv(1000)
            except OSError:
                pass
            s.close()
        except OSError:
            pass


def test_hostile_http_clients(make_cluster, tmp_path):
    # Deaths here would be the listener's doing: heartbeats with room for
    # a loaded machine, not for a stalled loop.
    c, url = start_http_cluster(make_cluster, heartbeat_ms=1000,
                                heartbeat_timeout_ms=2000)
    port = urlparse(url).port
    n = 3000
    path = c.write_batch({"name": "under-fire", "tasks": [
        {"type": "sleep", "seconds": 0.002}] * n})
    sub = subprocess.Popen([c.ftfarm, "submit", "-c", str(c.config),
                            str(path), "--wait"], env=c.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    unread = hold_unread(port, 40)
    slow = []
    try:
        for _ in range(20):     # half a request, then nothing
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 1")
            slow.append(s)
        t0 = time.monotonic()
        connect_storm(port, 10000)
        storm = time.monotonic() - t0
        garbage(port, 40, random.Random(13))
        # The control socket answers promptly meanwhile.
        t = time.monotonic()
        st = c.status(timeout=10)
        assert time.monotonic() - t < 5
        out, err = sub.communicate(timeout=120)
        assert sub.returncode == 0, err
    finally:
        for s in unread + slow:
            s.close()
        if sub.poll() is None:
            sub.kill()
    bid = batch_id_of(out)
    assert not check_exactly_once(c.results(bid), n)
    # No worker was declared dead: heartbeats went on.
    dead = [e for e in c.events() if e["event"] in ("worker_dead",
                                                     "worker_inactive")]
    assert not dead, dead
    assert all(w["respawns"] == 0 for w in st["workers"])
    # And the listener still serves (a snapshot up to 0.25 s old: one
    # served during the batch may not count its last tasks yet).
    done = ("ftfarm_batch_tasks_done_total",
            frozenset({"batch": str(bid)}.items()))
    assert wait_until(lambda: metrics(url)[0].get(done) == n, 5)
    print(f"10000 connections in {storm:.1f} s")
