"""The wordcount job on a real 3-worker cluster.

Every successful job's output file is compared byte for byte with the
independent reference, tests/wordcount_ref.py, on the same inputs.  Most
tests share one cluster (module scope); the tests that kill or stop workers
get clusters of their own.  Error cases check that the batch fails with one
clear reason (submit exits non-zero and says why) and that the master still
serves the next batch.
"""
import glob
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (ROOT, Cluster, batch_id_of, check_exactly_once,
                      pid_alive, proc_cmdline, proc_environ, proc_state,
                      wait_until)

pytestmark = pytest.mark.timeout(300)

REF = ROOT / "tests" / "wordcount_ref.py"
FORTUNES = Path("/usr/share/games/fortunes")
LICENSES = Path("/usr/share/common-licenses")


# ---- helpers ----

def reference(tmp, inputs, delimiters=None):
    """The reference output for INPUTS (bytes)."""
    out = Path(tmp) / f"ref-{time.monotonic_ns()}.txt"
    args = ["/usr/bin/python3", str(REF), "-o", str(out)]
    if delimiters:
        args += ["--delimiters", str(delimiters)]
    subprocess.run(args + [str(p) for p in inputs], check=True,
                   capture_output=True, timeout=600)
    return out.read_bytes()


def job_batch(inputs, output, **kw):
    job = {"type": "wordcount", "inputs": [str(p) for p in inputs],
           "output": str(output)}
    job.update(kw)
    return {"name": "wc", "job": job}


def summary(c, bid):
    path = c.state_dir / "batches" / str(bid) / "summary.json"
    return json.loads(path.read_text())


def run_ok(c, tmp, inputs, timeout=300, **kw):
    """Run a wordcount job that must succeed and match the reference.
    Returns its summary."""
    out = Path(tmp) / f"out-{time.monotonic_ns()}.txt"
    rc, so, se = c.submit(job_batch(inputs, out, **kw), timeout=timeout)
    assert rc == 0, f"job {kw} failed ({rc}):\n{so}\n{se}"
    got = out.read_bytes()
    want = reference(tmp, inputs, kw.get("delimiters"))
    if got != want:
        gl, wl = got.splitlines(), want.splitlines()
        diff = next((i for i, (a, b) in enumerate(zip(gl, wl)) if a != b),
                    min(len(gl), len(wl)))
        pytest.fail(f"job {kw}: output differs from the reference at line "
                    f"{diff + 1}: got {gl[diff:diff + 2]!r}, want "
                    f"{wl[diff:diff + 2]!r} ({len(gl)} vs {len(wl)} lines)")
    s = summary(c, batch_id_of(so))
    r = s["result"]
    assert r["output"] == str(out)
    if "delimiters" not in kw:      # else words may hold tabs and newlines
        assert r["distinct"] == len(want.splitlines())
        assert r["words"] == sum(int(l.rsplit(b"\t", 1)[1])
                                 for l in want.splitlines())
    assert check_exactly_once(c.results(batch_id_of(so)), s["total"]) == []
    assert_clean(c, batch_id_of(so), out)
    return s


def assert_clean(c, bid, out):
    """A job that succeeded left no intermediate or temporary file (only
    its "done" mark, which stops late duplicates of its tasks)."""
    jd = c.state_dir / "batches" / str(bid) / "job"
    assert sorted(p.name for p in jd.iterdir()) == ["done"]
    assert list(out.parent.glob(out.name + ".tmp.*")) == []


def run_fail(c, batch, *needles, timeout=120):
    """Submit BATCH, which must fail; every NEEDLE must be in the output.
    Returns the combined output."""
    rc, so, se = c.submit(batch, timeout=timeout)
    text = so + se
    assert rc != 0, f"batch should have failed:\n{text}"
    for n in needles:
        assert n in text, f"{n!r} not in:\n{text}"
    return text


def assert_serving(c, tmp):
    """The master still runs jobs after a failure."""
    f = Path(tmp) / "alive.txt"
    f.write_bytes(b"still alive alive\n")
    run_ok(c, tmp, [f])


def write(path, data):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def block_workers(c, n=6, seconds=4):
    """Keep every worker busy for a while (8 s on 3 workers: room for the
    test's next steps on a loaded machine): the next batch's tasks
    wait."""
    rc, so, se = c.submit({"name": "block", "tasks": [
        {"type": "sleep", "seconds": seconds}] * n}, wait=False)
    assert rc == 0, se


KEEP_S = 10    # how long an idle worker keeps its last map's table here


@pytest.fixture(scope="module")
def wc(tmp_path_factory):
    """One 3-worker cluster for the tests that do not harm it."""
    c = Cluster(tmp_path_factory.mktemp("wc"), name="wc", heartbeat_ms=500)
    c.env["FTFARM_WORDCOUNT_KEEP_S"] = str(KEEP_S)
    try:
        c.start()
        yield c
    finally:
        c.cleanup()


# ---- texts ----

def english_files():
    files = [p for p in sorted(FORTUNES.glob("*"))
             if p.is_file() and not p.name.endswith(".dat")
             and not p.name.endswith(".u8")]
    return files


def test_english_text(wc, tmp_path):
    files = english_files()
    if not files:
        pytest.skip("the fortunes package is not installed")
    inputs = [LICENSES] + files
    s = run_ok(wc, tmp_path, inputs)
    assert s["result"]["files"] > 10
    run_ok(wc, tmp_path, inputs, shards=7, reducers=1)
    run_ok(wc, tmp_path, inputs, shard_bytes=100000, reducers=5)


@pytest.mark.parametrize("lang", ["ru", "it"])
def test_utf8_text(wc, tmp_path, lang):
    d = FORTUNES / lang
    if not d.is_dir():
        pytest.skip(f"fortunes-{lang} is not installed ({d} missing)")
    run_ok(wc, tmp_path, [d])
    run_ok(wc, tmp_path, [d], shards=13, reducers=3)


def test_whole_fortunes_tree(wc, tmp_path):
    """Subdirectories, symbolic links to files and the binary .dat files."""
    if not FORTUNES.is_dir():
        pytest.skip("the fortunes package is not installed")
    run_ok(wc, tmp_path, [FORTUNES], reducers=4)


# ---- edge cases ----

def test_empty_inputs(wc, tmp_path):
    d = tmp_path / "empty"
    for i in range(3):
        write(d / f"e{i}", b"")
    s = run_ok(wc, tmp_path, [d])
    assert s["result"]["words"] == 0 and s["result"]["bytes"] == 0
    run_ok(wc, tmp_path, [d], shards=4)
    run_ok(wc, tmp_path, [d / "e0"], shard_bytes=1)
    # Empty files between others.
    write(d / "f", b"one two")
    write(d / "g", b"two three\n")
    run_ok(wc, tmp_path, [d], shard_bytes=1)
    run_ok(wc, tmp_path, [d / "e0", d / "f", d / "e1", d / "g"], shards=3)


def test_empty_directory(wc, tmp_path):
    (tmp_path / "nothing").mkdir()
    s = run_ok(wc, tmp_path, [tmp_path / "nothing"])
    assert s["result"]["files"] == 0


def test_no_final_newline(wc, tmp_path):
    a = write(tmp_path / "a", b"last word without newline")
    b = write(tmp_path / "b", b"newline\nwithout")
    run_ok(wc, tmp_path, [a, b])
    run_ok(wc, tmp_path, [a, b], shard_bytes=4)


def test_words_on_shard_borders(wc, tmp_path):
    """Tiny shards put borders everywhere: inside words, on their first
    and last bytes, on separators, on file ends."""
    texts = [b"ab cd  efg\nhij,k l", b"X", b"yy zz", b" lead and trail ",
             b"\xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 mir",
             b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bb"]
    files = [write(tmp_path / "b" / f"t{i}", t) for i, t in enumerate(texts)]
    total = sum(len(t) for t in texts)
    for sb in (1, 2, 3):
        run_ok(wc, tmp_path, files, shard_bytes=sb, reducers=2)
    run_ok(wc, tmp_path, files, shards=total, reducers=3)
    run_ok(wc, tmp_path, files, shards=total + 5)


def test_many_small_files(wc, tmp_path):
    rng = random.Random(7)
    words = [b"alpha", b"Beta", b"gamma", b"\xc3\xa0 la", b"x", b"",
             b"delta-epsilon", b"\xd0\xb4\xd0\xb0"]
    root = tmp_path / "many"
    for i in range(2000):
        d = root / f"d{i % 7}" / f"e{i % 13}" / ("f" if i % 3 else "")
        data = b" ".join(rng.choice(words) for _ in range(rng.randint(0, 9)))
        write(d / f"file{i:04d}.txt", data)
    s = run_ok(wc, tmp_path, [root])
    assert s["result"]["files"] == 2000
    run_ok(wc, tmp_path, [root], shards=37, reducers=4)


def test_binary_garbage(wc, tmp_path):
    rng = random.Random(11)
    files = []
    for i in range(4):
        data = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300000)))
        files.append(write(tmp_path / "bin" / f"g{i}", data))
    files.append(write(tmp_path / "bin" / "nuls", b"\0" * 5000 + b"A\0b\0"))
    run_ok(wc, tmp_path, files)
    run_ok(wc, tmp_path, files, shard_bytes=997, reducers=7)


def test_delimiter_file(wc, tmp_path):
    text = (b"key=value; Other=VALUE;x y z\nA-B-c; \xc3\xa9t\xc3\xa9=summer\n"
            b"no\tseparator here;;=;\n") * 50
    f = write(tmp_path / "d" / "text", text)
    g = write(tmp_path / "d" / "more", b"tail;without=end")
    delims = write(tmp_path / "delims", b";=\n")
    run_ok(wc, tmp_path, [f, g], delimiters=str(delims))
    run_ok(wc, tmp_path, [f, g], delimiters=str(delims), shard_bytes=5)
    # Bytes that are word bytes by default become separators, and back.
    delims2 = write(tmp_path / "delims2", b"a\xc3\x00 ")
    run_ok(wc, tmp_path, [f, g], delimiters=str(delims2), shards=9)
    # No separator at all: each file is one word.
    empty = write(tmp_path / "delims3", b"")
    run_ok(wc, tmp_path, [f, g], delimiters=str(empty), shards=4)


def test_very_long_word(wc, tmp_path):
    """A 10 MB word across many shards and read buffers, with short and
    long words around it."""
    word = (b"Abcdefghij" * 1024 * 1024)
    f = write(tmp_path / "long" / "w", b"before " + word + b" after\n" +
              word + b"\n" + b"x" * 17 + b" end")
    g = write(tmp_path / "long" / "v", word[:5000000])
    s = run_ok(wc, tmp_path, [f, g], shard_bytes=1 << 20)
    assert s["result"]["shards"] > 15
    run_ok(wc, tmp_path, [f, g], shards=3)


def test_symlink_loop(wc, tmp_path):
    d = tmp_path / "loop"
    write(d / "sub" / "a.txt", b"loop words here")
    write(d / "sub.b" / "c.txt", b"order matters")
    os.symlink("..", d / "sub" / "up")
    os.symlink("nowhere", d / "dangling")
    os.symlink("sub/a.txt", d / "link.txt")
    s = run_ok(wc, tmp_path, [d])
    assert s["result"]["files"] == 3


def test_odd_file_names(wc, tmp_path):
    """Names with a newline, a backslash, spaces and UTF-8 go through the
    manifest (escaped) and sort by bytes."""
    d = tmp_path / "odd"
    names = ["new\nline", "back\\slash", "two  spaces", "\u00e9t\u00e9",
             "-dash", "Z", "a.b", "a"]
    for i, n in enumerate(names):
        write(d / n, b"word%d common Common\n" % i)
    write(d / "dir" / "x", b"inside\n")
    s = run_ok(wc, tmp_path, [d], shard_bytes=7)
    assert s["result"]["files"] == len(names) + 1


def test_hand_written_tasks_validate(wc, tmp_path):
    """Wordcount tasks submitted by hand are checked like any task."""
    bad = [({"type": "wordcount"}, 'missing required key "mode"'),
           ({"type": "wordcount", "mode": "sort"}, "must be"),
           ({"type": "wordcount", "mode": "reduce", "dir": "rel",
             "part": 0, "shards": 1}, "must be an absolute path"),
           ({"type": "wordcount", "mode": "merge", "dir": "/tmp",
             "reducers": 1}, 'missing required key "output"')]
    for task, needle in bad:
        run_fail(wc, {"name": "t", "tasks": [task]}, needle)


def test_validation_errors(wc, tmp_path):
    f = write(tmp_path / "in.txt", b"some words\n")
    out = tmp_path / "out.txt"
    cases = [
        (job_batch([f], out, bogus=1), "job.bogus: unknown key"),
        (job_batch(["rel/x"], out), "job.inputs[0]: must be an absolute"),
        (job_batch([f, "x"], out), "job.inputs[1]: must be an absolute"),
        (job_batch([], out), "job.inputs: must not be empty"),
        (job_batch([f], "out.txt"), "job.output: must be an absolute"),
        (job_batch([f], out, shards=2, shard_bytes=3), "not both"),
        (job_batch([f], out, shards=0), "job.shards"),
        (job_batch([f], out, shard_bytes=0), "job.shard_bytes"),
        (job_batch([f], out, reducers=257), "job.reducers"),
        (job_batch([f], out, reducers="2"), "job.reducers"),
        (job_batch([f], out, delimiters="d"), "job.delimiters"),
        (job_batch([f], out, delimiters=str(tmp_path / "nope")),
         "job.delimiters"),
        (job_batch([f], tmp_path), "is a directory"),
    ]
    for batch, needle in cases:
        run_fail(wc, batch, needle)
    assert_serving(wc, tmp_path)


# ---- errors ----

def test_missing_input(wc, tmp_path):
    missing = tmp_path / "does-not-exist.txt"
    run_fail(wc, job_batch([missing], tmp_path / "o"),
             "job.inputs[0]", str(missing), "No such file")
    assert_serving(wc, tmp_path)


def test_unreadable_input(wc, tmp_path):
    """A FIFO is neither a file nor a directory (root reads everything, so
    permissions cannot make a file unreadable here)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    run_fail(wc, job_batch([fifo], tmp_path / "o"), str(fifo),
             "not a regular file or a directory")
    assert_serving(wc, tmp_path)


def test_output_not_writable(wc, tmp_path):
    f = write(tmp_path / "in.txt", b"words\n")
    run_fail(wc, job_batch([f], tmp_path / "no" / "such" / "out"),
             "job.output", "No such file")
    write(tmp_path / "plainfile", b"")
    run_fail(wc, job_batch([f], tmp_path / "plainfile" / "out"),
             "job.output", "not a directory")
    assert_serving(wc, tmp_path)


def test_output_directory_removed(wc, tmp_path):
    """The output's directory vanishes after planning: the merge fails."""
    f = write(tmp_path / "in.txt", b"words and more words\n")
    outdir = tmp_path / "gone"
    outdir.mkdir()
    block_workers(wc)
    rc, so, se = wc.submit(job_batch([f], outdir / "out.txt"), wait=False)
    assert rc == 0, se
    outdir.rmdir()
    r = wc.cli("wait", "-c", wc.config, batch_id_of(so), timeout=120)
    assert r.returncode != 0
    assert "merge into" in r.stderr and "cannot write" in r.stderr, r.stderr
    assert str(outdir / "out.txt") in r.stderr
    assert_serving(wc, tmp_path)


def test_file_changes_size(wc, tmp_path):
    """A file that grows between planning and reading fails its shard."""
    f = write(tmp_path / "grow.txt", b"hello world\n" * 10)
    block_workers(wc)
    rc, so, se = wc.submit(job_batch([f], tmp_path / "o"), wait=False)
    assert rc == 0, se
    with open(f, "ab") as fh:
        fh.write(b"more\n")
    r = wc.cli("wait", "-c", wc.config, batch_id_of(so), timeout=120)
    assert r.returncode != 0
    assert f"{f.name} changed size: planned 120 bytes, now 125" in r.stderr, \
        r.stderr
    assert "map of shard 0" in r.stderr
    assert not (tmp_path / "o").exists()
    assert_serving(wc, tmp_path)


def test_hand_written_map_bad_manifest(wc, tmp_path):
    """A map task whose manifest is wrong: a size that is not the file's,
    then a path that cannot be read."""
    f = write(tmp_path / "data.txt", b"some data here\n")
    jd = tmp_path / "jd"
    jd.mkdir()
    task = {"type": "wordcount", "mode": "map", "dir": str(jd), "shard": 0,
            "start": 0, "end": 10, "file": 0, "offset": 34, "reducers": 2}
    head = b"ftfarm-wordcount-manifest 1 1 10\n"
    (jd / "manifest").write_bytes(head + b"0 10 " + bytes(f) + b"\n")
    text = run_fail(wc, {"name": "m", "tasks": [dict(task, offset=len(head))]})
    bid = batch_id_of(text)
    res = wc.results(bid)
    assert f"{f.name} changed size: planned 10 bytes, now 15" in res[0]["reason"]
    (jd / "manifest").write_bytes(head + b"0 10 " + bytes(tmp_path) + b"\n")
    text = run_fail(wc, {"name": "m", "tasks": [dict(task, offset=len(head))]})
    res = wc.results(batch_id_of(text))
    assert str(tmp_path) in res[0]["reason"], res
    assert_serving(wc, tmp_path)


def job_mark(job_dir):
    """The mark a job's merge puts in its temporary output names (FNV-1a
    64 of the job directory, as wc_job_mark computes it)."""
    h = 0xcbf29ce484222325
    for b in str(job_dir).encode():
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return f"{h:016x}"


def test_leftovers_of_killed_attempts_removed(wc, tmp_path):
    """Temporary files that killed attempts leave (in the job directory,
    and beside the output with the job's mark) go when the job succeeds;
    another job's temporary file beside the same output stays."""
    f = write(tmp_path / "in.txt", b"a b c a\n")
    out = tmp_path / "out.txt"
    block_workers(wc)
    rc, so, se = wc.submit(job_batch([f], out), wait=False)
    assert rc == 0, se
    bid = batch_id_of(so)
    jd = wc.state_dir / "batches" / str(bid) / "job"
    stale = [jd / "map-0.1.tmp.host.1.1", jd / "run-0.tmp.host.2.1",
             tmp_path / f"out.txt.tmp.{job_mark(jd)}.host.3.1"]
    other = tmp_path / "out.txt.tmp.0123456789abcdef.host.4.1"
    for p in stale + [other]:
        p.write_bytes(b"junk")
    r = wc.cli("wait", "-c", wc.config, bid, timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == reference(tmp_path, [f])
    assert [p for p in stale if p.exists()] == []
    assert other.exists()


def test_late_duplicate_writes_nothing(wc, tmp_path):
    """A map task that runs after its job has ended (a late duplicate of a
    slow task) fails and leaves no partition file."""
    f = write(tmp_path / "data.txt", b"late words\n")
    jd = tmp_path / "jd"
    jd.mkdir()
    head = b"ftfarm-wordcount-manifest 1 1 11\n"
    (jd / "manifest").write_bytes(head + b"0 11 " + bytes(f) + b"\n")
    task = {"type": "wordcount", "mode": "map", "dir": str(jd), "shard": 0,
            "start": 0, "end": 11, "file": 0, "offset": len(head),
            "reducers": 2}
    rc, so, se = wc.submit({"name": "ok", "tasks": [task]})
    assert rc == 0, se
    assert sorted(p.name for p in jd.glob("map-*")) == ["map-0.0", "map-0.1"]
    for p in jd.glob("map-*"):
        p.unlink()
    (jd / "done").write_bytes(b"")
    text = run_fail(wc, {"name": "late", "tasks": [task]})
    assert wc.results(batch_id_of(text))[0]["reason"] == "the job has ended"
    assert list(jd.glob("map-*")) == []


def huge_advised_kb(pid):
    """KiB of PID's anonymous mappings advised for huge pages (VmFlags hg)
    outside its heap: a table of 2 MiB or more; no other wordcount memory
    is (the heap may carry the flag too, by the C library's choice)."""
    kb, size, heap = 0, 0, False
    try:
        text = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return 0
    for ln in text.splitlines():
        head = ln.split()
        if head and "-" in head[0] and ":" not in head[0]:
            heap = ln.rstrip().endswith("[heap]")
        elif ln.startswith("Size:"):
            size = int(head[1])
        elif ln.startswith("VmFlags:") and "hg" in head[1:] and not heap:
            kb += size
    return kb


def tables_held(c):
    """{pid: KiB} of the cluster's workers that hold a table."""
    held = {}
    for w in c.status()["workers"]:
        if w.get("pid", 0) > 0 and huge_advised_kb(w["pid"]) > 0:
            held[w["pid"]] = huge_advised_kb(w["pid"])
    return held


def test_idle_worker_lets_go_of_its_table(wc, tmp_path):
    """A worker keeps its last map's table for the job's next map (the
    shards share their words), and lets go of it once it has run no
    wordcount task for FTFARM_WORDCOUNT_KEEP_S.  Six shards of 2 MB drawn
    from one vocabulary, so that each table is 2 MiB (mapped, advised for
    huge pages) and worth keeping.  One reducer: the workers that run the
    reduce or the merge let go of their tables at once (the maps are
    over), and of three workers at most two do."""
    rng = random.Random(7)
    vocab = ["w%d%s" % (i, "x" * rng.randrange(6)) for i in range(20000)]
    d = tmp_path / "in"
    d.mkdir()
    for f in range(3):
        words = [rng.choice(vocab) for _ in range((4 << 20) // 9)]
        (d / f"part{f}.txt").write_text(" ".join(words) + "\n")
    # The module's earlier jobs' tables go first.
    assert wait_until(lambda: not tables_held(wc), KEEP_S + 20), \
        f"tables held before the job: {tables_held(wc)}"
    out = tmp_path / "out.txt"
    rc, so, se = wc.submit(job_batch([d], out, shards=6, reducers=1),
                           wait=False)
    assert rc == 0, se
    bid = batch_id_of(so)
    # Looked at while the job runs and at once after it (the reference
    # takes seconds on a loaded machine): a loaded job can outlast one
    # worker's KEEP_S after its last map.
    held = {}
    end = time.monotonic() + 120
    while time.monotonic() < end:
        held.update(tables_held(wc))
        st = next((b for b in wc.status()["batches"] if b["id"] == bid),
                  None)
        if st is None or st["state"] in ("finished", "failed", "cancelled"):
            break
        time.sleep(0.1)
    held.update(tables_held(wc))
    assert held, "no worker kept its last map's table"
    assert wc.cli("wait", "-c", wc.config, bid, timeout=120).returncode == 0
    assert out.read_bytes() == reference(tmp_path, [d])
    assert wait_until(lambda: not tables_held(wc), KEEP_S + 20), \
        f"tables still held: {tables_held(wc)}"


def test_two_jobs_at_once(wc, tmp_path):
    """Jobs keep their state apart in one master."""
    a = write(tmp_path / "a" / "x", b"one two two three three three\n" * 999)
    b = write(tmp_path / "b" / "y", b"Four four FOUR four\n" * 777)
    ids = []
    for src, out in ((a, "oa"), (b, "ob")):
        rc, so, se = wc.submit(job_batch([src], tmp_path / out, shards=9),
                               wait=False)
        assert rc == 0, se
        ids.append(batch_id_of(so))
    for i in ids:
        r = wc.cli("wait", "-c", wc.config, i, timeout=120)
        assert r.returncode == 0, r.stderr
    assert (tmp_path / "oa").read_bytes() == reference(tmp_path, [a])
    assert (tmp_path / "ob").read_bytes() == reference(tmp_path, [b])


# ---- workers killed and stopped during a job ----

def chaos_input(root):
    """About 3 MB of mixed text in 40 files (sources: the fortunes, the
    licenses, and generated words when those are missing)."""
    rng = random.Random(5)
    srcs = [p for p in glob.glob(str(FORTUNES / "**" / "*"), recursive=True)
            if os.path.isfile(p) and not p.endswith(".dat")]
    srcs += [str(p) for p in LICENSES.glob("*")]
    blob = b"".join(Path(p).read_bytes() for p in sorted(srcs)[:60])
    if len(blob) < 100000:
        blob = b" ".join(b"w%d" % rng.randint(0, 5000) for _ in range(40000))
    for i in range(40):
        k = rng.randrange(len(blob))
        write(root / f"part{i:02d}", (blob[k:] + blob[:k])[:75000])
    return root


def ours(c, pid):
    tag = f"FTFARM_TEST_TAG={c.tag}".encode()
    return "ftfarm-slot" in proc_cmdline(pid) and tag in proc_environ(pid)


def busy_workers(c):
    """The pids of the workers running a task."""
    st = c.status(timeout=20)
    return [w["pid"] for w in st["workers"]
            if w["state"] == "busy" and w["pid"] > 0 and
            pid_alive(w["pid"]) and
            proc_state(w["pid"]) not in ("T", "t") and ours(c, w["pid"])]


def two_busy(c):
    """Two workers running a task, or None."""
    busy = busy_workers(c)
    return busy[:2] if len(busy) >= 2 else None


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP],
                         ids=["SIGKILL", "SIGSTOP"])
def test_workers_killed_during_job(make_cluster, tmp_path, sig):
    """Two workers hit by SIG while the job's map phase runs: the output
    is still byte-identical and every task has exactly one result."""
    c = make_cluster(heartbeat_ms=200, respawn_limit=5)
    c.start()
    src = chaos_input(tmp_path / "chaos")
    out = tmp_path / "out.txt"
    # Small shards: thousands of map tasks keep the map phase going.
    rc, so, se = c.submit(job_batch([src], out, shard_bytes=1500,
                                    reducers=3), wait=False)
    assert rc == 0, se
    bid = batch_id_of(so)
    # Both victims from one look: the map phase may be over in half a
    # second on a fast machine, so the second is not waited for.
    hit = wait_until(lambda: two_busy(c), 30, interval=0.02)
    assert hit, "no two busy workers to hit"
    for pid in hit:
        os.kill(pid, sig)
        time.sleep(0.05)
    r = c.cli("wait", "-c", c.config, bid, timeout=240)
    assert r.returncode == 0, r.stderr + c.master_log()[-3000:]
    assert out.read_bytes() == reference(tmp_path, [src])
    s = summary(c, bid)
    assert s["result"]["shards"] > 1000
    assert check_exactly_once(c.results(bid), s["total"]) == []
    assert_clean(c, bid, out)
    dead = [e for e in c.events() if e["event"] == "worker_dead"]
    assert len(dead) >= 2, "the master did not notice the victims"
    # A victim's task is taken over either when it is found dead or,
    # sooner, by the straggler rule (worker_slow) once the others are
    # idle.  One at least: near the end of the map phase a victim may
    # have sent its last result just before the signal.
    helped = {e["worker"] for e in c.events()
              if e["event"] in ("task_reassigned", "worker_slow") and
              e.get("batch") == bid}
    assert helped, "no victim's task was taken over: hit after the maps"
