"""ftfarm.Executor against real clusters: calls, maps, exceptions with
their remote tracebacks, printed output, big arguments and values,
interpreters kept alive in the slots, slots SIGKILLed under a map, calls
that kill their slot (poison), a call's timeout, a master killed under
running calls, the executor's end (shutdown, cancel), how a map sizes its
tasks, the calls of an older client, what a slot's interpreter imports,
and, without a cluster, the slot's loop over a task's calls and the
sizer of a map's tasks."""
import base64
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT, pid_alive, wait_until

sys.path.insert(0, str(ROOT / "python"))
import ftfarm  # noqa: E402


def two_slots(make_cluster, **kw):
    """A started cluster of one node with two slots."""
    kw.setdefault("heartbeat_ms", 500)
    c = make_cluster(nodes=1, workers_per_node=2, **kw)
    c.start()
    return c


def square(x):
    return x * x


def slow_square(x):
    time.sleep(0.002)
    return x * x


def pause_square(x):
    time.sleep(0.01)
    return x * x


def my_pid(_=None):
    return os.getpid()


def kill_myself(_=None):
    os.kill(os.getpid(), signal.SIGKILL)


def kill_on(x, bad):
    if x == bad:
        os.kill(os.getpid(), signal.SIGKILL)
    return x + 1


class Bad(Exception):
    """An exception of the test's own (pickled by reference)."""


def raise_value_error(x):
    raise ValueError(f"no good: {x}")


def results_of(c, batch):
    return c.results(batch)


def pid_after(seconds):
    time.sleep(seconds)
    return os.getpid()


@pytest.mark.timeout(300)
def test_calls_maps_errors_and_output(make_cluster):
    c = two_slots(make_cluster)
    with ftfarm.Executor(str(c.config)) as ex:
        assert ex.submit(square, 7).result(60) == 49
        assert ex.submit(pow, 2, exp=10).result(60) == 1024
        # A remote exception comes back as itself, its traceback as text.
        with pytest.raises(ValueError) as e:
            ex.submit(raise_value_error, 5).result(60)
        assert str(e.value) == "no good: 5"
        assert "raise_value_error" in e.value.remote_traceback
        assert "ValueError: no good: 5" in e.value.remote_traceback
        assert isinstance(e.value.__cause__, ftfarm.RemoteTraceback)
        with pytest.raises(Bad, match="mine"):
            ex.submit(lambda: (_ for _ in ()).throw(Bad("mine"))).result(60)
        # What a call prints is its task's stdout.
        assert ex.submit(print, "printed", 42).result(60) is None
        # Maps: in order, exact, several iterables, fixed and auto chunks.
        assert list(ex.map(square, range(20000))) == \
            [x * x for x in range(20000)]
        assert list(ex.map(lambda a, b: a - b, range(50), range(0, 100, 2),
                           chunksize=7)) == [-x for x in range(50)]
        assert list(ex.map(square, [])) == []
        # 1,000 calls, one task each, answered by the slots' interpreters.
        pids = set(ex.map(my_pid, range(1000), chunksize=1))
        assert 1 <= len(pids) <= 6, pids
        # A map raises at the item that raised, after the ones before.
        it = ex.map(lambda x: 10 // (3 - x), range(6))
        assert [next(it), next(it), next(it)] == [3, 5, 10]
        with pytest.raises(ZeroDivisionError):
            next(it)
        batch = ex.batch
    lines = results_of(c, batch)
    assert any(r["stdout"] == "printed 42\n" and r["status"] == "ok"
               for r in lines), "the print's output is not a task's stdout"
    tasks = [r["task"] for r in lines]
    assert len(tasks) == len(set(tasks)), "a task with two result lines"
    assert c.cli("wait", "-c", c.config, batch).returncode == 1  # raised
    st = c.status()
    row = [b for b in st["batches"] if b["id"] == batch][0]
    assert row["state"] == "finished" and row["total"] == len(lines)


@pytest.mark.timeout(300)
def test_big_argument_and_value(make_cluster):
    c = two_slots(make_cluster)
    blob = os.urandom(16 << 20)
    with ftfarm.Executor(str(c.config)) as ex:
        # 16 MiB in (a file of the batch's spool), its digest out.
        import hashlib
        want = hashlib.sha256(blob).hexdigest()
        got = ex.submit(lambda b: hashlib.sha256(b).hexdigest(), blob)
        assert got.result(120) == want
        # 16 MiB out (a file the slot writes), bytes equal.
        out = ex.submit(lambda n: bytes(range(256)) * n, 65536).result(120)
        assert out == bytes(range(256)) * 65536 and len(out) == 16 << 20
        # A value that cannot be pickled is an error, not a hang.
        with pytest.raises(ftfarm.Error, match="cannot be pickled"):
            ex.submit(lambda: threading.Lock()).result(60)


@pytest.mark.heavy
@pytest.mark.timeout(400)
def test_slots_killed_under_a_map_every_result_exact(make_cluster):
    c = two_slots(make_cluster)
    n = 20000
    killed = []

    def killer():
        time.sleep(1.0)
        for _ in range(2):
            pids = c.worker_pids()
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
            time.sleep(1.5)

    with ftfarm.Executor(str(c.config)) as ex:
        ex.submit(square, 1).result(60)         # both interpreters warm
        t = threading.Thread(target=killer)
        t.start()
        got = list(ex.map(slow_square, range(n), chunksize=50))
        t.join()
        batch = ex.batch
    assert got == [x * x for x in range(n)]
    assert len(killed) == 2
    evs = c.events()
    dead = [e for e in evs if e["event"] == "worker_dead"]
    assert len(dead) >= 2, "the slots were not killed under the map"
    lines = results_of(c, batch)
    tasks = [r["task"] for r in lines]
    assert len(tasks) == len(set(tasks))
    assert all(r["status"] == "ok" for r in lines)


@pytest.mark.timeout(300)
def test_a_call_that_kills_its_slot_fails_and_the_next_succeeds(
        make_cluster):
    c = two_slots(make_cluster, max_attempts=3)
    with ftfarm.Executor(str(c.config)) as ex:
        with pytest.raises(ftfarm.Error, match="poison"):
            ex.submit(kill_myself).result(120)
        assert ex.submit(square, 12).result(60) == 144
        # In a map, only the call that kills fails: its chunk is split.
        it = ex.map(kill_on, range(40), [17] * 40, chunksize=40)
        assert [next(it) for _ in range(17)] == list(range(1, 18))
        with pytest.raises(ftfarm.Error, match="poison"):
            next(it)
        assert ex.submit(square, 3).result(60) == 9
    st = c.status()
    assert all(n["state"] == "up" for n in st["nodes"]), st["nodes"]


@pytest.mark.timeout(300)
def test_a_call_past_the_timeout_raises_and_the_slot_goes_on(make_cluster):
    c = two_slots(make_cluster)
    with ftfarm.Executor(str(c.config), timeout=1.0) as ex:
        pid = ex.submit(my_pid).result(60)
        with pytest.raises(TimeoutError):
            ex.submit(time.sleep, 30).result(60)
        assert ex.submit(square, 5).result(60) == 25
        # The interpreter survived its interrupted call.
        assert pid in set(ex.map(my_pid, range(200), chunksize=1))


@pytest.mark.timeout(300)
def test_futures_survive_a_master_killed(make_cluster):
    c = two_slots(make_cluster, lease_ms=2000)
    with ftfarm.Executor(str(c.config)) as ex:
        futs = [ex.submit(pause_square, i) for i in range(300)]
        futs += [ex.submit(time.sleep, 0.05) for _ in range(40)]
        time.sleep(0.3)
        master = c.master_pid or int((c.state_dir / "master.pid")
                                     .read_text().split()[0])
        os.kill(master, signal.SIGKILL)
        assert sum(not f.done() for f in futs) > 100, "all ran before"
        later = [ex.submit(square, i) for i in range(100)]
        assert [f.result(120) for f in futs[:300]] == \
            [i * i for i in range(300)]
        assert [f.result(120) for f in later] == [i * i for i in range(100)]
        assert all(f.result(120) is None for f in futs[300:])
        batch = ex.batch
    assert wait_until(lambda: not pid_alive(master), 10)
    lines = results_of(c, batch)
    tasks = [r["task"] for r in lines]
    assert sorted(tasks) == list(range(len(futs) + len(later)))


@pytest.mark.timeout(200)
def test_shutdown_and_submit_after(make_cluster):
    c = two_slots(make_cluster)
    ex = ftfarm.Executor(str(c.config), name="ending")
    futs = [ex.submit(time.sleep, 0.01) for _ in range(50)]
    ex.shutdown(wait=True)
    assert all(f.done() and f.exception() is None for f in futs)
    with pytest.raises(RuntimeError):
        ex.submit(square, 1)
    assert c.cli("wait", "-c", c.config, ex.batch).returncode == 0
    st = c.status()
    row = [b for b in st["batches"] if b["id"] == ex.batch][0]
    assert row["name"] == "ending" and row["state"] == "finished"
    assert row["total"] == 50
    # cancel_futures: what has not gone out is cancelled, the rest runs.
    ex2 = ftfarm.Executor(str(c.config))
    futs = [ex2.submit(time.sleep, 0.2) for _ in range(30)]
    ex2.shutdown(wait=True, cancel_futures=True)
    assert all(f.done() for f in futs)
    assert any(not f.cancelled() for f in futs)


def test_bad_arguments_are_refused_at_once(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"name": "x", "state_dir": str(tmp_path / "s"),
                               "nodes": [{"name": "n", "host": "localhost",
                                          "workers": 1}]}))
    with pytest.raises(ValueError):
        ftfarm.Executor(str(cfg), cpus=0)
    with pytest.raises(ValueError):
        ftfarm.Executor(str(cfg), timeout=-1)
    with pytest.raises(ftfarm.Error, match="no master is running"):
        ftfarm.Executor(str(cfg))


@pytest.mark.timeout(300)
def test_futures_survive_a_standby_taking_over(make_cluster):
    c = two_slots(make_cluster, lease_ms=2000)
    r = c.cli("start", "--standby", "-c", c.config)
    assert r.returncode == 0 and "standby for cluster" in r.stdout, r
    sup = int((c.state_dir / "supervisor.pid").read_text().split()[0])
    master = int((c.state_dir / "master.pid").read_text().split()[0])
    with ftfarm.Executor(str(c.config), reconnect_timeout=120) as ex:
        futs = [ex.submit(pause_square, i) for i in range(400)]
        time.sleep(0.5)
        os.kill(sup, signal.SIGKILL)
        os.kill(master, signal.SIGKILL)
        assert sum(not f.done() for f in futs) > 100, "all ran before"
        later = [ex.submit(square, i) for i in range(50)]
        assert [f.result(200) for f in futs] == [i * i for i in range(400)]
        assert [f.result(200) for f in later] == [i * i for i in range(50)]
        batch = ex.batch
    assert int((c.state_dir / "supervisor.pid").read_text().split()[0]) \
        != sup, "no standby took over"
    tasks = [r["task"] for r in results_of(c, batch)]
    assert sorted(tasks) == list(range(450))


@pytest.mark.timeout(300)
def test_a_map_starts_with_a_call_a_task_then_grows_its_tasks(
        make_cluster):
    c = two_slots(make_cluster)
    with ftfarm.Executor(str(c.config)) as ex:
        ex.submit(square, 1).result(60)         # an interpreter up
        # Calls of unknown length go one a task at first: 8 calls of
        # 0.3 s are 8 tasks, on both slots (16 calls a task, as before,
        # left one slot idle).
        before = len(results_of(c, ex.batch))
        pids = list(ex.map(pid_after, [0.3] * 8))
        assert len(set(pids)) == 2, pids
        assert len(results_of(c, ex.batch)) - before == 8
        # Short calls: the tasks grow towards CHUNK_MAX calls (as the
        # slots time them, whatever the wait in the window).
        before = len(results_of(c, ex.batch))
        n = 200_000
        assert list(ex.map(square, range(n))) == [x * x for x in range(n)]
        tasks = len(results_of(c, ex.batch)) - before
        assert tasks < n / 100, f"{tasks} tasks for {n} no-op calls"
        batch = ex.batch
    lines = results_of(c, batch)
    assert len({r["task"] for r in lines}) == len(lines)
    assert all(r["status"] == "ok" for r in lines)


def python_task(fn, calls):
    """A task of type python calling FN once per entry of CALLS, pickled
    as given (no spool: both are small)."""
    from ftfarm import _calls
    spec = {"type": "python", "python": sys.executable}
    _calls.Functions(None).put(spec, fn)
    spec["args"] = base64.b64encode(pickle.dumps(calls)).decode()
    return spec


@pytest.mark.timeout(300)
def test_an_older_clients_calls_are_answered_as_it_reads_them(
        make_cluster):
    c = two_slots(make_cluster)
    old = [((3,), {}), ((4,), {})]              # (args, kwargs) pairs
    new = ("args", [(3,), (4,)], None)
    with ftfarm.Client(str(c.config)) as cl:
        bid = cl.submit({"name": "formats", "tasks": [
            python_task(square, old), python_task(square, new),
            python_task(raise_value_error, new)]})
        cl.wait(bid, timeout=120)
        got = {r["task"]: r for r in cl.results(bid)}
    values = {t: pickle.loads(base64.b64decode(r["value"][4:]))
              for t, r in got.items()}
    assert values[0] == [(0, 9), (0, 16)]       # the list it reads
    assert values[1] == ("values", [9, 16])
    assert [o[0] for o in values[2]] == [1, 1]
    assert str(values[2][1][1]) == "no good: 4"
    assert [got[t]["status"] for t in range(3)] == ["ok", "ok", "failed"]


def test_a_slots_interpreter_imports_no_client_module():
    # ftfarm/__init__.py imports Client and Executor when first used: a
    # slot's interpreter starts without them (some 50 ms less).
    code = ("import sys, ftfarm._slot; print(' '.join(sorted(m for m in "
            "sys.modules if m.startswith('ftfarm'))))")
    out = subprocess.run(["/usr/bin/python3", "-c", code], check=True,
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ,
                              "PYTHONPATH": str(ROOT / "python")}).stdout
    assert out.split() == ["ftfarm", "ftfarm._errors", "ftfarm._slot"]
    from ftfarm import Client, RemoteTraceback      # there when asked for
    assert (ftfarm.Executor.__name__, Client.__name__) == \
        ("Executor", "Client")
    assert issubclass(RemoteTraceback, Exception)


def add(a, b=0):
    return a + b


def test_a_slot_runs_calls_in_a_loop_and_tells_each_outcome():
    # Without a cluster: the slot's loop over a task's calls (_slot.py).
    from ftfarm import _calls, _slot
    args = [(1,), (2,), (3,)]
    assert _slot._run_calls(add, args, None, None) == ("values", [1, 2, 3])
    # A call that raises in the plain loop: the calls after it still run.
    outs = _slot._run_calls(lambda x: 10 // (2 - x), args, None, None)
    assert [o[0] for o in outs] == [0, 1, 0] and outs[2][1] == -10
    assert isinstance(outs[1][1], ZeroDivisionError)
    assert "ZeroDivisionError" in outs[1][2] and outs[1][1].__traceback__ \
        is None
    # Keyword arguments, and a limit on each call.
    assert _slot._run_calls(add, args, [{}, {"b": 10}, {}], None) == \
        ("values", [1, 12, 3])
    old = signal.signal(signal.SIGALRM, _slot._on_alarm)
    try:
        outs = _slot._run_calls(lambda s: time.sleep(s) or s,
                                [(0,), (5,), (0.01,)], None, 0.3)
    finally:
        signal.signal(signal.SIGALRM, old)
    assert [o[0] for o in outs] == [0, 1, 0]
    assert isinstance(outs[1][1], TimeoutError)
    # What the client reads of each form.
    assert _calls.outcome(("values", [7, 8]), 1) == (0, 8)
    assert _calls.returned(outs) is None and _calls.outcome(outs, 2)[1] \
        == 0.01


def test_map_sizes_grow_from_the_slots_time_and_stop_at_the_max():
    from ftfarm.executor import CHUNK_MAX, CHUNK_SECONDS, _Sizer
    s = _Sizer(None, 2)
    assert s.size == 1
    sizes = []
    for _ in range(10):                 # 2 us a call, 100 us a task
        s.seen(s.size, 100e-6 + s.size * 2e-6)
        sizes.append(s.size)
    assert sizes[:4] == [4, 16, 64, 256] and sizes[-1] == CHUNK_MAX
    s = _Sizer(None, 2)
    for _ in range(10):                 # a call of 50 ms: one a task
        s.seen(s.size, 0.05 * s.size)
    assert s.size == 1
    s = _Sizer(None, 2)
    for _ in range(20):                 # 1 ms a call
        s.seen(s.size, 0.001 * s.size)
    assert s.size == int(CHUNK_SECONDS / 0.001)
    s = _Sizer(7, 2)
    s.seen(7, 10.0)
    assert s.size == 7                  # chunksize given: kept
