"""Snakemake (Debian's 7.21) drives an ftfarm cluster through the profile
in scripts/snakemake/ftfarm: a workflow of its own runs with a slot
SIGKILLed under it and every output exact; a Ctrl-C (SIGINT to
snakemake's process group) leaves none of its batches running, even one
whose submission it cut short; the status script's word for each state
of a batch (and for one that does not exist, or a master that is
restarting or gone); the submit script's mapping of threads, gpus,
runtime, mem_mb and the rule's log; a workflow whose rules' logs get
their jobs' output and whose mem_mb is held to."""
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, all_pids, pid_alive, proc_cmdline, \
    proc_environ, tagged_pids, wait_until

PROFILE = ROOT / "scripts" / "snakemake" / "ftfarm"
SNAKEMAKE = "/usr/bin/snakemake"

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not Path(SNAKEMAKE).exists(),
                       reason="needs snakemake (scripts/install-deps)"),
]


def profile_env(c, **extra):
    """The environment of snakemake and of the profile's scripts for
    cluster C: its config, its own ftfarm program."""
    env = dict(c.env, FTFARM_CONFIG=str(c.config), FTFARM=c.ftfarm)
    env.update(extra)
    for k in ("SNAKEMAKE_PROFILE", "CI"):
        env.pop(k, None)
    return env


def start_snakemake(c, workdir, *args, env=None):
    """snakemake --profile PROFILE ARGS in WORKDIR, in a process group of
    its own (as a shell's foreground job is), output in WORKDIR/log.txt."""
    log = open(workdir / "log.txt", "w")
    try:
        return subprocess.Popen(
            [SNAKEMAKE, "--profile", str(PROFILE), *args], cwd=workdir,
            env=env or profile_env(c), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
    finally:
        log.close()


def end_group(p):
    """Kill what is left of snakemake P's process group."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait(timeout=30)


def cluster_and_workflow(make_cluster, tmp_path, snakefile):
    """A started cluster of 2 nodes of 2 slots, and a workflow directory
    holding SNAKEFILE: (cluster, directory)."""
    c = make_cluster(nodes=2, workers_per_node=2, heartbeat_ms=500)
    c.start()
    wd = tmp_path / "wf"
    wd.mkdir()
    (wd / "Snakefile").write_text(snakefile)
    return c, wd


def run_batches(c, tag=None):
    """The batches of C's status, by id; those of one snakemake run only
    (names ending in @TAG) when TAG is given."""
    rows = c.status()["batches"]
    return {b["id"]: b for b in rows
            if tag is None or b["name"].endswith("@" + tag)}


def run_tag(workdir):
    """The run of the snakemake under WORKDIR (its .snakemake/tmp.* dir),
    or None before it made it."""
    tmps = list((workdir / ".snakemake").glob("tmp.*"))
    return tmps[0].name[4:] if len(tmps) == 1 else None


def task_processes(c):
    """{pid: command line} of the live processes that tasks of cluster C
    started (their environment names the worker that ran them)."""
    return {p: proc_cmdline(p) for p in tagged_pids(c.tag)
            if any(e.startswith(b"FTFARM_WORKER_PID=")
                   for e in proc_environ(p))}


def processes_mentioning(text):
    """{pid: command line} of the live processes whose command line (its
    words joined by spaces) holds TEXT."""
    me = os.getpid()
    return {p: cmd for p, cmd in ((p, proc_cmdline(p)) for p in all_pids()
                                  if p != me) if text in cmd}


def ancestors(pid):
    """PID's parent, its parent, ... up to init."""
    out = []
    while pid > 1:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            break
        pid = int(status.split("PPid:")[1].split()[0])
        out.append(pid)
    return out


# ---- a workflow, every output exact, a slot SIGKILLed under it ----

def workflow(n, group):
    """A workflow of N gen and N square jobs (2 slots each), N / GROUP
    merges and a total."""
    return f"""
N = {n}
GROUP = {group}

rule all:
    input: "total.txt"

rule gen:
    output: "gen/{{i}}.txt"
    shell: "sleep 1; seq {{wildcards.i}} $(({{wildcards.i}} + 40)) > {{output}}"

rule square:
    input: "gen/{{i}}.txt"
    output: "sq/{{i}}.txt"
    threads: 2
    shell:
        "sleep 1; awk '{{{{print $1 * $1}}}}' {{input}} > {{output}}; "
        "echo cpus=$FTFARM_CPUS >> {{output}}"

rule merge:
    input:
        lambda w: [f"sq/{{k}}.txt"
                   for k in range(int(w.g) * GROUP, (int(w.g) + 1) * GROUP)]
    output: "merge/{{g}}.txt"
    shell: "cat {{input}} > {{output}}"

rule total:
    input: expand("merge/{{g}}.txt", g=range(N // GROUP))
    output: "total.txt"
    shell:
        "grep -hv cpus {{input}} | awk '{{{{s += $1}}}} END {{{{print s}}}}' "
        "> {{output}}"
"""


def expected_outputs(n, group):
    """Every file the workflow writes, with the bytes it must hold."""
    out = {}
    for i in range(n):
        out[f"gen/{i}.txt"] = "".join(f"{k}\n" for k in range(i, i + 41))
        out[f"sq/{i}.txt"] = "".join(f"{k * k}\n" for k in
                                     range(i, i + 41)) + "cpus=2\n"
    for g in range(n // group):
        out[f"merge/{g}.txt"] = "".join(out[f"sq/{k}.txt"] for k in
                                        range(g * group, (g + 1) * group))
    out["total.txt"] = "%d\n" % sum(k * k for i in range(n)
                                    for k in range(i, i + 41))
    return out


def workflow_with_a_slot_killed(make_cluster, tmp_path, n, group):
    """Run workflow(N, GROUP), SIGKILL a busy slot once N / 2 batches have
    finished: every output exact, each job one batch of one result."""
    c, wd = cluster_and_workflow(make_cluster, tmp_path, workflow(n, group))
    jobs = 2 * n + n // group + 1       # every rule but the local all
    p = start_snakemake(c, wd)
    killed = None
    try:
        # Mid-run: a few batches done, many to go.  Kill a busy slot.
        def busy_mid_run():
            if p.poll() is not None:
                return "snakemake ended"
            b = run_batches(c)
            if sum(x["state"] == "finished" for x in b.values()) < n // 2:
                return None
            w = [w for w in c.status()["workers"] if w["state"] == "busy"]
            return w[0] if w else None
        victim = wait_until(busy_mid_run, 300, interval=0.2)
        assert isinstance(victim, dict), \
            (victim, (wd / "log.txt").read_text()[-3000:])
        os.kill(victim["pid"], signal.SIGKILL)
        killed = victim
        rc = p.wait(timeout=480)
    finally:
        end_group(p)
    log = (wd / "log.txt").read_text()
    assert rc == 0, log[-4000:]

    # Every output, byte for byte.
    for name, text in expected_outputs(n, group).items():
        assert (wd / name).read_text() == text, name

    # Each job one batch (Snakemake never saw the kill), each batch's one
    # task exactly one result, ok; the killed slot's task ran again.
    ours = {i: b for i, b in run_batches(c).items() if "@" in b["name"]}
    assert len(ours) == jobs, sorted(b["name"] for b in ours.values())
    assert len({b["name"] for b in ours.values()}) == jobs
    for bid, b in ours.items():
        res = c.results(bid)
        assert len(res) == 1 and res[0]["status"] == "ok", (b, res)
        assert b["state"] == "finished" and b["ok"] == 1, b
    lost = [e for e in c.events() if e["event"] == "task_reassigned" and
            e["worker"] == killed["id"]]
    assert lost and all(e["batch"] in ours for e in lost), lost
    assert any(c.results(e["batch"])[0]["attempt"] > e["attempt"]
               for e in lost), lost
    # Threads as cpus: each square job held 2 slots (its output says so),
    # the others 1.
    for b in ours.values():
        task = json.loads((c.state_dir / "batches" / str(b["id"]) /
                           "batch.json").read_text())["tasks"][0]
        want = 2 if ".square." in b["name"] else 1
        assert task.get("cpus", 1) == want, (b["name"], task)
    assert sum(".square." in b["name"] for b in ours.values()) == n


@pytest.mark.long
def test_workflow_exact_with_a_slot_killed(make_cluster, tmp_path):
    # 11 jobs: every rule, four levels of Snakemake's status rounds.
    workflow_with_a_slot_killed(make_cluster, tmp_path, 4, 2)


@pytest.mark.long
def test_workflow_of_28_jobs_exact_with_a_slot_killed(make_cluster,
                                                      tmp_path):
    workflow_with_a_slot_killed(make_cluster, tmp_path, 12, 4)


# ---- Ctrl-C ----

LONG_WORKFLOW = """
rule all:
    input: expand("done/{i}.txt", i=range(6))

rule wait:
    output: "done/{i}.txt"
    shell: "sleep 300; touch {output}"
"""


def assert_run_cancelled(c, wd, tag, p):
    """Snakemake P ended after its Ctrl-C; 20 s later no batch of run TAG
    waits or runs, and no process of its jobs is left."""
    rc = p.wait(timeout=60)
    log = (wd / "log.txt").read_text()
    assert rc != 0, log[-3000:]
    assert "Terminating processes on user request" in log, log[-3000:]
    time.sleep(20)
    ours = run_batches(c, tag)
    assert ours, log[-3000:]
    live = {i: b["state"] for i, b in ours.items()
            if b["state"] in ("waiting", "running")}
    assert not live, (live, log[-3000:])
    for bid, b in ours.items():
        assert b["state"] == "cancelled", b
        for r in c.results(bid):
            assert r["status"] == "failed", r
    left = {**task_processes(c), **processes_mentioning(str(wd))}
    assert not left, left
    st = c.status()
    assert all(w["inflight"] == 0 for w in st["workers"]), st["workers"]
    return ours, log


@pytest.mark.long
def test_sigint_cancels_the_runs_batches(make_cluster, tmp_path):
    c, wd = cluster_and_workflow(make_cluster, tmp_path, LONG_WORKFLOW)
    p = start_snakemake(c, wd)
    try:
        # Every job submitted, some running (4 slots: the master may
        # have given idle ones copies of the first jobs), the rest queued.
        def all_in():
            tag = run_tag(wd)
            if tag is None or len(run_batches(c, tag)) < 6:
                return None
            sleeps = [cmd for cmd in task_processes(c).values()
                      if cmd == "sleep 300 "]
            return tag if len(sleeps) >= 2 else None
        tag = wait_until(all_in, 120, interval=0.2)
        assert tag, (wd / "log.txt").read_text()[-3000:]
        os.killpg(p.pid, signal.SIGINT)       # a terminal's Ctrl-C
        ours, log = assert_run_cancelled(c, wd, tag, p)
    finally:
        end_group(p)
    assert len(ours) == 6
    assert "ftfarm-cancel: 6 ftfarm batches of this run cancelled" in log, \
        log[-3000:]


# An ftfarm whose submit, once the batch is in, takes 3 s to return: the
# submission a Ctrl-C lands in is cut short after the master took it.
SLOW_SUBMIT = """#!/bin/sh
"$REAL_FTFARM" "$@"
rc=$?
if [ "$1" = submit ]; then
	touch "$MARKS/$$"
	sleep 3
fi
exit $rc
"""


@pytest.mark.long
def test_sigint_in_a_submission_cancels_its_batch(make_cluster, tmp_path):
    c, wd = cluster_and_workflow(make_cluster, tmp_path, LONG_WORKFLOW)
    marks = tmp_path / "marks"
    marks.mkdir()
    slow = tmp_path / "slow-ftfarm"
    slow.write_text(SLOW_SUBMIT)
    slow.chmod(0o755)
    env = profile_env(c, FTFARM=str(slow), REAL_FTFARM=c.ftfarm,
                      MARKS=str(marks))
    p = start_snakemake(c, wd, env=env)
    try:
        # The second submission: its batch is in, snakemake has not read
        # its id.
        assert wait_until(lambda: len(list(marks.iterdir())) >= 2, 120,
                          interval=0.05), (wd / "log.txt").read_text()
        tag = run_tag(wd)
        os.killpg(p.pid, signal.SIGINT)
        ours, log = assert_run_cancelled(c, wd, tag, p)
    finally:
        end_group(p)
    known = {int(x) for x in re.findall(r"with external jobid '(\d+)'",
                                        log)}
    assert len(ours) >= 2 and set(ours) - known, (sorted(ours), known, log)


# ---- snakemake killed, the example workflow ----

RESUME_WORKFLOW = """
rule all:
    input: expand("done/{i}.txt", i=range(6))

rule slow:
    output: "done/{i}.txt"
    shell: "sleep 15; echo {wildcards.i} > {output}"
"""


@pytest.mark.long
def test_killed_snakemake_resumes_its_queued_batches(make_cluster,
                                                     tmp_path):
    """snakemake SIGKILLed with jobs queued leaves its batches running;
    started again (after --unlock) it asks the status of those whose job
    had not started, by their ids, and waits for them instead of
    submitting them again (a job that had started, Snakemake submits
    again: its own snakemake in the job wrote over the mark that kept
    the id).  Every output exact."""
    c, wd = cluster_and_workflow(make_cluster, tmp_path, RESUME_WORKFLOW)
    p = start_snakemake(c, wd)
    try:
        # Every job submitted, 4 slots: two or more still queued.
        def all_in():
            tag = run_tag(wd)
            return tag if tag and len(run_batches(c, tag)) == 6 else None
        tag = wait_until(all_in, 120, interval=0.2)
        assert tag, (wd / "log.txt").read_text()[-3000:]
    finally:
        end_group(p)
    first = run_batches(c, tag)
    assert all(b["state"] == "running" for b in first.values()), first
    r = subprocess.run([SNAKEMAKE, "--unlock"], cwd=wd, env=profile_env(c),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    (wd / "log.txt").rename(wd / "log1.txt")
    p = start_snakemake(c, wd)
    try:
        rc = p.wait(timeout=300)
    finally:
        end_group(p)
    log = (wd / "log.txt").read_text()
    assert rc == 0, log[-3000:]
    resumed = {int(x) for x in re.findall(
        r"Resuming incomplete job \d+ with external jobid '(\d+)'", log)}
    assert resumed and resumed <= set(first), (resumed, log[-3000:])
    again = {int(x) for x in re.findall(
        r"Submitted job \d+ with external jobid '(\d+)'", log)}
    assert not resumed & again
    for bid in resumed:
        assert c.results(bid)[0]["status"] == "ok"
    ours = [b for b in run_batches(c).values() if "@" in b["name"]]
    assert len(ours) == 6 + 6 - len(resumed), ours
    for i in range(6):
        assert (wd / "done" / f"{i}.txt").read_text() == f"{i}\n"


@pytest.mark.long
def test_the_example_workflow(make_cluster, tmp_path):
    """config/workflow.smk as docs/workflows.md runs it: threads 2 and a
    GPU, on a cluster shaped as config/local-gpus.json."""
    c = make_cluster(nodes=2, workers_per_node=4, heartbeat_ms=500)
    for node in c.cfg["nodes"]:
        node["gpus"] = ["0", "1"]
    c.config.write_text(json.dumps(c.cfg))
    c.start()
    wd = tmp_path / "wf"
    r = subprocess.run(
        [SNAKEMAKE, "--profile", str(PROFILE), "-s",
         str(ROOT / "config" / "workflow.smk"), "-d", str(wd)],
        env=profile_env(c), cwd=tmp_path, capture_output=True, text=True,
        timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (wd / "sum.txt").read_text() == "%d\n" % sum(
        k * k for i in range(8) for k in range(i, 101))
    assert re.fullmatch(r"GPU [01] of node[12]\n",
                        (wd / "gpu.txt").read_text())
    ours = [b for b in run_batches(c).values() if "@" in b["name"]]
    assert len(ours) == 17 and all(b["ok"] == 1 for b in ours), ours


# ---- the scripts one by one ----

def status_word(c, bid, env=None):
    r = subprocess.run([str(PROFILE / "ftfarm-status.sh"), str(bid)],
                       capture_output=True, text=True, timeout=120,
                       env=env or profile_env(c))
    return r.returncode, r.stdout, r.stderr


def test_status_words(make_cluster, tmp_path):
    c = make_cluster(nodes=1, workers_per_node=2, heartbeat_ms=500,
                     lease_ms=1000, restart_backoff_ms=200,
                     restart_backoff_max_ms=1000)
    c.start()

    def submit(*cmd):
        r = c.cli("submit", "-c", c.config, "--", *cmd)
        assert r.returncode == 0, r.stderr
        return int(r.stdout.split()[0])

    ok = submit("true")
    bad = submit("sh", "-c", "exit 3")
    assert c.cli("wait", "-c", c.config, ok).returncode == 0
    assert c.cli("wait", "-c", c.config, bad).returncode == 1
    cancelled = submit("sleep", "300")
    assert c.cli("cancel", "-c", c.config, cancelled).returncode == 0
    running = submit("sleep", "300")
    words = {bid: status_word(c, bid) for bid in
             (running, ok, bad, cancelled)}
    assert words[running] == (0, "running\n", ""), words
    assert words[ok] == (0, "success\n", ""), words
    assert words[bad] == (0, "failed\n", ""), words
    assert words[cancelled] == (0, "failed\n", ""), words
    # A batch the cluster does not know: failed (it will never finish
    # there), said on stderr.
    rc, out, err = status_word(c, 999)
    assert (rc, out) == (0, "failed\n") and "no batch 999" in err, err

    # The master killed: the status waits for the next one.
    master = int((c.state_dir / "master.pid").read_text().split()[0])
    os.kill(master, signal.SIGKILL)
    assert wait_until(lambda: not pid_alive(master), 10)
    rc, out, err = status_word(c, ok)
    assert (rc, out) == (0, "success\n"), (rc, out, err)
    assert status_word(c, running)[:2] == (0, "running\n")

    # A cluster that is down (stopped, or between two allocations): its
    # next start resumes the batch, so the job is still running, said on
    # stderr at once; started again, the batch goes on.
    c.stop()
    t0 = time.monotonic()
    rc, out, err = status_word(c, running)
    assert (rc, out) == (0, "running\n") and "is down (" in err, err
    assert time.monotonic() - t0 < 10
    c.start()
    assert status_word(c, running)[:2] == (0, "running\n")
    assert status_word(c, ok)[:2] == (0, "success\n")

    # Without FTFARM_CONFIG, or with a cluster that is gone (its state
    # dir): exit 1 (the workflow stops), the reason on stderr.
    env = profile_env(c)
    del env["FTFARM_CONFIG"]
    rc, out, err = status_word(c, ok, env)
    assert rc == 1 and out == "" and "FTFARM_CONFIG" in err, err
    c.stop()
    gone = json.loads(c.config.read_text())
    gone["state_dir"] = str(tmp_path / "no-such-dir")
    other = tmp_path / "gone.json"
    other.write_text(json.dumps(gone))
    env = profile_env(c, FTFARM_CONFIG=str(other))
    t0 = time.monotonic()
    rc, out, err = status_word(c, ok, env)
    assert rc == 1 and out == "" and "no master is running" in err, err
    assert time.monotonic() - t0 < 10


def jobscript(path, props):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n# properties = %s\necho job\n" %
                    json.dumps(props))
    path.chmod(0o755)
    return path


def test_submit_maps_threads_gpus_runtime(make_cluster, tmp_path):
    c = make_cluster(nodes=2, workers_per_node=2, heartbeat_ms=500)
    c.cfg["nodes"][1]["gpus"] = 2
    c.config.write_text(json.dumps(c.cfg))
    c.start()
    tmp = tmp_path / ".snakemake" / "tmp.ab12cd34"

    def submit(props, name="snakejob.r.3.sh"):
        return subprocess.run([str(PROFILE / "ftfarm-submit.py"),
                               str(jobscript(tmp / name, props))],
                              capture_output=True, text=True, timeout=60,
                              env=profile_env(c), cwd=tmp_path)

    r = submit({"type": "single", "rule": "r", "jobid": 3, "threads": 2,
                "resources": {"gpus": 1, "runtime": 2, "mem_mb": 1000},
                "log": ["logs/r/3.log"]})
    assert r.returncode == 0 and r.stdout.strip().isdigit(), r
    bid = int(r.stdout)
    batch = json.loads((c.state_dir / "batches" / str(bid) /
                        "batch.json").read_text())
    assert batch["name"] == "snakejob.r.3@ab12cd34", batch
    task = batch["tasks"][0]
    assert task["argv"][:2] == ["/bin/sh", "-c"], task
    assert task["argv"][-1] == str(tmp / "snakejob.r.3.sh"), task
    assert (task["cpus"], task["gpus"], task["timeout"],
            task["time_request"]) == (2, 1, 120, 120), task
    assert task["mem"] == 1000 << 20, task
    log = tmp_path / "logs" / "r" / "3.log"
    assert task["stdout"] == task["stderr"] == str(log), task
    assert c.cli("wait", "-c", c.config, bid).returncode == 0
    assert c.results(bid)[0]["stdout"] == "job\n"
    assert log.read_text() == "job\n"

    # Neither gpus nor runtime: one slot, no GPU, the config's timeout.
    r = submit({"type": "group", "groupid": "g", "jobid": "x", "threads": 1,
                "resources": {}}, "snakejob.g.x.sh")
    assert r.returncode == 0, r
    task = json.loads((c.state_dir / "batches" / r.stdout.strip() /
                       "batch.json").read_text())["tasks"][0]
    assert task.get("cpus", 1) == 1 and not task.get("gpus") and \
        "timeout" not in task and "mem" not in task and \
        "time_request" not in task and \
        "stdout" not in task, task

    # What no node can meet, and what is not a count: exit 2, one message
    # naming it, nothing submitted.
    before = set(run_batches(c))
    for props, says in (
            ({"rule": "r", "jobid": 4, "threads": 3, "resources": {}},
             "cpus"),
            ({"rule": "r", "jobid": 5, "threads": 1,
              "resources": {"gpus": 3}}, "gpus"),
            ({"rule": "r", "jobid": 6, "threads": 0, "resources": {}},
             "job 6 of r: threads = 0"),
            ({"rule": "r", "jobid": 7, "threads": 1,
              "resources": {"gpus": "two"}},
             "job 7 of r: resources gpus = 'two'")):
        r = submit(props)
        assert r.returncode == 2 and r.stdout == "" and says in r.stderr, r
    path = tmp / "plain.sh"
    path.write_text("#!/bin/sh\necho no properties\n")
    r = subprocess.run([str(PROFILE / "ftfarm-submit.py"), str(path)],
                       capture_output=True, text=True, timeout=60,
                       env=profile_env(c))
    assert r.returncode == 2 and "no '# properties = ' line" in r.stderr, r
    assert set(run_batches(c)) == before


LOGGED = """
rule all:
    input: "a.txt", "b.txt"

rule a:
    output: "a.txt"
    log: "logs/a.log"
    resources: mem_mb=200
    shell: "echo made a; echo warned a >&2; echo a > {output}"

rule b:
    output: "b.txt"
    log: "logs/b.log"
    resources: mem_mb=100
    shell: "python3 -c 'b = b\\"x\\" * (1 << 30)'; echo b > {output}"
"""


@pytest.mark.long
def test_rules_logs_and_memory(make_cluster, tmp_path):
    c, wd = cluster_and_workflow(make_cluster, tmp_path, LOGGED)
    p = start_snakemake(c, wd, "--latency-wait", "5")
    try:
        assert p.wait(timeout=300) == 1, (wd / "log.txt").read_text()
    finally:
        end_group(p)
    # a ran, its output and errors in its log beside the job's own lines;
    # b took 1 GiB against its mem_mb of 100: killed for its memory.
    assert (wd / "a.txt").read_text() == "a\n"
    log = (wd / "logs" / "a.log").read_text()
    assert "made a\n" in log and "warned a\n" in log, log
    assert not (wd / "b.txt").exists()
    rows = [b for b in c.status()["batches"] if "snakejob.b." in b["name"]]
    assert len(rows) == 1 and rows[0]["failed"] == 1, rows
    res = c.results(rows[0]["id"])
    assert res[0]["reason"].startswith("memory: used "), res
    assert (wd / "logs" / "b.log").exists()
    c.stop()


def test_cancel_script_cancels_a_run(make_cluster, tmp_path):
    c = make_cluster(nodes=1, workers_per_node=2, heartbeat_ms=500)
    c.start()

    def submit(name, *cmd):
        r = c.cli("submit", "-c", c.config, "--name", name, "--", *cmd)
        assert r.returncode == 0, r.stderr
        return int(r.stdout.split()[0])

    done = submit("snakejob.a.1@run1", "true")
    assert c.cli("wait", "-c", c.config, done).returncode == 0
    mine = [submit(f"snakejob.b.{i}@run1", "sleep", "300") for i in range(4)]
    other = submit("snakejob.b.1@run2", "sleep", "300")
    plain = submit("by-hand", "sleep", "300")
    r = subprocess.run([str(PROFILE / "ftfarm-cancel.py"), str(done),
                        str(mine[0])], capture_output=True, text=True,
                       timeout=30, env=profile_env(c))
    assert r.returncode == 0, r
    assert "4 ftfarm batches of this run cancelled" in r.stderr, r
    b = run_batches(c)
    assert [b[i]["state"] for i in mine] == ["cancelled"] * 4, b
    assert b[done]["state"] == "finished" and b[done]["ok"] == 1
    assert b[other]["state"] == "running" and b[plain]["state"] == "running"
    # Nothing left to cancel: quiet, exit 0.
    r = subprocess.run([str(PROFILE / "ftfarm-cancel.py"), str(mine[1])],
                       capture_output=True, text=True, timeout=30,
                       env=profile_env(c))
    assert (r.returncode, r.stderr) == (0, ""), r
    assert c.cli("cancel", "-c", c.config, other, plain).returncode == 0
    # ftfarm cancel of several: each said, 1 when one was not cancelled.
    r = c.cli("cancel", "-c", c.config, other, 999)
    assert r.returncode == 1, r
    assert f"batch {other} has finished" in r.stderr and \
        "batch 999 does not exist" in r.stderr, r.stderr


def test_a_straggler_copy_does_not_run_the_job_again(make_cluster,
                                                     tmp_path):
    """The master copies a task that straggles to an idle slot; a copy of
    a Snakemake job must not run it a second time (it would delete and
    rewrite the outputs under the first): it waits and ends as the first
    one did.  A copy whose first one is killed runs the job itself."""
    c = make_cluster(nodes=1, workers_per_node=3, heartbeat_ms=500)
    c.start()
    # Short tasks first: a job of 4 s is then a straggler at once.
    r = c.cli("submit", "-c", c.config, "--array", "1-30", "--wait", "--",
              "true")
    assert r.returncode == 0, r.stderr
    tmp = tmp_path / ".snakemake" / "tmp.guard123"
    runs = tmp_path / "runs.txt"
    js = jobscript(tmp / "snakejob.slow.1.sh", {
        "rule": "slow", "jobid": 1, "threads": 1, "resources": {}})
    js.write_text(js.read_text().replace(
        "echo job\n", f"echo $$ >> {runs}; sleep 4; echo job; exit 5\n"))

    def submit():
        r = subprocess.run([str(PROFILE / "ftfarm-submit.py"), str(js)],
                           capture_output=True, text=True, timeout=60,
                           env=profile_env(c))
        assert r.returncode == 0, r
        return int(r.stdout)

    def copies(bid):
        return [e for e in c.events() if e["event"] == "task_assigned" and
                e["batch"] == bid and e.get("duplicate")]

    bid = submit()
    assert wait_until(lambda: copies(bid), 30), "no straggler copy"
    assert c.cli("wait", "-c", c.config, bid).returncode == 1
    res = c.results(bid)
    assert len(res) == 1 and res[0]["exit"] == 5, res
    time.sleep(1)       # the losing copy is gone too
    assert len(runs.read_text().split()) == 1, runs.read_text()

    # The first one's slot killed while its copy waits: the copy (or the
    # task's next attempt) runs the job, once.
    runs.unlink()
    bid = submit()
    assert wait_until(lambda: copies(bid) and runs.exists(), 30)
    first = int(runs.read_text().split()[0])
    slots = {w["pid"] for w in c.status()["workers"]}
    up = ancestors(first)
    slot = next(p for p in up if p in slots)
    os.kill(slot, signal.SIGKILL)
    assert c.cli("wait", "-c", c.config, bid).returncode == 1
    pids = runs.read_text().split()
    assert len(pids) == 2 and pids[0] == str(first), pids
    assert c.results(bid)[0]["exit"] == 5
