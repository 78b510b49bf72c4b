"""Faults together: the rules that keep several faults at once from failing
a task or a node by mistake (docs/faults.md): a task's signal 9 when its
worker dies right after, a node whose respawned workers keep dying soon
after their hello, a spawn that hangs before a power cycle, and blame that
does not depend on which of a worker's messages the master sees first."""
import time

import pytest

from conftest import check_exactly_once, exec_task, wait_until

pytestmark = pytest.mark.timeout(180)


def test_sigkill_with_its_worker_is_lost_not_failed(make_cluster, tmp_path):
    """A task killed by signal 9 whose worker dies right after is run
    again, not failed: power loss kills a node's tasks and its workers in
    one instant, and whichever the worker sees first is no verdict on the
    task."""
    # One worker: no idle one takes a copy of the task meanwhile.
    c = make_cluster(heartbeat_ms=500, nodes=1, workers_per_node=1)
    c.start()
    mark = tmp_path / "first"
    # First attempt: the task's shell SIGKILLs itself (the worker reports
    # "signal 9"), and a moment later its worker is SIGKILLed too.
    script = (f'if [ -e {mark} ]; then echo again; exit 0; fi; '
              f'touch {mark}; '
              f'setsid sh -c "sleep 0.2; kill -9 $PPID" </dev/null '
              f'>/dev/null 2>&1 & kill -9 $$')
    rc, out, err = c.submit({"name": "kill9", "tasks": [exec_task(script)]})
    assert rc == 0, out + err
    bid = int(out.split()[0])
    res = c.results(bid)
    assert not check_exactly_once(res, 1, lambda i: "again\n"), res
    assert res[0]["attempt"] >= 2, res
    dead = [e for e in c.events() if e["event"] == "worker_dead"]
    assert dead, "the worker was not killed: the test tested nothing"
    assert "lost, not failed" in c.master_log()
    c.stop()
