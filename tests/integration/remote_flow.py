"""The login-node flow on the namespace Slurm cluster, with the master's
unix socket masked from every client (remote_client.masked): check,
sbatch (the holding form of scripts/ftfarm.sbatch), status, a batch with a
worker on the second node killed while events --follow watches, the roles
of another user and of a raw TCP client, then `ftfarm stop` from the login
host, which must end the Slurm job and leave nothing on any host.

run(sl, ...) asserts each step and returns a dict of what it measured.
Used by tests/integration/test_remote.py (small) and by
scripts/check-remote-slurm (the whole outside check).
"""
import json
import os
import signal
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from netns_hosts import netns_pids, proc_cmdline
from remote_client import Raw, masked, run_masked

ROOT = Path(__file__).resolve().parents[2]
LIVE = ("idle", "busy", "slow")


def wait_for(pred, timeout, what, interval=0.1):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"not within {timeout} s: "
                                 f"{what() if callable(what) else what}")
        time.sleep(interval)


def tagged(tag):
    want = f"FTFARM_TEST_TAG={tag}".encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if want in f.read().split(b"\0"):
                    out.append(int(name))
        except OSError:
            pass
    return out


class Flow:
    def __init__(self, sl, bindir, workdir, log=print):
        self.sl = sl
        self.ftfarm = str(Path(bindir) / "ftfarm")
        self.dir = Path(workdir)
        self.dir.chmod(0o755)
        self.state = self.dir / "state"
        self.config = self.dir / "cluster.json"
        self.tag = uuid.uuid4().hex
        self.env = dict(sl.env, FTFARM_TEST_TAG=self.tag,
                        FTFARM=self.ftfarm)
        self.log = log
        self.jid = None
        cfg = {
            "name": f"remote{self.tag[:6]}",
            "state_dir": str(self.state),
            "launch": "dynamic",
            "nodes": "slurm",
            "network": sl.cidr,
            "heartbeat_ms": 500,
            "start_timeout_s": 60,
            "control": {"listen": "0.0.0.0:0",
                        "munge_socket": str(sl.sockdir / "munge.socket.2")},
            "mpirun_args": ["-x", "FTFARM_TEST_TAG", "--mca",
                            "orte_tmpdir_base", str(self.dir / "sess")],
        }
        self.config.write_text(json.dumps(cfg, indent=2) + "\n")
        self.config.chmod(0o644)

    def cli(self, *args, user=None, timeout=60):
        return run_masked([self.ftfarm, *args], self.state, user=user,
                          timeout=timeout, env=self.env)

    def status(self):
        r = self.cli("status", "-c", self.config, "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def diag(self):
        """What the job, Slurm and slurmd say (for a failure's message)."""
        logs = {p.name: p.read_text(errors="replace")[-800:]
                for p in (self.sl.dir / "log").glob("slurmd*.log")}
        job = self.sl.cmd(["scontrol", "show", "job", str(self.jid)],
                          timeout=10).stdout
        return (f"job output: {self.sl.job_output(self.jid)[-2000:]}; "
                f"job: {job}; slurmd logs: {logs}")

    def job_alive(self):
        r = self.sl.cmd(["squeue", "-h", "-j", str(self.jid)], timeout=10)
        return r.stdout.strip() != ""

    def strays(self):
        """Processes of the cluster left anywhere: on the hosts (but
        slurmd) and tagged ones here."""
        left = []
        for h in self.sl.nodes:
            keep = self.sl.keep_pids(h)
            left += [(h, p, proc_cmdline(p)[:80]) for p in netns_pids(h)
                     if p not in keep]
        left += [("login", p, proc_cmdline(p)[:80])
                 for p in tagged(self.tag)]
        return left

    # -- the steps --

    def check(self):
        r = subprocess.run([self.ftfarm, "check", "-c", str(self.config)],
                           capture_output=True, text=True, timeout=30,
                           env=self.env)
        assert r.returncode == 0, r.stderr
        self.log(f"check: {r.stdout.strip()}")

    def submit_job(self, nodes=3, per_node=2, extra=()):
        """sbatch the holding form of scripts/ftfarm.sbatch for the
        config (EXTRA: more sbatch options); the job id (self.jid)."""
        script = (f"#!/bin/sh\nexec {ROOT / 'scripts' / 'ftfarm.sbatch'} "
                  f"{self.config}\n")
        self.sl.env.update(FTFARM=self.ftfarm, FTFARM_TEST_TAG=self.tag)
        self.jid = self.sl.sbatch(script, [f"-N{nodes}",
                                           f"--ntasks-per-node={per_node}",
                                           "--no-kill", *extra])
        self.log(f"sbatch: job {self.jid}")
        return self.jid

    def sbatch(self, nodes=3, per_node=2, extra=(), submitted=False):
        """Start the cluster as a Slurm job (or, SUBMITTED, wait for the
        job self.jid already submitted) and wait until every worker is up,
        as seen over TCP from the login host; the status."""
        if not submitted:
            self.submit_job(nodes, per_node, extra)

        def up():
            if not (self.state / "control.tcp").exists():
                assert self.job_alive(), self.sl.job_output(self.jid)
                return None
            r = self.cli("status", "-c", self.config, "--json")
            if r.returncode != 0:
                return None
            st = json.loads(r.stdout)
            live = [w for w in st["workers"] if w["state"] in LIVE]
            nodes_up = sorted(n["name"] for n in st["nodes"]
                              if n["state"] == "up")
            return st if len(live) == nodes * per_node and \
                nodes_up == sorted(self.sl.nodes[:nodes]) else None
        st = wait_for(up, 120, lambda: "the cluster up, seen over TCP; "
                      + self.diag())
        assert "authenticated as uid 0" in \
            (self.state / "master.log").read_text()
        self.log("status: " + ", ".join(f"{n['name']} {n['state']}"
                                        for n in st["nodes"]))
        return st

    def batch_with_a_kill(self, n, victim_node):
        batch = self.dir / "batch.json"
        batch.write_text(json.dumps({"name": "hosts", "tasks": [
            {"type": "exec", "argv": ["sh", "-c", "sleep 0.05; hostname"]}
            for _ in range(n)]}) + "\n")
        batch.chmod(0o644)
        ev = subprocess.Popen(
            masked([self.ftfarm, "events", "-c", self.config, "--follow"],
                   self.state), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=self.env,
            start_new_session=True)
        try:
            time.sleep(1.0)     # the subscription is in place
            r = self.cli("submit", "-c", self.config, batch)
            assert r.returncode == 0, r.stderr
            bid = int(r.stdout.split()[0])
            results = self.state / "batches" / str(bid) / "results.jsonl"
            wait_for(lambda: results.exists() and
                     len(results.read_text().splitlines()) >= n // 10,
                     60, "a tenth of the batch done")
            st = self.status()
            victim = [w for w in st["workers"] if w["node"] == victim_node
                      and w["state"] in LIVE][0]
            os.kill(victim["pid"], signal.SIGKILL)
            self.log(f"killed worker {victim['id']} (pid {victim['pid']}) "
                     f"on {victim_node}")
            r = self.cli("wait", "-c", self.config, str(bid), timeout=300)
            assert r.returncode == 0, r.stderr
            wait_for(lambda: any(
                '"worker_dead"' in x and f'"{victim_node}"' in x
                for x in self._events_so_far()), 10,
                "events --follow sees the worker die", interval=0.2)
        finally:
            os.killpg(ev.pid, signal.SIGTERM)
            out, err = ev.communicate(timeout=10)
        res = [json.loads(x) for x in results.read_text().splitlines()]
        ids = Counter(r["task"] for r in res)
        assert sorted(ids) == list(range(n)) and set(ids.values()) == {1}, \
            "not every task exactly once"
        assert all(r["status"] == "ok" for r in res)
        hosts = Counter(r["stdout"].strip() for r in res)
        assert len(hosts) >= 2, hosts
        dead = [json.loads(x) for x in out.splitlines()
                if '"worker_dead"' in x]
        assert any(e.get("node") == victim_node for e in dead), out[-2000:]
        self.log(f"batch {bid}: {n} tasks, each once, on {dict(hosts)}; "
                 f"events --follow saw worker_dead on {victim_node}")
        return bid, hosts

    def _events_so_far(self):
        try:
            return (self.state / "events.jsonl").read_text().splitlines()
        except OSError:
            return []

    def roles(self):
        prog = self.dir / "ftfarm-open"
        prog.write_bytes(Path(self.ftfarm).read_bytes())
        prog.chmod(0o755)
        batch = self.dir / "batch.json"

        def nobody(*args):
            return run_masked([prog, *args], self.state, user="nobody",
                              env=self.env, timeout=60)
        r = nobody("status", "-c", self.config, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["workers"]
        r = nobody("submit", "-c", self.config, batch)
        assert r.returncode != 0 and "permission denied" in r.stderr, \
            r.stdout + r.stderr
        r = nobody("stop", "-c", self.config)
        assert r.returncode != 0 and "permission denied" in r.stderr, \
            r.stdout + r.stderr
        self.log("nobody over TCP: status ok; submit and stop refused")
        names = [*self.sl.nodes, "workers"]
        for req in ({"v": 1, "cmd": "status"}, {"v": 1, "cmd": "stop"}):
            raw = Raw(self.state)
            raw.send(req)
            lines = raw.lines()
            raw.close()
            assert len(lines) == 1 and not json.loads(lines[0])["ok"], lines
            assert not any(s in lines[0] for s in names), lines
        st = self.status()
        assert [w for w in st["workers"] if w["state"] in LIVE]
        self.log("raw TCP client: refused, no cluster data; the cluster "
                 "still runs after its stop")

    def stop(self, bound=60):
        t0 = time.monotonic()
        r = self.cli("stop", "-c", self.config, timeout=bound + 30)
        assert r.returncode == 0, r.stdout + r.stderr
        wait_for(lambda: not self.job_alive(), bound - (time.monotonic() -
                                                        t0),
                 "the Slurm job ended after ftfarm stop")
        took = time.monotonic() - t0
        state = self.sl.job_state(self.jid)
        assert state == "COMPLETED", (state, self.sl.job_output(self.jid))
        # slurmstepd and the job's processes may take a moment to go.
        wait_for(lambda: not self.strays(), 20,
                 lambda: f"nothing left on the hosts: {self.strays()}",
                 interval=0.2)
        self.log(f"stop from the login host: job {self.jid} {state} "
                 f"{took:.1f} s after; nothing left on any host")
        return took


def run(sl, n=300, bindir=ROOT / "bin", workdir=None, log=print):
    """The whole flow on SL (a started SlurmCluster).  A dict of figures."""
    d = Path(workdir or tempfile.mkdtemp(prefix="ftfarm-remote-"))
    f = Flow(sl, bindir, d, log)
    try:
        f.check()
        f.sbatch()
        f.batch_with_a_kill(n, sl.nodes[1])
        f.roles()
        took = f.stop()
        return {"stop_s": took, "job": f.jid}
    finally:
        if f.jid and f.job_alive():
            sl.cmd(["scancel", str(f.jid)], timeout=10)
        for p in tagged(f.tag):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
