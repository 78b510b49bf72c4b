"""A task's output files and what it used.

One cluster of one node with two slots:
- a task writing 200 MB to stdout gets a file of exactly those bytes,
  written as it runs, and a result line with the file's path and tail;
- a task whose slot is killed while it runs is run again, and each
  attempt's output has a file of its own;
- a path that cannot be opened fails that task alone, with the reason,
  once, and the node goes on;
- a file removed and made again while its task runs gets what the task
  wrote put back;
- cpu_s of a 2-second busy loop and max_rss of a 300 MiB allocation;
- `ftfarm batch` sums the usage, `ftfarm cat` prints the files."""
import filecmp
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import (assert_no_leftovers, batch_id_of, read_jsonl,
                      wait_until)

pytestmark = pytest.mark.timeout(300)

HERE = Path(__file__).resolve().parent
MIB = 1 << 20
CAP = 65536


def results(c, bid):
    return read_jsonl(c.state_dir / "batches" / str(bid) / "results.jsonl")


def test_output_files_retries_and_usage(make_cluster, tmp_path):
    c = make_cluster(nodes=1, workers_per_node=2, heartbeat_ms=500)
    c.start()
    out = tmp_path / "out"
    out.mkdir()

    # 200 MB through stdout, and a slow writer read while it runs.
    ref = tmp_path / "ref.txt"
    subprocess.run(f"seq 1 24000000 > {ref}", shell=True, check=True)
    assert ref.stat().st_size > 200_000_000
    r = c.cli("submit", "-c", c.config, "--name", "big", "--stdout",
              out / "%b.%t.out", "--", "sh", "-c", "seq 1 24000000; "
              "echo done >&2")
    assert r.returncode == 0, r.stderr
    big = batch_id_of(r.stdout)
    # A relative pattern is the submitter's working directory's.
    (Path(c.dir) / "out").mkdir()
    slow_file = Path(c.dir) / "out" / "slow.0"
    r = subprocess.run([c.ftfarm, "submit", "-c", str(c.config), "--name",
                        "slow", "--stdout", "out/slow.%t", "--", "sh", "-c",
                        "echo first; sleep 3; echo second"],
                       capture_output=True, text=True, env=c.env,
                       cwd=c.dir, timeout=60)
    assert r.returncode == 0, r.stderr
    slow = batch_id_of(r.stdout)
    assert wait_until(lambda: slow_file.exists() and
                      slow_file.read_text() == "first\n", 20), \
        "the file is not written while the task runs"
    assert c.cli("wait", "-c", c.config, big, timeout=120).returncode == 0
    line, = results(c, big)
    path = out / f"{big}.0.out"
    assert line["stdout_path"] == str(path)
    assert filecmp.cmp(path, ref, shallow=False), "the bytes differ"
    with open(ref, "rb") as f:
        f.seek(-CAP, 2)
        assert line["stdout"] == f.read().decode()
    assert line["stderr"] == "done\n" and "stderr_path" not in line
    assert c.cli("wait", "-c", c.config, slow, timeout=60).returncode == 0
    assert slow_file.read_text() == "first\nsecond\n"

    # Attempt 1 kills its own slot: attempt 2 writes a file of its own.
    mark = tmp_path / "killed-once"
    r = c.cli("submit", "-c", c.config, "--wait", "--name", "retry",
              "--stdout", out / "r.%t.out", "--stderr", out / "r.%t.%a.err",
              "--", "sh", "-c", f"echo attempt; if [ ! -e {mark} ]; then "
              f"touch {mark}; echo one; echo e1 >&2; kill -9 $PPID; "
              "sleep 5; fi; echo two; echo e2 >&2")
    assert r.returncode == 0, r.stderr
    retry = batch_id_of(r.stdout)
    line, = results(c, retry)
    assert line["status"] == "ok" and line["attempt"] == 2, line
    assert line["stdout_path"] == str(out / "r.0.out.2")
    assert (out / "r.0.out").read_text() == "attempt\none\n"
    assert (out / "r.0.out.2").read_text() == "attempt\ntwo\n"
    assert (out / "r.0.1.err").read_text() == "e1\n"
    assert (out / "r.0.2.err").read_text() == "e2\n"
    assert line["stdout"] == "attempt\ntwo\n"

    # A file removed and made again while its task runs (as Snakemake
    # does to a rule's log): what the task wrote is put back after what
    # is there then.
    log = out / "log.txt"
    r = c.cli("submit", "-c", c.config, "--wait", "--stdout", log, "--",
              "sh", "-c", f"echo one; rm {log}; echo mine > {log}; "
              "echo three")
    assert r.returncode == 0, r.stderr
    assert log.read_text() == "mine\none\nthree\n"

    # A path that cannot be opened fails its task alone, once.
    r = c.cli("submit", "-c", c.config, "--wait", "--name", "bad",
              "--array", "0-1", "--stdout", "/proc/version/%t.out", "--",
              "echo", "never")
    assert r.returncode == 1, r.stdout + r.stderr
    bad = batch_id_of(r.stdout)
    lines = sorted(results(c, bad), key=lambda x: x["task"])
    assert [x["attempt"] for x in lines] == [1, 1]
    for x in lines:
        assert x["status"] == "failed" and x["exit"] == 127
        assert x["reason"] == (f"stdout: cannot open /proc/version/"
                               f"{x['task']}.out: Not a directory"), x
    evs = c.events()
    assert not [e for e in evs if e.get("batch") == bad and
                e["event"] in ("task_reassigned", "worker_blamed")]
    st = c.status()
    assert [n["state"] for n in st["nodes"]] == ["up"]

    # What tasks used: a 2-second busy loop, a 300 MiB allocation.
    busy = ("import time\nt = time.process_time()\n"
            "while time.process_time() - t < 2:\n    pass\n")
    batch = {"name": "usage", "tasks": [
        {"type": "exec", "argv": [sys.executable, "-c", busy]},
        {"type": "exec", "argv": [sys.executable, str(HERE / "memhog.py"),
                                  str(300 * MIB), "0.2"]}]}
    rc, o, err = c.submit(batch)
    assert rc == 0, err
    usage = batch_id_of(o)
    by = {x["task"]: x for x in results(c, usage)}
    assert abs(by[0]["cpu_s"] - 2) <= 0.2, by[0]
    assert abs(by[1]["max_rss"] - 300 * MIB) <= 30 * MIB, by[1]
    r = c.cli("batch", "-c", c.config, usage, "--json")
    row = json.loads(r.stdout)
    assert abs(row["cpu_s"] - by[0]["cpu_s"] - by[1]["cpu_s"]) < 1e-3
    assert row["max_rss"] == by[1]["max_rss"]
    r = c.cli("batch", "-c", c.config, usage)
    assert "CPU seconds" in r.stdout and "MiB" in r.stdout, r.stdout

    # cat prints the files, all of them, not the tails.
    r = c.cli("cat", "-c", c.config, retry)
    assert r.stdout == "attempt\ntwo\n"
    r = subprocess.run([c.ftfarm, "cat", "-c", c.config, str(big)],
                       capture_output=True, env=c.env, timeout=60)
    assert r.returncode == 0 and len(r.stdout) == ref.stat().st_size
    # Every result line says what its task used.
    for bid in (big, slow, retry, bad, usage):
        for x in results(c, bid):
            assert "cpu_s" in x and "max_rss" in x, x
    c.stop()
    assert_no_leftovers(c)
