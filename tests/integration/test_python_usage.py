"""ftfarm.Executor and the resources of its calls: what a call used (its
future's .usage) and the executor's whole (Executor.usage), a memory
limit per task (mem=: placed, and a call past it fails "memory:" while
its slot stays), and what the calls print going to files
(stdout=/stderr=)."""
import os
import sys
import time

import pytest

from conftest import ROOT

pytestmark = pytest.mark.timeout(300)

sys.path.insert(0, str(ROOT / "python"))
import ftfarm  # noqa: E402

MIB = 1 << 20


def busy(seconds):
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass
    return os.getpid()


def hog(nbytes):
    block = b"x" * nbytes
    return len(block)


def say(x):
    print(f"out {x}")
    print(f"err {x}", file=sys.stderr)
    return x


def test_executor_usage_memory_and_files(make_cluster, tmp_path):
    c = make_cluster(nodes=1, workers_per_node=2, heartbeat_ms=500)
    cfg = c.cfg
    cfg["nodes"][0]["mem"] = "2G"
    c.config.write_text(__import__("json").dumps(cfg))
    c.start()
    with ftfarm.Executor(str(c.config), mem="300M",
                         stdout=tmp_path / "%b.%t.out",
                         stderr=tmp_path / "%b.%t.err") as ex:
        f = ex.submit(busy, 0.5)
        pid = f.result(timeout=60)
        # The call's half second of CPU, and the interpreter's own
        # (unpickling, imports), which a loaded host makes larger.
        assert 0.45 <= f.usage["cpu_s"] <= 1.0, f.usage
        assert f.usage["max_rss"] > 5 * MIB, f.usage
        assert ex.submit(hog, 100 * MIB).result(timeout=60) == 100 * MIB
        g = ex.submit(hog, 1 << 30)
        with pytest.raises(ftfarm.Error, match="memory: used .* over its "
                           "limit of 300 MiB"):
            g.result(timeout=60)
        assert g.usage["max_rss"] > 300 * MIB
        # The slot stays: a new interpreter serves the next call.
        assert isinstance(ex.submit(busy, 0.01).result(timeout=60), int)
        assert list(ex.map(say, range(3))) == [0, 1, 2]
        u = ex.usage
        # Four calls of their own, the map's in one task or more.
        assert 5 <= u["tasks"] <= 7 and u["cpu_s"] >= 0.5, u
        assert u["max_rss"] == g.usage["max_rss"], u
        batch = ex.batch
    assert pid > 0
    outs = sorted(p.name for p in tmp_path.glob(f"{batch}.*.out"))
    assert len(outs) == u["tasks"], outs
    said = "".join(p.read_text() for p in tmp_path.glob(f"{batch}.*.out"))
    assert sorted(said.split("\n")[:-1]) == ["out 0", "out 1", "out 2"]
    errs = "".join(p.read_text() for p in tmp_path.glob(f"{batch}.*.err"))
    assert sorted(errs.split("\n")[:-1]) == ["err 0", "err 1", "err 2"]
    ev = c.events()
    assert not [e for e in ev if e["event"] in ("worker_dead",
                                                "task_reassigned")]
    c.stop()
