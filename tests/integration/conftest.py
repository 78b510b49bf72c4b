"""Shared helpers for the ftfarm integration tests.

Every test runs its own cluster: a config written under tmp_path whose
"state_dir" is inside tmp_path, nodes on localhost, so tests never touch
state/ and can run next to a demo cluster.  The real binaries of the
repository (<root>/bin, or the MPICH build in <root>/build/mpich/bin) run
under the real MPI launcher.

Each cluster is started with a unique FTFARM_TEST_TAG in its environment.
mpirun, the master, the workers and whatever they start inherit it, so the
processes of one cluster can be told apart from every other process on the
machine (a demo cluster uses the same binaries).  Clean-up only ever signals
PIDs that this test recorded (launcher, master, workers seen) or that carry
this cluster's tag; never processes picked by name.
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "bin"
MPICH_BIN = ROOT / "build" / "mpich" / "bin"

LIVE_STATES = ("idle", "busy", "slow")
CLUSTER_PROCESS_WORDS = ("ftfarm", "mpirun", "mpiexec", "orted", "orterun",
                         "hydra_pmi_proxy", "prterun", "prted")


# ---- /proc helpers ----

def proc_state(pid):
    """The State letter of PID (R, S, D, T, t, Z, X...), or None if gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return line.split()[1]
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def pid_alive(pid):
    """Alive: exists and is neither a zombie nor dead."""
    return pid > 0 and proc_state(pid) not in (None, "Z", "X")


def proc_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def proc_environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def all_pids():
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def children_map():
    """{pid: [its children's pids]} of every live process (from /proc)."""
    children = {}
    for pid in all_pids():
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(pid)
    return children


def is_cluster_worker(tag, pid):
    """Is PID a worker slot (ftfarm-slot) of the cluster tagged TAG?"""
    want = f"FTFARM_TEST_TAG={tag}".encode()
    return "ftfarm-slot" in proc_cmdline(pid) and want in proc_environ(pid)


def is_cluster_agent(tag, pid):
    """Is PID a node agent (ftfarm-worker) of the cluster tagged TAG?"""
    want = f"FTFARM_TEST_TAG={tag}".encode()
    return "ftfarm-worker" in proc_cmdline(pid) and want in proc_environ(pid)


def tagged_pids(tag):
    """Live processes whose environment carries FTFARM_TEST_TAG=TAG."""
    want = f"FTFARM_TEST_TAG={tag}".encode()
    me = os.getpid()
    return [p for p in all_pids()
            if p != me and want in proc_environ(p) and pid_alive(p)]


def wait_until(pred, timeout, interval=0.05):
    """Poll PRED until it is true (returns its value) or TIMEOUT passes
    (returns the last value)."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= end:
            return v
        time.sleep(interval)


def read_jsonl(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    out.append(json.loads(line))
    except FileNotFoundError:
        pass
    return out


# ---- the cluster ----

class Cluster:
    """One ftfarm cluster of this test: config, CLI calls, clean-up."""

    def __init__(self, base, name="c", bindir=BIN, launch="dynamic",
                 nodes=3, workers_per_node=1, **extra):
        self.dir = Path(base) / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state_dir = self.dir / "state"
        self.config = self.dir / "cluster.json"
        self.bindir = Path(bindir)
        self.ftfarm = str(self.bindir / "ftfarm")
        self.tag = uuid.uuid4().hex
        # Open MPI's session directories of this cluster alone: two
        # mpiruns sharing /tmp/ompi.HOST.UID race, one removing the top
        # directory as it ends while the other makes its own inside it
        # ("ORTE_ERROR_LOG: Error in file ... session_dir.c").
        self.ompi_tmp = tempfile.mkdtemp(prefix="ompi-", dir="/tmp")
        self.env = dict(os.environ, FTFARM_TEST_TAG=self.tag,
                        OMPI_MCA_orte_tmpdir_base=self.ompi_tmp)
        self.env.pop("FTFARM_CONFIG", None)
        self.seen_pids = set()      # every worker pid ever seen
        self.launcher_pid = None
        self.master_pid = None
        self.supervisor_pids = set()    # supervisors and standbys seen
        self.started = False
        self._nbatch = 0
        cfg = {
            "name": f"t{self.tag[:8]}",
            "state_dir": str(self.state_dir),
            "launch": launch,
            "nodes": [{"name": f"node{i + 1}", "host": "localhost",
                       "workers": workers_per_node} for i in range(nodes)],
        }
        cfg.update(extra)
        self.cfg = cfg
        self.config.write_text(json.dumps(cfg, indent=2) + "\n")

    # -- CLI --

    def cli(self, *args, timeout=120, input=None):
        """Run bin/ftfarm ARGS; the CompletedProcess (text)."""
        return subprocess.run([self.ftfarm, *map(str, args)],
                              capture_output=True, text=True, env=self.env,
                              timeout=timeout, input=input,
                              stdin=None if input is not None
                              else subprocess.DEVNULL)

    def start(self, check=True, timeout=120):
        r = self.cli("start", "-c", self.config, timeout=timeout)
        self._record_pids()
        if r.returncode == 0:
            self.started = True
            self.status()       # records the first worker pids
        elif check:
            raise AssertionError(
                f"ftfarm start failed ({r.returncode}):\n{r.stdout}\n"
                f"{r.stderr}\n--- mpirun.log:\n{self.mpirun_log()}")
        return r

    def stop(self, timeout=90):
        self._record_pids()
        try:
            self.status(timeout=10)     # records the last worker pids
        except Exception:
            pass
        r = self.cli("stop", "-c", self.config, timeout=timeout)
        self.started = False
        return r

    def write_batch(self, batch, name=None):
        """BATCH (a dict, or text) into a file of its own; its path."""
        self._nbatch += 1
        path = self.dir / (name or f"batch{self._nbatch}.json")
        if isinstance(batch, (dict, list)):
            path.write_text(json.dumps(batch, indent=1) + "\n")
        else:
            path.write_text(batch)
        return path

    def submit(self, batch, wait=True, timeout=300):
        """Submit BATCH (dict, text or an existing path): (rc, out, err)."""
        path = batch if isinstance(batch, Path) else self.write_batch(batch)
        args = ["submit", "-c", self.config, path]
        if wait:
            args.append("--wait")
        r = self.cli(*args, timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def status(self, timeout=30):
        r = self.cli("status", "-c", self.config, "--json", timeout=timeout)
        if r.returncode != 0:
            raise AssertionError(f"ftfarm status failed ({r.returncode}): "
                                 f"{r.stderr}")
        st = json.loads(r.stdout)
        for w in st.get("workers", []):
            if w.get("pid", 0) > 0:
                self.seen_pids.add(w["pid"])
        return st

    def worker_pids(self, status=None):
        """PIDs of the workers status calls live (idle, busy, slow)."""
        st = status or self.status()
        return [w["pid"] for w in st["workers"]
                if w["state"] in LIVE_STATES and w["pid"] > 0]

    # -- files --

    def results(self, batch_id):
        return read_jsonl(self.state_dir / "batches" / str(batch_id) /
                          "results.jsonl")

    def events(self):
        evs = read_jsonl(self.state_dir / "events.jsonl")
        for e in evs:
            if e.get("event", "").startswith("worker_") and e.get("pid", 0) > 0:
                self.seen_pids.add(e["pid"])
        return evs

    def mpirun_log(self):
        try:
            return (self.state_dir / "mpirun.log").read_text(errors="replace")
        except OSError:
            return ""

    def master_log(self):
        try:
            return (self.state_dir / "master.log").read_text(errors="replace")
        except OSError:
            return ""

    # -- processes --

    def _read_pid(self, name):
        try:
            # "PID START": the pid and its process's start time.
            return int((self.state_dir / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def _record_pids(self):
        p = self._read_pid("mpirun.pid")
        if p:
            self.launcher_pid = p
        p = self._read_pid("master.pid")
        if p:
            self.master_pid = p
        for f in ["supervisor.pid", *(x.name for x in
                  self.state_dir.glob("standby.*.pid"))]:
            p = self._read_pid(f)
            if p:
                self.supervisor_pids.add(p)

    def _kill_supervisors(self):
        """SIGKILL this cluster's supervisors and standbys (tagged), so
        that nothing restarts a job while it is being cleaned up."""
        want = f"FTFARM_TEST_TAG={self.tag}".encode()
        for p in self.supervisor_pids:
            if pid_alive(p) and want in proc_environ(p):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass

    def leftovers(self):
        """(pid, state, cmdline) of this cluster's processes still alive:
        the launcher, master and every worker pid ever seen, and every
        process carrying the cluster's tag whose command line is an ftfarm
        or MPI runtime program."""
        self._record_pids()
        self.events()
        found = {}
        for p in [self.launcher_pid, self.master_pid, *self.seen_pids]:
            if p and pid_alive(p):
                found[p] = proc_cmdline(p)
        for p in tagged_pids(self.tag):
            cmd = proc_cmdline(p)
            if any(w in cmd for w in CLUSTER_PROCESS_WORDS):
                found[p] = cmd
        return sorted((p, proc_state(p), c) for p, c in found.items()
                      if pid_alive(p))

    def tagged_leftovers(self):
        """Every live process carrying the cluster's tag."""
        return [(p, proc_state(p), proc_cmdline(p))
                for p in tagged_pids(self.tag)]

    def cleanup(self):
        """Stop the cluster however it is; as a last resort SIGKILL the
        recorded PIDs and the processes carrying this cluster's tag."""
        self._record_pids()
        if (self.state_dir / "control.sock").exists():
            try:
                # A master that does not answer status would not answer
                # stop either: then go straight to the signals.
                answers = self.cli("status", "-c", self.config,
                                   timeout=10).returncode == 0
            except subprocess.TimeoutExpired:
                answers = False
            if answers:
                try:
                    self.cli("stop", "-c", self.config, timeout=60)
                except subprocess.TimeoutExpired:
                    pass
        self._record_pids()
        self._kill_supervisors()
        self.events()
        victims = set(p for p, _, _ in self.leftovers())
        victims.update(tagged_pids(self.tag))
        if self.launcher_pid and pid_alive(self.launcher_pid):
            try:
                os.killpg(self.launcher_pid, signal.SIGKILL)
            except OSError:
                pass
        for p in victims:
            # Only a PID we recorded and that still looks like ours.
            tagged = f"FTFARM_TEST_TAG={self.tag}".encode() in proc_environ(p)
            if tagged or p in (self.launcher_pid, self.master_pid) or \
                    p in self.seen_pids and "ftfarm" in proc_cmdline(p):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        wait_until(lambda: not any(pid_alive(p) for p in victims), 5)
        shutil.rmtree(self.ompi_tmp, ignore_errors=True)


# ---- the binaries under test ----

BIN_FILES = ("ftfarm", "ftfarm-master", "ftfarm-worker", "ftfarm-slot",
             "ftfarm-agent",
             "ftfarm-gang")


def have_build(bindir):
    bindir = Path(bindir)
    return all((bindir / f).is_file() for f in BIN_FILES) and \
        any((bindir / "tasks").glob("*.so"))


def snapshot_bins(src, dst):
    """Copy the programs and task plugins of SRC to DST, once they have
    not changed for 2 s: other people rebuild bin/ while tests run, and a
    cluster must not mix the master of one build with workers of another.
    Returns DST, or None if SRC holds no complete build."""
    src, dst = Path(src), Path(dst)
    if not have_build(src):
        return None
    end = time.time() + 120
    while time.time() < end:
        files = [src / f for f in BIN_FILES] + \
            sorted((src / "tasks").glob("*.so")) + \
            sorted((src / "gangs").glob("*.so"))
        try:
            newest = max(f.stat().st_mtime for f in files)
        except OSError:
            newest = time.time()
        if time.time() - newest >= 2:
            break
        time.sleep(0.5)
    (dst / "tasks").mkdir(parents=True, exist_ok=True)
    (dst / "gangs").mkdir(parents=True, exist_ok=True)
    for f in files:
        rel = f.relative_to(src)
        shutil.copy2(f, dst / rel)
    return dst


@pytest.fixture(scope="session")
def bins(tmp_path_factory):
    """{"openmpi": dir, "mpich": dir or None}: snapshots of <root>/bin and
    <root>/build/mpich/bin taken when the session starts (set
    FTFARM_TEST_LIVE_BIN=1 to run the repository's directories as they
    are)."""
    if os.environ.get("FTFARM_TEST_LIVE_BIN"):
        return {"openmpi": BIN, "mpich": MPICH_BIN if have_build(MPICH_BIN)
                else None}
    base = tmp_path_factory.mktemp("bin")
    ompi = snapshot_bins(BIN, base / "openmpi")
    assert ompi, f"no build in {BIN}: run `make` first"
    # The python task plugin finds the package two levels up from
    # itself, as bin/tasks finds the checkout's python/.
    shutil.copytree(ROOT / "python" / "ftfarm", base / "python" / "ftfarm",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return {"openmpi": ompi, "mpich": snapshot_bins(MPICH_BIN, base / "mpich")}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "cluster_opts(**kw): options of the `cluster` fixture's "
        "config (heartbeat_ms=..., respawn_limit=..., launch=...)")
    config.addinivalue_line(
        "markers", "long: minutes of a big or long-lived cluster; in "
        "`make test-long`, not `make test`")
    config.addinivalue_line(
        "markers", "heavy: takes 20 s or more; runs first, so that the "
        "parallel workers of `make test` end together")
    config.addinivalue_line(
        "markers", "slurm: runs a Slurm cluster; `make integration` runs "
        "these one at a time outside pytest-xdist (under its workers, "
        "salloc's mpirun loses its ORTE daemons at launch; cause not "
        "found)")


def pytest_collection_modifyitems(config, items):
    """The heavy tests first (a stable sort keeps the rest in order):
    pytest-xdist hands tests out in this order, and a long test begun
    last would keep one worker busy long after the others ran dry."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)


@pytest.fixture
def make_cluster(tmp_path, bins):
    """Factory: make_cluster(mpi="openmpi"|"mpich", **config) -> Cluster
    (not started).  Every cluster made is stopped when the test ends, pass
    or fail."""
    made = []

    def make(name=None, mpi="openmpi", base=None, **kw):
        if bins[mpi] is None:
            src = MPICH_BIN if mpi == "mpich" else BIN
            pytest.skip(f"no complete {mpi} build in {src} (build it with "
                        f"`make MPI={mpi} BINDIR={src.relative_to(ROOT)}`)")
        kw.setdefault("bindir", bins[mpi])
        c = Cluster(base or tmp_path, name=name or f"c{len(made)}", **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.cleanup()


@pytest.fixture
def cluster(make_cluster, request):
    """A started 3-worker cluster (options from @pytest.mark.cluster_opts).
    Pings every 0.5 s: a 150 ms pong deadline (heartbeat 200) is missed
    at load 10 here, which killed workers in tests that are not about
    detection; those that are set their own heartbeat."""
    m = request.node.get_closest_marker("cluster_opts")
    kw = dict(heartbeat_ms=500)
    if m:
        kw.update(m.kwargs)
    c = make_cluster(**kw)
    c.start()
    yield c


def batch_id_of(stdout):
    """The batch id `submit` printed (its first line)."""
    return int(stdout.split()[0])


def exec_task(script, *args, **extra):
    t = {"type": "exec", "argv": ["sh", "-c", script, *map(str, args)]}
    t.update(extra)
    return t


def check_exactly_once(results, n, expect_stdout=None):
    """Every task index 0..n-1 has exactly one result, status ok, and (when
    EXPECT_STDOUT is given, a function of the index) the expected stdout.
    Returns a list of problems (empty when all is right)."""
    problems = []
    by_task = {}
    for r in results:
        by_task.setdefault(r["task"], []).append(r)
    if len(results) != n:
        problems.append(f"{len(results)} result lines, expected {n}")
    missing = [i for i in range(n) if i not in by_task]
    if missing:
        problems.append(f"{len(missing)} tasks without a result, e.g. "
                        f"{missing[:10]}")
    dups = {i: len(v) for i, v in by_task.items() if len(v) > 1}
    if dups:
        problems.append(f"{len(dups)} tasks with several results, e.g. "
                        f"{dict(list(dups.items())[:10])}")
    extra = [i for i in by_task if not (isinstance(i, int) and 0 <= i < n)]
    if extra:
        problems.append(f"results for unknown tasks {extra[:10]}")
    bad = [r for r in results if r.get("status") != "ok"]
    if bad:
        problems.append(f"{len(bad)} results not ok, e.g. {bad[:3]}")
    if expect_stdout is not None:
        wrong = [r for r in results if isinstance(r.get("task"), int) and
                 r.get("stdout") != expect_stdout(r["task"])]
        if wrong:
            problems.append(f"{len(wrong)} results with the wrong stdout, "
                            f"e.g. {wrong[:3]}")
    return problems


def check_lost_worker_batch(c, bid, n, expect_stdout, slot):
    """Wait for batch BID of N tasks on cluster C, one of whose workers
    (slot SLOT) was lost while it ran: every task exactly once with the
    expected stdout, and the lost worker's task reassigned and done by a
    later attempt.  Returns the events."""
    rc = c.cli("wait", "-c", c.config, bid, timeout=60).returncode
    assert rc == 0
    res = c.results(bid)
    problems = check_exactly_once(res, n, expect_stdout)
    assert not problems, problems
    evs = c.events()
    reassigned = [e for e in evs if e["event"] == "task_reassigned" and
                  e["worker"] == slot and e["batch"] == bid]
    assert reassigned, f"no task_reassigned event for worker {slot}"
    for e in reassigned:
        r = [x for x in res if x["task"] == e["task"]]
        assert len(r) == 1 and r[0]["status"] == "ok", r
        assert r[0]["attempt"] > e["attempt"], \
            f"reassigned task {e['task']} reported by the lost attempt: {r}"
    return evs


def assert_no_leftovers(c, timeout=5):
    """After a stop: no launcher, master or worker of cluster C is alive."""
    if wait_until(lambda: not c.leftovers(), timeout):
        return
    left = c.leftovers()
    assert not left, f"processes of the cluster left after stop: {left}"


@pytest.fixture
def open_dir():
    """A directory other users may traverse (pytest's own are 0700), for
    tests that run clients as another user; removed at the end."""
    d = Path(tempfile.mkdtemp(prefix="ftfarm-open-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def munged():
    """A munged of the test's own (remote_client.Munged), fresh key."""
    from remote_client import Munged
    m = Munged().start()
    yield m
    m.stop()
