"""Basic behaviour of a healthy cluster: results as the contract says them,
exit codes of `submit --wait`, task timeouts, status --json, start/stop."""
import json
import time

import pytest

from conftest import (assert_no_leftovers, batch_id_of, exec_task, pid_alive,
                      proc_cmdline, proc_environ, wait_until)

pytestmark = pytest.mark.timeout(120)

RESULT_KEYS = {"task", "attempt", "worker", "status", "exit", "stdout"}


def by_task(results):
    out = {}
    for r in results:
        assert r["task"] not in out, f"task {r['task']} has two results: " \
            f"{out[r['task']]} and {r}"
        out[r["task"]] = r
    return out


def test_results_stdout_stderr_exit_codes(cluster):
    batch = {"name": "basic", "tasks": [
        exec_task("printf 'out-%s\\n' \"$0\"; printf 'err-%s\\n' \"$0\" >&2",
                  "zero"),
        exec_task("printf 'partial'; exit 3"),
        {"type": "sleep", "seconds": 0},
        exec_task("printf '%s|%s|%s' \"$0\" \"$1\" \"$2\"", "a b", "c'd",
                  "é\"\\"),
        {"type": "exec", "argv": ["true"]},
        {"type": "sleep", "seconds": 0.2},
        exec_task("kill -9 $$"),
    ]}
    t0 = time.monotonic()
    rc, out, err = cluster.submit(batch)
    assert rc == 1, f"a failing task must make submit --wait exit 1: " \
        f"rc={rc} out={out!r} err={err!r}"
    bid = batch_id_of(out)
    res = cluster.results(bid)
    assert len(res) == len(batch["tasks"]), res
    r = by_task(res)
    assert set(r) == set(range(len(batch["tasks"])))
    for x in res:
        assert RESULT_KEYS <= set(x), f"result misses keys: {x}"
        assert x["attempt"] >= 1
        assert x["worker"] in (0, 1, 2)

    assert r[0]["status"] == "ok" and r[0]["exit"] == 0
    assert r[0]["stdout"] == "out-zero\n"
    assert r[0].get("stderr") == "err-zero\n"

    assert r[1]["status"] == "failed", r[1]
    assert r[1]["exit"] == 3, r[1]
    assert r[1]["stdout"] == "partial", r[1]

    assert r[2]["status"] == "ok" and r[2]["exit"] == 0, r[2]
    assert r[3]["status"] == "ok" and r[3]["stdout"] == "a b|c'd|é\"\\", r[3]
    assert r[4]["status"] == "ok" and r[4]["stdout"] == "", r[4]
    assert r[5]["status"] == "ok", r[5]
    assert r[6]["status"] == "failed", r[6]
    assert r[6]["exit"] != 0, r[6]
    assert time.monotonic() - t0 < 20

    st = cluster.status()
    b = [b for b in st["batches"] if b["id"] == bid][0]
    assert b["total"] == 7 and b["done"] == 7 and b["failed"] == 2, b


def test_all_ok_batch_exits_zero(cluster):
    n = 50
    batch = {"name": "ok", "tasks": [
        exec_task("echo $0", i) if i % 2 else {"type": "sleep", "seconds": 0}
        for i in range(n)]}
    rc, out, err = cluster.submit(batch)
    assert rc == 0, (out, err)
    res = cluster.results(batch_id_of(out))
    r = by_task(res)
    assert sorted(r) == list(range(n))
    for i, x in r.items():
        assert x["status"] == "ok" and x["exit"] == 0, x
        assert x["stdout"] == (f"{i}\n" if i % 2 else ""), x
    # Without --wait: prints the id and returns at once; `wait` later.
    rc, out, err = cluster.submit(batch, wait=False)
    assert rc == 0, err
    bid = batch_id_of(out)
    r = cluster.cli("wait", "-c", cluster.config, bid, timeout=60)
    assert r.returncode == 0, r.stderr
    assert len(cluster.results(bid)) == n


def test_task_timeout_kills_long_command(cluster):
    batch = {"name": "timeout", "tasks": [
        {"type": "exec", "argv": ["sleep", "30"], "timeout": 1},
        exec_task("sleep 30; echo never", timeout=1),
        {"type": "sleep", "seconds": 30, "timeout": 0.5},
    ]}
    t0 = time.monotonic()
    rc, out, err = cluster.submit(batch, timeout=60)
    took = time.monotonic() - t0
    assert rc == 1, (rc, out, err)
    assert took < 10, f"timeouts of 1 s took {took:.1f} s to report"
    r = by_task(cluster.results(batch_id_of(out)))
    assert sorted(r) == [0, 1, 2]
    for x in r.values():
        assert x["status"] == "failed", x
        assert x["stdout"] == "", x
    # The commands were killed, not left running behind the result.
    def sleepers():
        return [x for x in cluster.tagged_leftovers() if "sleep 30" in x[2]]

    wait_until(lambda: not sleepers(), 3)
    assert not sleepers(), f"timed-out commands still running: {sleepers()}"


def test_status_json(cluster):
    rc, out, err = cluster.submit({"name": "st-batch", "tasks": [
        exec_task("exit $0", i % 2) for i in range(10)]})
    assert rc == 1
    bid = batch_id_of(out)
    st = cluster.status()
    for key in ("workers", "nodes", "batches"):
        assert isinstance(st.get(key), list), f"status has no {key}: {st}"
    assert len(st["workers"]) == 3
    for w in st["workers"]:
        for k, t in (("id", int), ("node", str), ("host", str), ("pid", int),
                     ("state", str), ("respawns", int)):
            assert isinstance(w.get(k), t), f"worker.{k}: {w}"
        assert w["state"] in ("idle", "busy"), w
        assert w["respawns"] == 0, w
        assert pid_alive(w["pid"]), w
        assert "ftfarm-slot" in proc_cmdline(w["pid"]), w
    assert sorted(w["id"] for w in st["workers"]) == [0, 1, 2]
    assert sorted(w["node"] for w in st["workers"]) == \
        ["node1", "node2", "node3"]
    assert len(st["nodes"]) == 3
    for n in st["nodes"]:
        for k, t in (("name", str), ("state", str), ("reboots", int)):
            assert isinstance(n.get(k), t), f"node.{k}: {n}"
        assert n["reboots"] == 0 and n["state"] == "up", n
    assert sorted(n["name"] for n in st["nodes"]) == \
        ["node1", "node2", "node3"]
    bs = [b for b in st["batches"] if b["id"] == bid]
    assert len(bs) == 1, st["batches"]
    b = bs[0]
    for k, t in (("id", int), ("name", str), ("total", int), ("done", int),
                 ("failed", int)):
        assert isinstance(b.get(k), t), f"batch.{k}: {b}"
    assert b["name"] == "st-batch" and b["total"] == 10 and b["done"] == 10
    assert b["failed"] == 5, b
    # The plain text form works too.
    r = cluster.cli("status", "-c", cluster.config)
    assert r.returncode == 0 and "node1" in r.stdout, r


def test_start_twice_stop_twice(make_cluster):
    c = make_cluster(heartbeat_ms=200)
    t0 = time.monotonic()
    r = c.start()
    assert time.monotonic() - t0 < 30
    assert r.returncode == 0
    # Every worker registered when start returns.
    st = c.status()
    assert [w["state"] for w in st["workers"]].count("idle") + \
        [w["state"] for w in st["workers"]].count("busy") == 3, st["workers"]
    pids = c.worker_pids(st)
    master = c.master_pid
    assert master and pid_alive(master)

    r2 = c.start(check=False)
    assert r2.returncode != 0, "a second start of a running cluster succeeded"
    assert "already running" in r2.stderr, r2.stderr
    # The running cluster is untouched.
    assert c.worker_pids() == pids and pid_alive(master)
    rc, out, err = c.submit({"tasks": [exec_task("echo hi")]})
    assert rc == 0, err

    r = c.stop()
    assert r.returncode == 0, r.stderr
    assert_no_leftovers(c)
    assert not (c.state_dir / "control.sock").exists()
    r = c.stop()
    assert r.returncode == 0, f"second stop failed: {r.stderr}"
    r = c.cli("status", "-c", c.config)
    assert r.returncode != 0, "status of a stopped cluster succeeded"

    # It starts again after a stop, and batch ids go on.
    c.start()
    rc, out, err = c.submit({"tasks": [exec_task("echo again")]})
    assert rc == 0, err
    assert batch_id_of(out) == 2
    assert c.results(2)[0]["stdout"] == "again\n"
    c.stop()
    assert_no_leftovers(c)
    ev = [e["event"] for e in c.events()]
    assert ev.count("master_up") == 2 and ev.count("master_stopped") == 2, ev
    for e in c.events():
        assert "ts" in e and "event" in e, e


def test_output_encoding_and_cap(cluster):
    """results.jsonl stays one valid JSON object per line whatever a task
    prints; UTF-8 survives; output is kept up to output_cap (65536)."""
    batch = {"tasks": [
        exec_task("printf 'h\\303\\251llo \\342\\202\\254 \\360\\237\\230\\200'"),
        exec_task("printf 'a\\000b\\001\"\\\\\\n\\t\\377'"),
        exec_task("head -c 200000 /dev/zero | tr '\\0' x; echo tail >&2"),
        exec_task("printf 'line1\\nline2\\n'"),
    ]}
    rc, out, err = cluster.submit(batch)
    assert rc == 0, err
    path = cluster.state_dir / "batches" / str(batch_id_of(out)) / \
        "results.jsonl"
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 5, raw[:300]
    for line in lines[:-1]:
        json.loads(line.decode("utf-8"))       # strict: valid UTF-8 JSON
    r = by_task(cluster.results(batch_id_of(out)))
    assert r[0]["stdout"] == "héllo € 😀", r[0]
    assert r[1]["stdout"].startswith('a\x00b\x01"\\\n\t'), r[1]
    assert len(r[1]["stdout"]) == 9, r[1]   # the byte \377 as one char
    assert r[2]["stdout"] == "x" * 65536, len(r[2]["stdout"])
    assert r[2]["stderr"] == "tail\n", r[2]
    assert r[3]["stdout"] == "line1\nline2\n"


def thp_offered():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            modes = f.read()
    except OSError:
        return False
    return "[always]" in modes or "[madvise]" in modes


@pytest.mark.parametrize("user_tunables", [None, "glibc.malloc.check=0"])
def test_huge_heaps_are_not_inherited(make_cluster, user_tunables):
    """The master, a node's agent and a worker slot run with glibc's heap
    in transparent huge pages (each execs itself once with
    glibc.malloc.hugetlb=1, or the slot gets it from its agent), keep
    their names and pids, and the processes of tasks get the user's
    GLIBC_TUNABLES back, or none."""
    c = make_cluster(nodes=1, workers_per_node=1, task_events=False)
    c.env.pop("GLIBC_TUNABLES", None)
    if user_tunables:
        c.env["GLIBC_TUNABLES"] = user_tunables
    c.start()
    st = c.status()
    pid = c.worker_pids(st)[0]
    procs = {"ftfarm-slot": pid, "ftfarm-master": c.master_pid,
             "ftfarm-worker": st["nodes"][0]["agent_pid"]}
    for name, p in procs.items():
        with open(f"/proc/{p}/comm") as f:
            assert f.read().strip() == name, (name, p)
        if user_tunables is None:
            # (glibc cuts the variable it shows at the first tunable it
            # reads, so only a lone one can be seen.)
            env = proc_environ(p)
            assert (b"GLIBC_TUNABLES=glibc.malloc.hugetlb=1" in env) == \
                thp_offered(), (name, env)
    rc, out, err = c.submit({"name": "env", "tasks": [exec_task(
        "echo \"pid=$FTFARM_WORKER_PID\"; env | grep -E TUNABLES || true")]})
    assert rc == 0, err
    (r,) = c.results(batch_id_of(out))
    lines = sorted(r["stdout"].splitlines())
    want = [f"pid={pid}"]
    if user_tunables:
        want = sorted(want + [f"GLIBC_TUNABLES={user_tunables}"])
    assert lines == want, r
