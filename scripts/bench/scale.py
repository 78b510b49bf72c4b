#!/usr/bin/python3
"""Scale: the cost of a cluster by workers and nodes (start, memory of every
process, idle CPU, the master's CPU per heartbeat round, bytes and
descriptors), and what it still does at that size (tasks, status, failure
detection, stop).

    /usr/bin/python3 scripts/bench/scale.py [--shapes 512x8,64x1]
        [--skip memory,idle,status,tasks,detect] [--bin DIR] [--reps N]
        [--json OUT] [--idle-seconds 10] [--noop-tasks 100000]
        [--before BEFORE.json] [--lease-ms MS]
    /usr/bin/python3 scripts/bench/scale.py --report OUT.json [--before B.json]

A shape WxN is N logical nodes on localhost with W/N slots each, the
dynamic launch of config/local.json, a 1 s heartbeat ("respawn_limit": 5,
so that the two failures of the detection step do not send a one-node
cluster down the ladder); each run writes its config into a temp dir with
its own state_dir, and runs one cluster at a time.  Default shapes: workers
64, 128, 256, 512 x nodes 1, 2, 4, 8.  Per shape and repetition:

start    wall time of `ftfarm start -c CFG` (it returns when every worker
         has registered); then `status --json` must list W idle workers
memory   2 s after the start: PSS (/proc/PID/smaps_rollup) summed over every
         process of the cluster, by program: the supervisor, mpirun and all
         its descendants (master, workers, node agents, ...), found by
         walking /proc PPid from the supervisor's and mpirun's pids, and any
         process whose command line names the cluster's directory; the
         process count, master RSS, open descriptors of master and mpirun
idle     CPU time (every thread's /proc/PID/task/TID/schedstat, ns) of all
         those processes over --idle-seconds, as % of one CPU; the master's
         share; the master's CPU per heartbeat round (rounds = window /
         heartbeat); per round the master's messages in and out (the
         `msgs_in`/`msgs_out` counters of `status --json`, read just before
         and after the window) and bytes (rchar/wchar of /proc/PID/io: every
         read and write system call, MPI's TCP traffic and the master's
         file writes alike; no status request falls inside the window)
status   `ftfarm status --json`: wall time, median of 5
tasks    with `ftfarm submit --wait`, client-timed: 512 x exec `sleep 1`
         (argv ["sleep", "1"]), 512 x {"type": "sleep", "seconds": 1},
         --noop-tasks x {"type": "sleep", "seconds": 0} (tasks/s); each
         batch's results.jsonl is checked (each task exactly once, all ok);
         after the exec batch, this script itself posix_spawns 512 x
         `sleep 1` at once and reaps them (sleep1_bare_s): the floor the
         machine sets for that burst with no task farm in between;
         agents_lost_in_tasks and workers_lost_in_tasks count the
         agent_dead and worker_dead events of the three batches (but the
         slots that went with their agent, reason "its node agent ..."):
         what was given up on under the load, a problem
detect   SIGSTOP one idle worker (pid from `status --json`, on the last
         node), then SIGKILL another (on the first node, its pid read
         once the first is back): seconds from the
         signal to the `ts` of its worker_dead event (any event named
         *_dead with its pid) in events.jsonl; after each, SIGCONT if
         still alive and wait until W workers are idle again
stop     wall time of `ftfarm stop -c CFG`; then how many processes of the
         cluster (pid and start time as recorded) are still alive; any left
         are killed by pid (left_after_stop: at once; left_5s_after_stop:
         after up to 5 s)

Every run cleans up after itself, on failure too: `ftfarm stop`, then
SIGKILL of every recorded process of the cluster (supervisor first) that is
still the same process.  Markdown tables on stdout (medians over --reps),
progress on stderr, every figure of every run in --json OUT.  --before
B.json adds a table of the main figures, "before / after" in each cell, for
the shapes measured in both; a last table fits each cost as fixed + per
slot x slots + per node x nodes (least squares over the shapes' medians)
and extrapolates it to 100 nodes x 128 slots; --report prints the tables
of saved runs without measuring anything.
"""
import argparse
import json
import os
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

DEFAULT_SHAPES = [(w, n) for w in (64, 128, 256, 512) for n in (1, 2, 4, 8)]
PARTS = ("memory", "idle", "status", "tasks", "detect")
HEARTBEAT_MS = 1000
SLEEP_TASKS = 512
LAUNCHERS = ("mpirun", "orterun", "prterun", "mpiexec")
MIB = 1024.0 * 1024.0


# ---- processes of a cluster ----

def proc_stat(pid):
    """(ppid, start time in ticks) of PID, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[1]), int(rest[19])
    except (OSError, IndexError, ValueError):
        return None


def prog(pid):
    """The basename of PID's argv[0] ("" when gone)."""
    cmd = B.pid_cmdline(pid).split(" ", 1)[0]
    return os.path.basename(cmd)


def cluster_procs(c, roots):
    """{pid: start ticks} of every process of cluster C: the trees under
    ROOTS (pids) and every process whose command line names C's directory,
    with their trees.  Our own process and the CLI are not among them."""
    kids, starts, named = {}, {}, []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        st = proc_stat(pid)
        if st is None or pid == me:
            continue
        kids.setdefault(st[0], []).append(pid)
        starts[pid] = st[1]
        if c.dir in B.pid_cmdline(pid):
            named.append(pid)
    out, todo = {}, [r for r in roots if r in starts] + named
    while todo:
        p = todo.pop()
        if p in out:
            continue
        out[p] = starts[p]
        todo += kids.get(p, [])
    return out


def roots(c):
    return [p for p in (B.read_pid(os.path.join(c.state, f))
                        for f in ("supervisor.pid", "mpirun.pid",
                                  "master.pid")) if p]


def alive(pid, start):
    st = proc_stat(pid)
    if st is None or st[1] != start:
        return False
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return "Z" not in line.split()[1]
    except OSError:
        return False
    return True


def proc_kib(pid, name, key):
    """The "KEY: N kB" figure of /proc/PID/NAME (0 when gone)."""
    try:
        with open(f"/proc/{pid}/{name}") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def nfds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def cpu_ns(pid):
    """CPU time of every live thread of PID, in ns."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for t in tids:
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def io_chars(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                k, v = line.split(":")
                out[k] = int(v)
    except OSError:
        pass
    return out.get("rchar", 0), out.get("wchar", 0)


def is_launcher(pid):
    return prog(pid).split(".")[0] in LAUNCHERS


# ---- one run ----

class Run:
    """One cluster of a shape, measured; R collects the figures."""

    def __init__(self, a, bindir, work, workers, nnodes, rep):
        per = workers // nnodes
        nodes = [{"name": f"node{i + 1}", "host": "localhost", "workers": per}
                 for i in range(nnodes)]
        self.a, self.workers, self.nnodes = a, workers, nnodes
        keys = {"heartbeat_ms": HEARTBEAT_MS, "respawn_limit": 5}
        if a.lease_ms:
            keys["lease_ms"] = a.lease_ms
        self.c = B.Cluster(bindir, work, f"s{workers}x{nnodes}r{rep}", nodes,
                           **keys)
        self.procs = {}         # pid -> start ticks, every process seen
        self.R = {"workers": workers, "nodes": nnodes, "rep": rep}
        self.problems = []

    def note(self, msg):
        B.log(f"{self.c.name}: {msg}")
        self.problems.append(msg)

    def snapshot(self):
        now = cluster_procs(self.c, roots(self.c))
        self.procs.update(now)
        return now

    def master_pid(self):
        return B.read_pid(os.path.join(self.c.state, "master.pid"))

    def start(self):
        t0 = time.perf_counter()
        self.c.started = True
        self.c.run("start", timeout=900)
        self.R["start_s"] = time.perf_counter() - t0
        self.snapshot()
        self.wait_idle(None, 60)

    def wait_idle(self, old_pid, timeout):
        """Until every slot is an idle worker, none with OLD_PID."""
        end = time.time() + timeout
        ws = []
        while time.time() < end:
            ws = self.c.status()["workers"]
            if (len(ws) == self.workers
                    and all(w["state"] == "idle" for w in ws)
                    and all(w["pid"] != old_pid for w in ws)):
                return ws
            time.sleep(0.1)
        idle = sum(w["state"] == "idle" for w in ws)
        raise RuntimeError(f"{self.c.name}: {idle} of {self.workers} workers "
                           f"idle after {timeout} s")

    def memory(self):
        now = self.snapshot()
        by = {}
        for pid in now:
            name = "launcher" if is_launcher(pid) else prog(pid)
            k = by.setdefault(name, {"n": 0, "pss_kib": 0, "rss_kib": 0})
            k["n"] += 1
            k["pss_kib"] += proc_kib(pid, "smaps_rollup", "Pss")
            k["rss_kib"] += proc_kib(pid, "status", "VmRSS")
        m = self.master_pid()
        launcher = [p for p in now if is_launcher(p)]
        self.R.update({
            "procs": len(now), "by_program": by,
            "pss_mib": sum(k["pss_kib"] for k in by.values()) / 1024.0,
            "launcher_pss_mib": by.get("launcher", {}).get("pss_kib", 0) / 1024.0,
            "master_pss_mib": proc_kib(m, "smaps_rollup", "Pss") / 1024.0,
            "master_rss_mib": proc_kib(m, "status", "VmRSS") / 1024.0,
            "master_fds": nfds(m),
            "launcher_fds": sum(nfds(p) for p in launcher),
        })

    def idle(self):
        m = self.master_pid()
        pids = list(self.snapshot())
        s0 = self.c.status()["counters"]
        t0 = time.perf_counter()
        io0, mc0, ac0 = io_chars(m), cpu_ns(m), sum(cpu_ns(p) for p in pids)
        time.sleep(self.a.idle_seconds)
        io1, mc1, ac1 = io_chars(m), cpu_ns(m), sum(cpu_ns(p) for p in pids)
        dt = time.perf_counter() - t0
        s1 = self.c.status()["counters"]
        rounds = dt / (HEARTBEAT_MS / 1000.0)
        self.R.update({
            "idle_window_s": dt, "idle_procs": len(pids),
            "idle_cpu_pct": 100.0 * (ac1 - ac0) / 1e9 / dt,
            "master_idle_cpu_pct": 100.0 * (mc1 - mc0) / 1e9 / dt,
            "master_ms_per_round": (mc1 - mc0) / 1e6 / rounds,
            "msgs_in_per_round": (s1["msgs_in"] - s0["msgs_in"]) / rounds,
            "msgs_out_per_round": (s1["msgs_out"] - s0["msgs_out"]) / rounds,
            "master_read_bytes_per_round": (io1[0] - io0[0]) / rounds,
            "master_write_bytes_per_round": (io1[1] - io0[1]) / rounds,
        })

    def status_time(self):
        ts = []
        for _ in range(5):
            t0 = time.perf_counter()
            self.c.run("status", "--json", timeout=60)
            ts.append(time.perf_counter() - t0)
        self.R["status_s"] = B.median(ts)

    def batch(self, key, path, ntasks):
        bid, dt = self.c.submit(path, wait=True, timeout=900)
        for p in self.c.check_results(bid, ntasks):
            self.note(f"{key}: {p}")
        self.R[key] = dt
        return dt

    def tasks(self, files):
        offset = self.c.events_size()
        dt = self.batch("sleep1_exec_s", files["exec"], SLEEP_TASKS)
        floor = spawn_floor(SLEEP_TASKS, ["sleep", "1"])
        self.R["sleep1_bare_s"] = floor
        self.R["sleep1_exec_vs_bare"] = dt / floor
        self.batch("sleep1_type_s", files["sleep"], SLEEP_TASKS)
        dt = self.batch("noop_s", files["noop"], self.a.noop_tasks)
        self.R["noop_tasks_per_s"] = self.a.noop_tasks / dt
        lost = self.lost(offset, "agent_dead")
        self.R["agents_lost_in_tasks"] = len(lost)
        for e in lost:
            self.note(f"tasks: agent of {e.get('node')} declared dead: "
                      f"{e.get('reason')}{self.agent_said(e.get('node'))}")
        lost = [e for e in self.lost(offset, "worker_dead")
                if not str(e.get("reason")).startswith("its node agent")]
        self.R["workers_lost_in_tasks"] = len(lost)
        for e in lost[:5]:
            self.note(f"tasks: worker {e.get('worker')} declared dead: "
                      f"{e.get('reason')}")

    def agent_said(self, node):
        """What master.log says of NODE's agent's missed ping (its
        process's state then), or ""."""
        try:
            with open(os.path.join(self.c.state, "master.log")) as f:
                said = [ln.strip() for ln in f
                        if f"node {node}: its agent missed a ping" in ln]
        except OSError:
            return ""
        return f" ({said[-1]})" if said else ""

    def lost(self, offset, kind):
        """The KIND events (agent_dead, worker_dead) in events.jsonl from
        OFFSET on: what was given up on while the cluster only ran
        tasks."""
        with open(os.path.join(self.c.state, "events.jsonl")) as f:
            f.seek(offset)
            return [e for e in map(json.loads, f.read().splitlines())
                    if e.get("event") == kind]

    def hit(self, worker, sig, key):
        """Send SIG to WORKER's pid; seconds to its worker_dead event."""
        pid = worker["pid"]
        ev = os.path.join(self.c.state, "events.jsonl")
        offset = os.path.getsize(ev)
        t0 = time.time()
        os.kill(pid, sig)
        dead = wait_event(ev, offset, "_dead", pid, 30)
        if dead is None:
            self.note(f"{key}: no *_dead event for pid {pid} within 30 s")
            self.R[key] = float("nan")
        else:
            self.R[key] = dead["ts"] - t0
            self.R[key + "_reason"] = dead.get("reason", "")
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass
        self.wait_idle(pid, 120)

    def detect(self):
        def on(node):
            # Idle ones: a worker lost in the tasks may still be coming
            # back, its last pid gone.
            return [w for w in self.c.status()["workers"]
                    if w["node"] == node and w["state"] == "idle"]
        self.hit(on(f"node{self.nnodes}")[0], signal.SIGSTOP,
                 "sigstop_detect_s")
        # Chosen now, not before: the first hit's respawn takes a while.
        self.hit(on("node1")[-1], signal.SIGKILL, "sigkill_detect_s")

    def stop(self):
        self.snapshot()
        t0 = time.perf_counter()
        self.c.started = False
        self.c.run("stop", timeout=300)
        self.R["stop_s"] = time.perf_counter() - t0
        left = self.left()
        self.R["left_after_stop"] = len(left)
        end = time.time() + 5
        while left and time.time() < end:
            time.sleep(0.1)
            left = self.left()
        self.R["left_5s_after_stop"] = len(left)
        if left:
            self.note(f"stop: {len(left)} processes left 5 s after: "
                      f"{sorted(set(prog(p) for p in left))}")

    def left(self):
        return [p for p, s in self.procs.items() if alive(p, s)]

    def cleanup(self):
        """Stop the cluster if it still runs; kill whatever of it is left."""
        if self.c.started:
            self.c.started = False
            try:
                self.snapshot()
                self.c.run("stop", timeout=120)
            except Exception as e:  # noqa: BLE001 - kill below
                B.log(f"{self.c.name}: stop failed ({e}); killing by pid")
        self.procs.update(cluster_procs(self.c, roots(self.c)))
        sup = B.read_pid(os.path.join(self.c.state, "supervisor.pid"))
        order = sorted(self.procs, key=lambda p: (p != sup, not is_launcher(p)))
        for p in order:
            if alive(p, self.procs[p]):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass


def wait_event(path, offset, suffix, pid, timeout):
    """The first event of PID whose name ends with SUFFIX (worker_dead, or
    a slot's own event in another build) in PATH from OFFSET on, or None."""
    end = time.time() + timeout
    buf = ""
    with open(path) as f:
        f.seek(offset)
        while time.time() < end:
            chunk = f.read()
            if not chunk:
                time.sleep(0.005)
                continue
            buf += chunk
            lines = buf.split("\n")
            buf = lines.pop()
            for line in lines:
                if f'{suffix}"' in line:
                    e = json.loads(line)
                    if (str(e.get("event")).endswith(suffix)
                            and e.get("pid") == pid):
                        return e
    return None


def spawn_floor(n, argv):
    """Seconds to posix_spawn N copies of ARGV at once and reap them all:
    what the machine takes for the burst with nothing between the spawner
    and the processes (glibc's posix_spawn is a vfork and an exec, as the
    slots' exec tasks are)."""
    pids = []
    t0 = time.perf_counter()
    try:
        for _ in range(n):
            pids.append(os.posix_spawnp(argv[0], argv, os.environ))
    finally:
        for pid in pids:  # every one spawned, the loop failing or not
            os.waitpid(pid, 0)
    return time.perf_counter() - t0


def measure(a, bindir, work, files, workers, nnodes, rep):
    r = Run(a, bindir, work, workers, nnodes, rep)
    r.R["load1"] = os.getloadavg()[0]
    B.log(f"{r.c.name}: start")
    try:
        r.start()
        time.sleep(2)
        steps = [("memory", r.memory), ("idle", r.idle),
                 ("status", r.status_time),
                 ("tasks", lambda: r.tasks(files)), ("detect", r.detect)]
        for name, fn in steps:
            if name not in a.skip:
                B.log(f"{r.c.name}: {name}")
                fn()
        r.stop()
    except Exception as e:  # noqa: BLE001 - recorded, the next shape runs
        r.note(f"failed: {type(e).__name__}: {e}")
    finally:
        r.cleanup()
        if not a.keep:
            shutil.rmtree(r.c.dir, ignore_errors=True)
    r.R["problems"] = r.problems
    B.log(f"{r.c.name}: done: " + ", ".join(
        f"{k} {v:.3f}" for k, v in r.R.items() if isinstance(v, float)))
    return r.R


# ---- report ----

COST = [("start s", "start_s", 2), ("PSS all MiB", "pss_mib", 0),
        ("processes", "procs", None), ("mpirun PSS MiB", "launcher_pss_mib", 0),
        ("master RSS MiB", "master_rss_mib", 1),
        ("idle % CPU all", "idle_cpu_pct", 2),
        ("idle % CPU master", "master_idle_cpu_pct", 2),
        ("master ms/round", "master_ms_per_round", 2),
        ("msgs in/out per round", ("msgs_in_per_round", "msgs_out_per_round"), 0),
        ("master bytes r/w per round",
         ("master_read_bytes_per_round", "master_write_bytes_per_round"), None),
        ("fds master/mpirun", ("master_fds", "launcher_fds"), None)]
OPS = [("512 x exec sleep 1 s", "sleep1_exec_s", 2),
       ("bare posix_spawn 512 x sleep 1 s", "sleep1_bare_s", 2),
       ("exec / bare", "sleep1_exec_vs_bare", 2),
       ("512 x sleep 1 s", "sleep1_type_s", 2),
       ("no-op tasks/s", "noop_tasks_per_s", None),
       ("agents / workers lost in them",
        ("agents_lost_in_tasks", "workers_lost_in_tasks"), None),
       ("status --json s", "status_s", 3),
       ("SIGSTOP seen s", "sigstop_detect_s", 3),
       ("SIGKILL seen s", "sigkill_detect_s", 3),
       ("stop s", "stop_s", 2), ("left after stop (5 s)", ("left_after_stop", "left_5s_after_stop"), None)]


def cell(runs, key, digits):
    if isinstance(key, tuple):
        parts = [cell(runs, k, digits) for k in key]
        return "/".join(parts) if any(parts) else ""
    xs = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
    xs = [x for x in xs if x == x]
    if not xs:
        return ""
    m = B.median(xs)
    return B.fmt_int(m) if digits is None else B.fmt(m, digits)


def report(results, shapes):
    out = []
    for title, cols in (("Cost", COST), ("Operations", OPS)):
        rows = []
        for w, n in shapes:
            runs = [r for r in results if r["workers"] == w and r["nodes"] == n]
            cells = [cell(runs, k, d) for _, k, d in cols]
            if any(cells):
                rows.append([w, n] + cells)
        if rows:
            out.append(f"### {title}\n")
            out.append(B.table(["workers", "nodes"] + [c[0] for c in cols],
                               rows) + "\n")
    return "\n".join(out)


MODEL = [("start s", "start_s"), ("PSS all MiB", "pss_mib"),
         ("mpirun PSS MiB", "launcher_pss_mib"),
         ("master RSS MiB", "master_rss_mib"),
         ("idle % CPU all", "idle_cpu_pct"),
         ("idle % CPU master", "master_idle_cpu_pct"),
         ("master ms/round", "master_ms_per_round"),
         ("master fds", "master_fds"), ("processes", "procs")]


def solve3(m, v):
    """X with M X = V (3 x 3, Gauss with partial pivoting); None if singular."""
    a = [row[:] + [x] for row, x in zip(m, v)]
    for i in range(3):
        k = max(range(i, 3), key=lambda r: abs(a[r][i]))
        if abs(a[k][i]) < 1e-12:
            return None
        a[i], a[k] = a[k], a[i]
        for r in range(3):
            if r != i:
                f = a[r][i] / a[i][i]
                a[r] = [x - f * y for x, y in zip(a[r], a[i])]
    return [a[i][3] / a[i][i] for i in range(3)]


def fit(points):
    """Least squares y = c0 + c1 * slots + c2 * nodes over POINTS (slots,
    nodes, y); None when the shapes do not separate the three."""
    xs = [(1.0, w, n) for w, n, _ in points]
    m = [[sum(x[i] * x[j] for x in xs) for j in range(3)] for i in range(3)]
    v = [sum(x[i] * p[2] for x, p in zip(xs, points)) for i in range(3)]
    return solve3(m, v)


def model(results, shapes, at=(12800, 100)):
    """Cost per slot and per node fitted over the shapes' medians, and the
    figure it predicts at AT (slots, nodes)."""
    rows = []
    for title, key in MODEL:
        pts = []
        for w, n in shapes:
            runs = [r for r in results if r["workers"] == w and r["nodes"] == n]
            xs = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
            if xs:
                pts.append((w, n, B.median(xs)))
        c = fit(pts) if len(pts) >= 4 else None
        if c:
            rows.append([title, len(pts), B.fmt(c[0], 3), B.fmt(c[1], 4),
                         B.fmt(c[2], 3),
                         B.fmt(c[0] + c[1] * at[0] + c[2] * at[1], 1)])
    if not rows:
        return ""
    return ("### Model: fixed + per slot x slots + per node x nodes\n\n"
            + B.table(["figure", "shapes", "fixed", "per slot", "per node",
                       f"{at[1]} nodes x {at[0] // at[1]} slots"], rows)
            + "\n")


def parse_shapes(s):
    out = []
    for item in s.split(","):
        w, n = item.lower().split("x")
        w, n = int(w), int(n)
        if n < 1 or w < n or w % n:
            raise SystemExit(f"--shapes: {item}: workers must be a multiple "
                             "of nodes")
        out.append((w, n))
    return out


def batch_files(work, noop):
    def write(name, task, n):
        return B.write_batch(os.path.join(work, f"{name}.json"), name,
                             [task] * n)
    return {"exec": write("exec", {"type": "exec", "argv": ["sleep", "1"]},
                          SLEEP_TASKS),
            "sleep": write("sleep", {"type": "sleep", "seconds": 1},
                           SLEEP_TASKS),
            "noop": write("noop", {"type": "sleep", "seconds": 0}, noop)}


def snapshot_bin(src, work):
    """Copy SRC (a build's bin/) to WORK/bin, so that a rebuild during the
    run does not change what is measured."""
    dst = os.path.join(work, "bin")
    shutil.copytree(src, dst)
    for p in ("ftfarm", "ftfarm-master"):
        if not os.path.exists(os.path.join(dst, p)):
            raise SystemExit(f"{src}/{p} missing: build it first")
    return dst


DONE_WHEN = [("start s", "start_s", 2), ("PSS all MiB", "pss_mib", 0),
             ("idle % CPU", "idle_cpu_pct", 2),
             ("master ms/round", "master_ms_per_round", 2),
             ("512 x exec sleep 1 s", "sleep1_exec_s", 2),
             ("bare spawn s", "sleep1_bare_s", 2),
             ("no-op tasks/s", "noop_tasks_per_s", None),
             ("status s", "status_s", 3),
             ("SIGSTOP s", "sigstop_detect_s", 3),
             ("SIGKILL s", "sigkill_detect_s", 3), ("stop s", "stop_s", 2)]


def compare(before, after, shapes):
    """One table, "before / after" in each cell, for the shapes of both."""
    rows = []
    for w, n in shapes:
        b = [r for r in before if r["workers"] == w and r["nodes"] == n]
        f = [r for r in after if r["workers"] == w and r["nodes"] == n]
        if b and f:
            rows.append([w, n] + [f"{cell(b, k, d) or '-'} / "
                                  f"{cell(f, k, d) or '-'}"
                                  for _, k, d in DONE_WHEN])
    return ("### Before / after\n\n"
            + B.table(["workers", "nodes"] + [c[0] for c in DONE_WHEN], rows)
            + "\n")


def load(paths):
    """(machine info of the first, every run) of the JSON files PATHS."""
    info, runs = None, []
    for p in paths.split(","):
        with open(p) as f:
            d = json.load(f)
        info = info or d["machine"]
        runs += d["runs"]
    return info, runs


def run_all(a):
    B.install_signal_handlers()
    info = B.machine_info()
    work = B.make_workdir("ftfarm-bench-scale-")
    B.log(f"work dir {work}")
    bindir = snapshot_bin(a.bin, work)
    info["bin"] = f"{os.path.abspath(a.bin)}: {B.bin_id(a.bin, bindir)}"
    info["load_before"] = os.getloadavg()
    files = batch_files(work, a.noop_tasks)
    results = []
    try:
        for rep in range(a.reps):
            for w, n in a.shapes:
                results.append(measure(a, bindir, work, files, w, n, rep))
                if a.json:
                    save(a.json, info, results)
    finally:
        info["load_after"] = os.getloadavg()
        if a.json:
            save(a.json, info, results)
        B.finish(work, a.keep)
    return info, results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", type=parse_shapes, default=None,
                    help="WORKERSxNODES,... (default 64..512 x 1..8)")
    ap.add_argument("--skip", default="", help=",".join(PARTS))
    ap.add_argument("--bin", default=os.path.join(B.REPO, "bin"))
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--json", help="write every run's figures here")
    ap.add_argument("--idle-seconds", type=float, default=10)
    ap.add_argument("--noop-tasks", type=int, default=100000)
    ap.add_argument("--lease-ms", type=int, default=0,
                    help="the config's lease_ms (default: the master's 5 s); "
                    "on a loaded machine a master busy spawning hundreds of "
                    "workers can miss a 5 s lease and fail its start")
    ap.add_argument("--report", metavar="JSON[,JSON]",
                    help="measure nothing: the tables of saved runs")
    ap.add_argument("--before", metavar="JSON[,JSON]",
                    help="also a before / after table against saved runs")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    a = ap.parse_args()
    a.skip = {s for s in a.skip.split(",") if s}
    if a.skip - set(PARTS):
        raise SystemExit(f"--skip: unknown {sorted(a.skip - set(PARTS))}; "
                         f"known: {','.join(PARTS)}")
    if a.report:
        info, results = load(a.report)
    else:
        a.shapes = a.shapes or DEFAULT_SHAPES
        info, results = run_all(a)
    shapes = a.shapes or list(dict.fromkeys((r["workers"], r["nodes"])
                                            for r in results))
    print(B.machine_line(info))
    loads = [f"{info[k][0]:.2f} {k[5:]}" for k in ("load_before", "load_after")
            if k in info]
    print(f"Build: {info['bin']}; load average {', '.join(loads)}\n")
    print(report(results, shapes))
    print(model(results, shapes))
    if a.before:
        print(compare(load(a.before)[1], results, shapes))
    problems = [f"{r['workers']}x{r['nodes']} rep {r['rep']}: {p}"
                for r in results for p in r["problems"]]
    B.print_problems("Problems:", problems, 40)
    return 1 if problems else 0


def save(path, info, results):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"machine": info, "runs": results}, f, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
