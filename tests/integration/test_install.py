"""`make install` into a temporary prefix, then a cluster that runs every
job type (exec, wordcount, relax, ftallreduce, pipeline) from the
installed tree alone: every ftfarm process runs in a mount namespace where
the checkout is covered by an empty tmpfs.  The installed Python package
drives the same cluster from there, and so does Snakemake through the
installed profile.  `make uninstall` then removes every file install put
there."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT, Cluster, check_exactly_once, exec_task

sys.path.insert(0, str(ROOT / "tests" / "gang"))
import gang_ref  # noqa: E402

HIDE = 'mount -t tmpfs tmpfs "$0" && exec "$@"'
PYDIR = "lib/python3/dist-packages"
# A program that imports the installed package and runs a batch with it.
PY_CLIENT = """
import json, sys
import ftfarm
c = ftfarm.Client(sys.argv[1])
bid = c.submit({"name": "py", "tasks": [
    {"type": "exec", "argv": ["sh", "-c", "echo py $0", str(i)]}
    for i in range(5)]})
row, results = c.wait(bid), list(c.results(bid))
with ftfarm.Executor(sys.argv[1]) as ex:
    squares = list(ex.map(lambda x: x * x, range(2000)))
    slot_file = ex.submit(lambda: __import__("ftfarm").__file__).result()
print(json.dumps({"file": ftfarm.__file__, "row": row, "results": results,
                  "squares": squares, "slot_file": slot_file}))
"""
SMK = "share/ftfarm/snakemake/ftfarm"
SNAKEFILE = """
rule all:
    input: "b.txt"
rule a:
    output: "a.txt"
    shell: "echo a > {output}"
rule b:
    input: "a.txt"
    output: "b.txt"
    shell: "cat {input} > {output}; echo b >> {output}"
"""


def make(*args):
    r = subprocess.run(["make", "-C", str(ROOT), *args], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def files_under(d):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


@pytest.mark.heavy
@pytest.mark.timeout(300)
def test_installed_tree_runs_every_job_type(tmp_path):
    prefix = tmp_path / "prefix"
    make("install", f"PREFIX={prefix}")
    installed = files_under(prefix)
    for f in ("bin/ftfarm", "bin/ftfarm-master", "bin/ftfarm-worker",
              "bin/ftfarm-slot",
              "bin/ftfarm-gang", "lib/ftfarm/tasks/exec.so",
              "lib/ftfarm/tasks/wordcount.so", "lib/ftfarm/tasks/relax.so",
              "lib/ftfarm/tasks/python.so",
              "lib/ftfarm/gangs/ftallreduce.so",
              "lib/ftfarm/gangs/pipeline.so", "share/ftfarm/ftfarm.sbatch",
              "share/ftfarm/examples/local.json",
              "share/ftfarm/scripts/bmc-sim", f"{SMK}/config.yaml",
              f"{SMK}/ftfarm-submit.py", f"{SMK}/ftfarm-status.sh",
              f"{SMK}/ftfarm-cancel.py", f"{SMK}/ftfarm_profile.py",
              "share/bash-completion/completions/ftfarm"):
        assert f in installed, installed
    package = sorted(p.name for p in (ROOT / "python" / "ftfarm").glob("*.py"))
    assert "__init__.py" in package and "_client.py" in package, package
    assert sorted(f[len(PYDIR) + 8:] for f in installed
                  if f.startswith(PYDIR + "/ftfarm/")) == package, installed

    c = Cluster(tmp_path, name="c", bindir=prefix / "bin", nodes=2,
                heartbeat_ms=1000, heartbeat_timeout_ms=1500)

    def cli(*args, timeout=120):
        return subprocess.run(
            ["unshare", "-m", "sh", "-c", HIDE, str(ROOT), c.ftfarm,
             *map(str, args)], capture_output=True, text=True,
            timeout=timeout, env=c.env, stdin=subprocess.DEVNULL,
            cwd=tmp_path)

    c.cli = cli
    # What those processes see of the checkout: nothing.
    seen = subprocess.run(["unshare", "-m", "sh", "-c", HIDE, str(ROOT),
                           "ls", "-A", str(ROOT)], capture_output=True,
                          text=True, timeout=30)
    assert seen.returncode == 0 and seen.stdout == "", seen
    work = tmp_path / "work"
    work.mkdir()
    (work / "relax").mkdir()
    words = work / "words.txt"
    words.write_text("b a c a b a\n" * 50)
    (work / "pipe-in.bin").write_bytes(bytes(range(256)) * 20)
    length = 64
    jobs = {
        "exec": {"name": "exec", "tasks": [exec_task(f"echo {i}")
                                           for i in range(6)]},
        "wordcount": {"name": "wc", "job": {
            "type": "wordcount", "inputs": [str(words)],
            "output": str(work / "counts.txt")}},
        "relax": {"name": "relax", "job": {
            "type": "relax", "n": 32, "itmax": 4, "blocks": 2,
            "dir": str(work / "relax"), "output": str(work / "relax.json")}},
        "ftallreduce": {"name": "ar", "job": {
            "type": "ftallreduce", "ranks": 2, "spares": 1,
            "length": length, "seed": 5, "output": str(work / "sum.bin")}},
        "pipeline": {"name": "pipe", "job": {
            "type": "pipeline", "width": 2, "height": 2, "routes": 1,
            "bytes": 4096, "chunks": 4,
            "input": str(work / "pipe-in.bin"),
            "output": str(work / "pipe-out.bin")}},
    }
    try:
        c.start()
        for bid, (kind, batch) in enumerate(jobs.items(), 1):
            r = cli("submit", "-c", c.config, c.write_batch(batch), "--wait")
            assert r.returncode == 0, (kind, r.stdout, r.stderr,
                                       c.master_log()[-3000:])
            res = c.results(bid)
            assert res and all(x["status"] == "ok" for x in res), (kind, res)
        assert not check_exactly_once(c.results(1), 6)
        # The installed package, the checkout hidden.
        r = subprocess.run(
            ["unshare", "-m", "sh", "-c", HIDE, str(ROOT), "/usr/bin/python3",
             "-c", PY_CLIENT, str(c.config)], capture_output=True, text=True,
            timeout=120, env={**c.env, "PYTHONPATH": str(prefix / PYDIR)},
            stdin=subprocess.DEVNULL, cwd=tmp_path)
        assert r.returncode == 0, (r.stdout, r.stderr)
        out = json.loads(r.stdout)
        assert out["file"] == str(prefix / PYDIR / "ftfarm" / "__init__.py")
        assert out["row"]["ok"] == 5, out
        assert not check_exactly_once(out["results"], 5,
                                      lambda i: f"py {i}\n")
        # The Executor's calls ran in interpreters that imported the
        # installed package too (the python plugin finds it beside
        # itself).
        assert out["squares"] == [x * x for x in range(2000)]
        assert out["slot_file"] == out["file"], out["slot_file"]
        # Snakemake through the installed profile: its scripts find the
        # installed ftfarm by themselves.
        smk = tmp_path / "smk"
        smk.mkdir()
        (smk / "Snakefile").write_text(SNAKEFILE)
        env = {k: v for k, v in c.env.items()
               if k not in ("FTFARM", "CI", "SNAKEMAKE_PROFILE")}
        r = subprocess.run(
            ["unshare", "-m", "sh", "-c", HIDE, str(ROOT),
             "/usr/bin/snakemake", "--profile", str(prefix / SMK)],
            capture_output=True, text=True, timeout=150,
            env={**env, "FTFARM_CONFIG": str(c.config)},
            stdin=subprocess.DEVNULL, cwd=smk)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert (smk / "b.txt").read_text() == "a\nb\n"
        names = [b["name"] for b in c.status()["batches"]]
        assert [n.split("@")[0] for n in names if "@" in n] == \
            ["snakejob.a.2", "snakejob.b.1"], names
    finally:
        c.stop()
        c.cleanup()
    counts = dict(line.split()[::-1] if line.split()[0].isdigit() else
                  line.split() for line in
                  (work / "counts.txt").read_text().splitlines())
    assert {k: int(v) for k, v in counts.items()} == \
        {"a": 150, "b": 100, "c": 50}, counts
    assert json.loads((work / "relax.json").read_text())
    rows = gang_ref.gen_rows(5, 2, length)
    assert (work / "sum.bin").read_bytes() == \
        gang_ref.pack(gang_ref.tree_sum(rows))
    assert (work / "pipe-out.bin").read_bytes() == \
        (work / "pipe-in.bin").read_bytes()[:4096]

    make("uninstall", f"PREFIX={prefix}")
    assert files_under(prefix) == [], files_under(prefix)
