"""Shared helpers of the ftfarm benchmark scripts (throughput.py, recovery.py).

Only the standard library: the drivers run under Debian's /usr/bin/python3.
"""
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MPIRUN = "mpirun.openmpi"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def table(header, rows):
    """A markdown table: HEADER a list of column names, ROWS lists of cells."""
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def fmt(x, digits=3):
    if x != x:  # nan
        return "n/a"
    return f"{x:.{digits}f}"


def fmt_int(x):
    if x != x:
        return "n/a"
    return f"{x:,.0f}"


def make_workdir(prefix):
    return tempfile.mkdtemp(prefix=prefix)


def snapshot_bin(src, workdir):
    """Copy the built programs to WORKDIR/bin, so that a rebuild of bin/ by
    someone else during the run does not change what is measured (the master
    finds ftfarm-worker and tasks/ beside its own executable)."""
    dst = os.path.join(workdir, "bin")
    shutil.copytree(src, dst)
    for p in ("ftfarm", "ftfarm-master", "ftfarm-worker", "tasks/sleep.so"):
        if not os.path.exists(os.path.join(dst, p)):
            raise SystemExit(f"{src}/{p} missing: run make first")
    return dst


def bin_id(src, snap):
    """Which build was measured: sha256 prefix and mtime of ftfarm-master,
    and of the worker with its exec plugin (a change to the plugin alone
    leaves the master as it was)."""
    import hashlib

    def sha(name):
        with open(os.path.join(snap, name), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:12]
    mt = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(
        os.path.getmtime(os.path.join(src, "ftfarm-master"))))
    out = f"ftfarm-master sha256 {sha('ftfarm-master')}..., built {mt}"
    try:
        out += (f"; ftfarm-worker {sha('ftfarm-worker')}..., "
                f"tasks/exec.so {sha('tasks/exec.so')}...")
    except OSError:
        pass
    return out


def install_signal_handlers():
    """Turn SIGTERM/SIGHUP into SystemExit so that `finally:` blocks stop the
    clusters."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, handler)


def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def pid_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Cluster:
    """One ftfarm cluster with its own config and state directory."""

    def __init__(self, bindir, workdir, name, nodes, **keys):
        self.bin = bindir
        self.ftfarm = os.path.join(bindir, "ftfarm")
        self.name = name
        self.dir = os.path.join(workdir, name)
        self.state = os.path.join(self.dir, "state")
        os.makedirs(self.dir, exist_ok=True)
        self.cfg = os.path.join(self.dir, "config.json")
        cfg = {"name": name, "state_dir": self.state, "launch": "dynamic",
               "nodes": nodes}
        cfg.update(keys)
        with open(self.cfg, "w") as f:
            json.dump(cfg, f, indent=1)
        self.config = cfg
        self.started = False
        self.pids = set()	# every worker pid seen, for the fallback kill
        self.env = None		# the CLI's environment (None: ours)

    def run(self, *args, timeout=600, check=True):
        p = subprocess.run([self.ftfarm, args[0], "-c", self.cfg, *args[1:]],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout, env=self.env)
        if check and p.returncode != 0:
            raise RuntimeError(f"{self.name}: ftfarm {' '.join(args)}: exit "
                               f"{p.returncode}: {p.stderr.strip()}")
        return p

    def start(self):
        self.started = True
        self.run("start", timeout=180)
        self.status()

    def status(self):
        st = json.loads(self.run("status", "--json", timeout=60).stdout)
        for w in st.get("workers", []):
            if w.get("pid", 0) > 0:
                self.pids.add(w["pid"])
        return st

    def submit(self, batch, wait=True, timeout=3600):
        """Submit BATCH.  Returns (batch id, client wall seconds)."""
        args = ["submit", batch] + (["--wait"] if wait else [])
        w0 = time.time()
        t0 = time.perf_counter()
        p = self.run(*args, timeout=timeout)
        dt = time.perf_counter() - t0
        self.last_submit = (w0, time.time())
        return int(p.stdout.split()[0]), dt

    def wait(self, bid, timeout=600):
        return self.run("wait", str(bid), timeout=timeout)

    def batch_events(self, bid, offset, names=("batch_submitted", "batch_done")):
        """The events NAMES of batch BID in events.jsonl from byte OFFSET on,
        as {name: event}.  Stops reading once all are found."""
        found = {}
        with open(os.path.join(self.state, "events.jsonl")) as f:
            f.seek(offset)
            for line in f:
                if '"batch_' not in line:
                    continue
                e = json.loads(line)
                if e.get("event") in names and e.get("batch") == bid:
                    found[e["event"]] = e
                    if len(found) == len(names):
                        break
        return found

    def events_size(self):
        try:
            return os.path.getsize(os.path.join(self.state, "events.jsonl"))
        except OSError:
            return 0

    def batch_dir(self, bid):
        return os.path.join(self.state, "batches", str(bid))

    def summary(self, bid):
        with open(os.path.join(self.batch_dir(bid), "summary.json")) as f:
            return json.load(f)

    def check_results(self, bid, ntasks):
        """Each task index 0..NTASKS-1 exactly once, all ok.  Returns a list
        of problems (empty when fine)."""
        problems = []
        seen = bytearray(ntasks)
        lines = bad = dup = 0
        with open(os.path.join(self.batch_dir(bid), "results.jsonl")) as f:
            for line in f:
                lines += 1
                r = json.loads(line)
                i = r["task"]
                if not 0 <= i < ntasks:
                    problems.append(f"task index {i} out of range")
                    continue
                if seen[i]:
                    dup += 1
                seen[i] = 1
                if r["status"] != "ok":
                    bad += 1
        if lines != ntasks:
            problems.append(f"results.jsonl has {lines} lines for {ntasks} tasks")
        if dup:
            problems.append(f"{dup} duplicate results")
        missing = ntasks - sum(seen)
        if missing:
            problems.append(f"{missing} tasks without a result")
        if bad:
            problems.append(f"{bad} results not ok")
        s = self.summary(bid)
        if s.get("total") != ntasks or s.get("ok") != ntasks:
            problems.append(f"summary.json: {s}")
        return problems

    def log_problems(self, ignore=()):
        """Lines of mpirun.log and master.log that look like trouble, except
        those containing one of IGNORE (the faults a benchmark injects).
        Open MPI's help boxes are reduced to their telling lines."""
        out, lines = [], []
        keys = {"mpirun.log": ("warning", "error", "message:", "abort",
                               "hang", "fail"),
                "master.log": (" warn", "error", "fatal", "abort")}
        for name in ("mpirun.log", "master.log"):
            path = os.path.join(self.state, name)
            try:
                with open(path, errors="replace") as f:
                    for line in f:
                        low = line.lower()
                        if (any(k in low for k in keys[name])
                                and not any(i in line for i in ignore)):
                            lines.append((name, line.strip()))
            except OSError:
                pass
        # Identical messages (up to numbers) once, with a count.
        seen = {}
        for name, line in lines:
            key = (name, re.sub(r"[0-9]+", "#", line))
            if key in seen:
                seen[key][1] += 1
            else:
                seen[key] = [line, 1]
        for (name, _), (line, n) in seen.items():
            out.append(f"{self.name}/{name}: {line}" + (f" (x{n})" if n > 1 else ""))
        return out

    def stop(self):
        """Stop the cluster; kill its processes if `ftfarm stop` fails."""
        if not self.started:
            return
        self.started = False
        try:
            self.run("stop", timeout=120)
            return
        except Exception as e:  # noqa: BLE001 - fall back to killing
            log(f"{self.name}: stop failed ({e}); killing its processes")
        for pidfile, want in (("mpirun.pid", "mpirun"),
                              ("master.pid", "ftfarm-master")):
            pid = read_pid(os.path.join(self.state, pidfile))
            if pid and want in pid_cmdline(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        for pid in self.pids:
            if "ftfarm-worker" in pid_cmdline(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def write_batch(path, name, tasks):
    with open(path, "w") as f:
        json.dump({"name": name, "tasks": tasks}, f, separators=(",", ":"))
    return path


def short_commands(work, n):
    """N x `true` as an exec batch and as N lines for xargs, in WORK.
    Returns (batch path, lines path)."""
    lines = os.path.join(work, "lines.txt")
    with open(lines, "w") as f:
        f.write("".join(f"{i}\n" for i in range(n)))
    batch = write_batch(os.path.join(work, "true.json"), "true",
                        [{"type": "exec", "argv": ["true"]}] * n)
    return batch, lines


def page_fault_us(pages=4096, reps=3):
    """Microseconds a first write to a fresh anonymous page costs here
    (median of REPS runs over PAGES pages).  About 0.1-0.3 on bare metal;
    a VM that shadows its page tables pays far more, and a first big
    batch, whose processes all grow, pays it for every new page."""
    import mmap
    runs = []
    for _ in range(reps):
        m = mmap.mmap(-1, pages * mmap.PAGESIZE)
        t0 = time.perf_counter()
        for off in range(0, pages * mmap.PAGESIZE, mmap.PAGESIZE):
            m[off] = 1
        runs.append((time.perf_counter() - t0) / pages * 1e6)
        m.close()
    return round(median(runs), 2)


def machine_info():
    def sh(cmd):
        try:
            return subprocess.run(cmd, shell=True, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True,
                                  timeout=30).stdout.strip()
        except Exception as e:  # noqa: BLE001
            return f"({e})"
    model = sh("lscpu | sed -n 's/^Model name: *//p'")
    return {
        "cpu": model,
        "nproc": sh("nproc"),
        "mem": sh("free -g | awk '/^Mem:/{print $2\" GiB\"}'"),
        "kernel": sh("uname -r"),
        "mpi": sh(f"{MPIRUN} --version | head -1"),
        "date": sh("date -u"),
        "page_fault_us": page_fault_us(),
        "commit": sh(f"git -C {REPO} rev-parse --short HEAD") +
        (" (+ uncommitted changes)" if sh(f"git -C {REPO} status --porcelain "
                                           "--untracked-files=no") else ""),
    }


def machine_line(info):
    fault = (f", a page's first write {info['page_fault_us']} us"
             if "page_fault_us" in info else "")
    return (f"Machine: {info['cpu']}, {info['nproc']} CPUs, {info['mem']} RAM, "
            f"kernel {info['kernel']}{fault}, {info['mpi']}; tree "
            f"{info['commit']}; {info['date']}")


def print_problems(title, problems, limit):
    """Print the problems a benchmark saw (or "none") under TITLE."""
    print(f"{title}\n")
    for p in problems[:limit]:
        print(f"- {p}")
    if len(problems) > limit:
        print(f"- ... {len(problems) - limit} more")
    if not problems:
        print("- none")


def finish(work, keep):
    """Remove the work dir unless asked to keep it."""
    if keep:
        log(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
