"""The node agent (ftfarm-worker) and its slots (ftfarm-slot) against a
stand-in master (tests/agent/agent_master.c) under mpirun: every result
exactly once from the slot that ran it, a slot's results before the news
of its death, a SIGSTOPped slot reported hung within a heartbeat and a
ping timeout, a SIGKILLed one at once, KILL and a respawn, the agent's
pong and an orderly stop that leaves no process behind."""
import os
import shutil
import subprocess
import uuid

import pytest

from conftest import ROOT, tagged_pids, wait_until

pytestmark = pytest.mark.timeout(120)

MASTER = ROOT / "build" / "openmpi" / "tests" / "agent_master"
MPIRUN = ["mpirun.openmpi", "--oversubscribe", "--bind-to", "none",
          "--enable-recovery", "--mca", "orte_abort_on_non_zero_status", "0",
          "--mca", "btl", "self,vader,tcp", "--mca", "btl_tcp_if_include",
          "lo", "--mca", "oob_tcp_if_include", "lo", "-n", "1"]


def run_master(bins, *args, timeout=90, bindir=None, static=False):
    """Run the stand-in master (STATIC: as rank 0 of a world whose rank 1
    is the agent); every process it leads to carries a tag, and whatever
    is left of them is killed (by pid) at the end."""
    if not MASTER.is_file():
        pytest.skip(f"{MASTER} not built (make {MASTER.relative_to(ROOT)})")
    tag = uuid.uuid4().hex
    env = dict(os.environ, FTFARM_TEST_TAG=tag, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    bindir = bindir or bins["openmpi"]
    master = [str(MASTER), str(bindir)] + list(args)
    cmd = MPIRUN + master
    if static:
        env["AGENT_MASTER_STATIC"] = "1"
        cmd = MPIRUN + ["-x", "AGENT_MASTER_STATIC"] + master + \
            [":", "-n", "1", str(bindir / "ftfarm-worker")]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True,
                           timeout=timeout)
        left = wait_until(lambda: not tagged_pids(tag), 5)
        return r, left
    finally:
        for pid in tagged_pids(tag):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


def test_agent_relays_slots_and_reports_their_ends(bins):
    r, clean = run_master(bins, "check")
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "\nOK" in r.stdout, out
    assert "results exactly once" in out and "killed by signal 9" in out
    assert "reported hung" in out and "runs tasks" in out
    assert clean, "processes of the agent are left"


def test_agent_as_a_rank_of_a_static_world(bins):
    r, clean = run_master(bins, "check", static=True)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "\nOK" in r.stdout, out
    assert "results exactly once" in out and "reported hung" in out
    assert clean, "processes of the agent are left"


def test_agent_reports_a_slot_that_cannot_start(bins, tmp_path):
    shutil.copy2(bins["openmpi"] / "ftfarm-worker", tmp_path)
    r, clean = run_master(bins, "noslot", bindir=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cannot start ftfarm-slot" in r.stdout
    assert clean


@pytest.mark.long
def test_agent_starts_64_slots(bins):
    r, clean = run_master(bins, "start", "64")
    assert r.returncode == 0 and "\nOK" in r.stdout, r.stdout + r.stderr
    print(r.stdout)
    assert clean


@pytest.mark.long
def test_agent_kills_a_slot_that_never_says_hello(bins, tmp_path):
    shutil.copy2(bins["openmpi"] / "ftfarm-worker", tmp_path)
    fake = tmp_path / "ftfarm-slot"
    fake.write_text("#!/bin/sh\nexec sleep 1000\n")
    fake.chmod(0o755)
    r, clean = run_master(bins, "nohello", bindir=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no hello in 10 s" in r.stdout
    assert clean
