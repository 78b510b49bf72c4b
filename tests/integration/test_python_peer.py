"""CPython's own concurrent.futures test suite against ftfarm.Executor
(peer_futures_suite.py beside this file: the executor, wait and
as_completed tests whole, the pools' deadlock cases with ftfarm's
outcomes) on a real cluster of two slots.  Two minutes: make test-long."""
import subprocess
import sys

import pytest

from conftest import ROOT

SUITE = ROOT / "tests" / "integration" / "peer_futures_suite.py"


@pytest.mark.long
@pytest.mark.timeout(900)
def test_cpython_concurrent_futures_suite_passes(make_cluster):
    pytest.importorskip("test.test_concurrent_futures",
                        reason="Debian's libpython3.11-testsuite")
    c = make_cluster(nodes=1, workers_per_node=2, heartbeat_ms=500)
    c.start()
    r = subprocess.run([sys.executable, str(SUITE)], capture_output=True,
                       text=True, timeout=850,
                       env=dict(c.env, FTFARM_TEST_CONFIG=str(c.config)))
    tail = r.stderr[-3000:]
    assert r.returncode == 0, tail
    assert "\nOK" in r.stderr and "Ran " in r.stderr, tail
