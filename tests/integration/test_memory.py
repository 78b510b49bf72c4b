"""Memory as a resource: scheduled, enforced, survived.

- A node's "mem" is never overcommitted: a node of 1G runs two tasks of
  400M at once, never three (from the times the tasks write).
- A task past its "mem" fails with a reason that starts "memory:" within
  2 s, once, while the other slot's task finishes ok; its node is not
  blamed.  Once where the agent makes memory cgroups (cgroup v1 here, as
  root), once by sampling ("mem_enforce": "sample", what an agent that
  may not make cgroups does).
- A cluster started inside a memory cgroup of 2 GiB: a task of no limit
  that takes 4 GiB is what the kernel kills; the master and the agents
  live and the next batch runs.
- A task asking more than any node has is refused at submit."""
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import (assert_no_leftovers, batch_id_of, pid_alive,
                      read_jsonl, wait_until)

pytestmark = pytest.mark.timeout(300)

HERE = Path(__file__).resolve().parent
MIB = 1 << 20
HOG = [sys.executable, str(HERE / "memhog.py")]


def results(c, bid):
    return read_jsonl(c.state_dir / "batches" / str(bid) / "results.jsonl")


def mem_cluster(make_cluster, enforce, workers=3, mem="1G"):
    c = make_cluster(nodes=1, workers_per_node=workers, heartbeat_ms=500,
                     mem_enforce=enforce)
    cfg = json.loads(c.config.read_text())
    cfg["nodes"][0]["mem"] = mem
    c.config.write_text(json.dumps(cfg, indent=2) + "\n")
    c.start()
    return c


def start_time():
    """Seconds memhog takes to start and end, taking a page, now."""
    t = time.monotonic()
    subprocess.run(HOG + ["4096"], check=True, capture_output=True,
                   timeout=60)
    return time.monotonic() - t


def check_over_limit(c):
    """A task of mem 100M that takes 1 GiB fails for its memory, once,
    within 2 s; the task beside it finishes; nobody is blamed."""
    batch = {"name": "over", "tasks": [
        {"type": "exec", "argv": HOG + [str(1 << 30), "5"], "mem": "100M"},
        {"type": "exec", "argv": ["sh", "-c", "sleep 2; echo fine"],
         "mem": "100M"}]}
    rc, out, err = c.submit(batch, timeout=60)
    assert rc == 1, out + err
    bid = batch_id_of(out)
    by = {x["task"]: x for x in results(c, bid)}
    hog, other = by[0], by[1]
    assert hog["status"] == "failed" and hog["attempt"] == 1, hog
    assert hog["reason"].startswith("memory: used "), hog
    assert "100 MiB" in hog["reason"], hog
    # Within 2 s of its start: the interpreter's own start, which a loaded
    # host stretches, is measured here and not counted.
    assert hog["seconds"] < 2 + start_time(), hog
    assert other["status"] == "ok" and other["stdout"] == "fine\n", other
    evs = c.events()
    assert not [e for e in evs if e["event"] in
                ("worker_dead", "task_reassigned", "worker_blamed")], evs
    assert [n["state"] for n in c.status()["nodes"]] == ["up"]
    return hog


def test_node_memory_and_cgroup_limit(make_cluster, tmp_path):
    c = mem_cluster(make_cluster, "auto")
    stamp = tmp_path / "t"
    stamp.mkdir()
    r = c.cli("submit", "-c", c.config, "--wait", "--mem", "400M",
              "--array", "0-5", "--", "sh", "-c",
              f"date +%s.%N > {stamp}/{{}}.s; sleep 0.6; "
              f"date +%s.%N > {stamp}/{{}}.e")
    assert r.returncode == 0, r.stderr
    spans = [(float((stamp / f"{i}.s").read_text()),
              float((stamp / f"{i}.e").read_text())) for i in range(6)]
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    at_once = max(sum(w for _, w in edges[:k + 1])
                  for k in range(len(edges)))
    assert at_once == 2, spans
    hog = check_over_limit(c)
    if os.geteuid() == 0 and Path("/sys/fs/cgroup/memory").is_dir():
        assert "OOM killer" in hog["reason"], hog   # in its cgroup
    r = c.cli("submit", "-c", c.config, "--mem", "2G", "--", "true")
    assert r.returncode == 2
    assert "tasks[0].mem: no node has 2 GiB of memory (the most: 1 GiB)" \
        in r.stderr, r.stderr
    c.stop()
    assert_no_leftovers(c)


def test_memory_limit_by_sampling(make_cluster):
    c = mem_cluster(make_cluster, "sample", workers=2)
    hog = check_over_limit(c)
    assert hog["reason"].endswith("(killed by ftfarm)"), hog
    c.stop()
    assert_no_leftovers(c)


# ---- a cluster inside a memory cgroup of 2 GiB ----

def own_memory_cgroup():
    """The directory of this process's v1 memory cgroup, or None."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrl, path = line.split(":", 2)
            if "memory" in ctrl.split(","):
                d = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
                return d if (d / "memory.limit_in_bytes").exists() else None
    except OSError:
        pass
    return None


def remove_cgroup(d):
    """Kill what is left in cgroup D (this test's processes), then remove
    it and the cgroups in it, deepest first."""
    for sub in sorted((p for p in d.rglob("*") if p.is_dir()),
                      key=lambda p: len(p.parts), reverse=True) + [d]:
        try:
            for pid in (sub / "cgroup.procs").read_text().split():
                os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
    for sub in sorted((p for p in d.rglob("*") if p.is_dir()),
                      key=lambda p: len(p.parts), reverse=True) + [d]:
        for _ in range(50):
            try:
                sub.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)


def unified_memory_root():
    """The unified hierarchy's mount when it has the memory controller
    (cgroup v2), or None."""
    root = Path("/sys/fs/cgroup")
    try:
        if "memory" in (root / "cgroup.controllers").read_text().split():
            return root
    except OSError:
        pass
    return None


def make_2g(parent, v2):
    """A new cgroup of 2 GiB (no swap) in PARENT: its directory."""
    d = parent / f"ftfarm-test-{uuid.uuid4().hex[:12]}"
    d.mkdir()
    limits = (("memory.max", "memory.swap.max") if v2 else
              ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"))
    (d / limits[0]).write_text(str(2 << 30))
    if (d / limits[1]).exists():
        (d / limits[1]).write_text("0" if v2 else str(2 << 30))
    return d


@pytest.fixture
def cgroup_2g():
    """A memory cgroup of 2 GiB: in this process's own (cgroup v1), or at
    the top of the unified hierarchy (v2, the memory controller turned on
    for the top's children if it is not)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a memory cgroup")
    v1 = own_memory_cgroup()
    root = None if v1 else unified_memory_root()
    if v1 is None and root is None:
        pytest.skip("no memory cgroup controller mounted")
    if root is not None and "memory" not in \
            (root / "cgroup.subtree_control").read_text().split():
        (root / "cgroup.subtree_control").write_text("+memory")
    d = make_2g(v1 or root, root is not None)
    try:
        yield d
    finally:
        remove_cgroup(d)


def test_cluster_in_a_2g_cgroup_survives_a_4g_task(make_cluster,
                                                    cgroup_2g):
    c = make_cluster(nodes=2, workers_per_node=1, heartbeat_ms=500)
    procs = str(cgroup_2g / "cgroup.procs")

    def enter():
        with open(procs, "w") as f:
            f.write("0")

    r = subprocess.run([c.ftfarm, "start", "-c", str(c.config)],
                       capture_output=True, text=True, env=c.env,
                       timeout=120, preexec_fn=enter)
    c._record_pids()
    assert r.returncode == 0, r.stdout + r.stderr + c.mpirun_log()
    c.started = True
    st = c.status()
    master = c.master_pid
    agents = sorted(n["agent_pid"] for n in st["nodes"])
    inside = set((cgroup_2g / "cgroup.procs").read_text().split())
    assert str(master) in inside
    rc, out, err = c.submit({"name": "hog", "tasks": [
        {"type": "exec", "argv": HOG + [str(4 << 30), "5"]},
        {"type": "exec", "argv": ["sh", "-c", "sleep 1; echo fine"]}]},
        timeout=120)
    assert rc == 1, out + err
    by = {x["task"]: x for x in results(c, batch_id_of(out))}
    assert by[0]["status"] == "failed" and by[0]["exit"] == 137, by[0]
    assert by[1]["status"] == "ok", by[1]
    assert pid_alive(master) and all(pid_alive(p) for p in agents)
    st = c.status()
    assert sorted(n["agent_pid"] for n in st["nodes"]) == agents
    assert [n["state"] for n in st["nodes"]] == ["up", "up"]
    rc, out, err = c.submit({"name": "next", "tasks": [
        {"type": "exec", "argv": ["echo", str(i)]} for i in range(4)]})
    assert rc == 0, out + err
    assert not [e for e in c.events() if e["event"] == "worker_dead"]
    c.stop()
    assert_no_leftovers(c)
    assert wait_until(lambda: not (cgroup_2g / "cgroup.procs")
                      .read_text().split(), 10)


@pytest.mark.long
@pytest.mark.timeout(600)
def test_mixed_memory_never_overcommits_and_leaves_no_cgroup(make_cluster,
                                                             tmp_path):
    """200 tasks of 100M, 300M and 400M on a node of 1G with 4 slots: what
    runs at once never adds up to more than 1G (from the times the tasks
    write), one cgroup per slot whatever the tasks, none left after the
    stop."""
    c = mem_cluster(make_cluster, "auto", workers=4)
    stamp = tmp_path / "t"
    stamp.mkdir()
    rnd = random.Random(53)
    sizes = [rnd.choice((100, 300, 400)) for _ in range(200)]
    tasks = [{"type": "exec", "mem": f"{m}M", "argv": [
        "sh", "-c", f"date +%s.%N > {stamp}/{i}.s; sleep "
        f"{rnd.uniform(0, 0.1):.3f}; date +%s.%N > {stamp}/{i}.e"]}
        for i, m in enumerate(sizes)]
    rc, out, err = c.submit({"name": "mixed", "tasks": tasks}, timeout=300)
    assert rc == 0, out + err
    edges = []
    for i, m in enumerate(sizes):
        edges.append((float((stamp / f"{i}.s").read_text()), m))
        edges.append((float((stamp / f"{i}.e").read_text()), -m))
    held = most = 0
    for _, m in sorted(edges):
        held += m
        most = max(most, held)
    assert most <= 1024, most
    parent = own_memory_cgroup()
    if parent is not None and os.geteuid() == 0:
        agent, = [n["agent_pid"] for n in c.status()["nodes"]]
        node = parent / f"ftfarm-{agent}"
        slots = [d for d in node.iterdir() if d.is_dir()]
        assert 1 <= len(slots) <= 4, slots
        c.stop()
        assert wait_until(lambda: not node.exists(), 10), node
    else:
        c.stop()
    assert_no_leftovers(c)
