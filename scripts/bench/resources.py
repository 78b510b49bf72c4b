#!/usr/bin/python3
"""Usage, memory limits and output files: what they cost, side by side.

    /usr/bin/python3 scripts/bench/resources.py --off-bin DIR [--bin DIR]
        [--rounds 5] [--noop-n 200000] [--only noop,true,files]

Four clusters of one node with two slots (task events off), up at once:

  off       the build of --off-bin: one without this work (usage, memory,
            output files), e.g. main before it: `git archive REV | tar -x
            -C /tmp/off && make -C /tmp/off -j2 all`
  on        this build: every result measured (cpu_s, max_rss)
  mem       this build, the node's "mem" 8G and every task "mem": "100M":
            placement counts memory; exec tasks run in the slot's memory
            cgroup (as root on cgroup v1 here) with that limit
  sampled   the same with "mem_enforce": "sample" (what an agent that may
            not make cgroups does)

noop   --noop-n no-op tasks ({"type": "sleep", "seconds": 0}), tasks/s
       from the master's batch_submitted and batch_done events
true   600 x exec `true`, the wall time of `ftfarm submit --wait`
files  100 tasks each writing 10 MB (head -c 10000000 /dev/zero): to the
       task's "stdout" file against `sh -c 'head ... > FILE'`, on "on"

Each round runs every configuration once, in an order that rotates from
round to round; ratios are medians of per-round ratios to "off" (files:
to `sh -c`), and the ratio of the medians beside.  Beside the wall
figures, which other people's work on a
shared machine moves by 2-3 x from one run to the next, the CPU the
cluster spent: the master's, the agent's and the slots' threads (their
schedstat, in ns) and what the slots' children used (the tasks, in the
slots' cutime and cstime, in ticks), per task.  Every batch is checked
(each task once, ok; the files' sizes).  Markdown on stdout, progress on
stderr.
"""
import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

TESTS = ("noop", "true", "files")
CONFIGS = ("off", "on", "mem", "sampled")
FILE_N = 100
FILE_BYTES = 10_000_000


def write_batch(path, tasks):
    with open(path, "w") as f:
        json.dump({"name": os.path.basename(path), "tasks": tasks}, f)
    return path


def clusters(a, work):
    """The four clusters, started."""
    node = [{"name": "node1", "host": "localhost", "workers": 2}]
    mem_node = [dict(node[0], mem="8G")]
    out = {
        "off": B.Cluster(a.off_bin, work, "off", node, task_events=False),
        "on": B.Cluster(a.bin, work, "on", node, task_events=False),
        "mem": B.Cluster(a.bin, work, "mem", mem_node, task_events=False),
        "sampled": B.Cluster(a.bin, work, "sampled", mem_node,
                             task_events=False, mem_enforce="sample"),
    }
    for c in out.values():
        c.start()
    return out


def batches(work, n):
    """{(test, config): batch file}."""
    noop = {"type": "sleep", "seconds": 0}
    true = {"type": "exec", "argv": ["true"]}
    out = {}
    for cfg in CONFIGS:
        extra = {"mem": "100M"} if cfg in ("mem", "sampled") else {}
        out[("noop", cfg)] = write_batch(
            os.path.join(work, f"noop-{cfg}.json"),
            [dict(noop, **extra)] * n)
        out[("true", cfg)] = write_batch(
            os.path.join(work, f"true-{cfg}.json"),
            [dict(true, **extra)] * 600)
    return out


def file_batches(work):
    """(to the task's file, through sh -c) batches and their directory."""
    d = os.path.join(work, "files")
    os.makedirs(d, exist_ok=True)
    head = ["head", "-c", str(FILE_BYTES), "/dev/zero"]
    own = write_batch(os.path.join(work, "files-own.json"), [
        {"type": "exec", "argv": head, "stdout": f"{d}/own.%t"}
        for _ in range(FILE_N)])
    shell = write_batch(os.path.join(work, "files-sh.json"), [
        {"type": "exec", "argv": ["sh", "-c", " ".join(head) +
                                  f" > {d}/sh.{i}"]} for i in range(FILE_N)])
    return own, shell, d


CLK = os.sysconf("SC_CLK_TCK")


def threads_ns(pid):
    """CPU ns of every thread of PID (0 when it is gone)."""
    total = 0
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
    except OSError:
        pass
    return total


def children_s(pid):
    """CPU seconds of PID's children that it waited for."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            x = f.read().rsplit(")", 1)[1].split()
        return (int(x[13]) + int(x[14])) / CLK
    except (OSError, IndexError, ValueError):
        return 0.0


PARTS = ("master", "agent", "slots", "tasks")


def cluster_cpu(c):
    """CPU seconds the cluster C has spent so far, by part: its master's,
    its agents' and its slots' own, and the slots' waited-for children's
    (the tasks' processes)."""
    st = c.status()
    master = B.read_pid(os.path.join(c.state, "master.pid"))
    agents = [n["agent_pid"] for n in st["nodes"]]
    slots = [w["pid"] for w in st["workers"]]
    return {"master": threads_ns(master) / 1e9,
            "agent": sum(threads_ns(p) for p in agents) / 1e9,
            "slots": sum(threads_ns(p) for p in slots) / 1e9,
            "tasks": sum(children_s(p) for p in slots)}


def noop_rate(c, bid, n):
    ev = c.batch_events(bid, 0)
    return n / (ev["batch_done"]["ts"] - ev["batch_submitted"]["ts"])


def check_files(d, prefix, problems):
    for i in range(FILE_N):
        p = os.path.join(d, f"{prefix}.{i}")
        size = os.path.getsize(p) if os.path.exists(p) else -1
        if size != FILE_BYTES:
            problems.append(f"{p}: {size} bytes, not {FILE_BYTES}")
        else:
            os.unlink(p)


def run(a, work, out, problems):
    cs = clusters(a, work)
    bs = batches(work, a.noop_n)
    own, shell, d = file_batches(work)
    times = {}
    try:
        for cfg in CONFIGS:             # warm-up
            for test in ("noop", "true"):
                cs[cfg].submit(bs[(test, cfg)])
        for r in range(a.rounds):
            k = r % len(CONFIGS)
            order = CONFIGS[k:] + CONFIGS[:k]
            for test in a.only:
                if test == "files":
                    pair = [("own", own), ("sh", shell)]
                    for name, batch in (pair if r % 2 == 0 else pair[::-1]):
                        bid, dt = cs["on"].submit(batch)
                        problems += cs["on"].check_results(bid, FILE_N)
                        check_files(d, name, problems)
                        times.setdefault(("files", name), []).append(dt)
                        B.log(f"files round {r + 1}: {name}: {dt:.3f} s")
                    continue
                n = a.noop_n if test == "noop" else 600
                for cfg in order:
                    cpu0 = cluster_cpu(cs[cfg])
                    bid, dt = cs[cfg].submit(bs[(test, cfg)])
                    cpu1 = cluster_cpu(cs[cfg])
                    for part in PARTS:
                        times.setdefault((f"{test}-{part}", cfg), []).append(
                            (cpu1[part] - cpu0[part]) / n * 1e6)
                    cpu = sum(cpu1.values()) - sum(cpu0.values())
                    cpu = cpu / n * 1e6
                    problems += [f"{test} {cfg}: {p}" for p in
                                 cs[cfg].check_results(bid, n)]
                    v = noop_rate(cs[cfg], bid, n) if test == "noop" else dt
                    times.setdefault((test, cfg), []).append(v)
                    times.setdefault((test + "-cpu", cfg), []).append(cpu)
                    B.log(f"{test} round {r + 1}: {cfg}: {v:.3f}, "
                          f"{cpu:.1f} us of CPU a task")
    finally:
        for c in cs.values():
            c.stop()
    report(a, times, out)


def ratios(times, test, cfg, base):
    return B.median([x / y for x, y in zip(times[(test, cfg)],
                                           times[(test, base)])])


def rows(times, test, names, base, digits):
    """One row per name of NAMES: median, range and the median ratio to
    BASE (a value printed with DIGITS decimals, 0: as a count)."""
    f = (lambda x: B.fmt_int(x)) if digits == 0 else \
        (lambda x: B.fmt(x, digits))
    return [[n, f(B.median(times[(test, n)])),
             f"{f(min(times[(test, n)]))}-{f(max(times[(test, n)]))}",
             B.fmt(ratios(times, test, n, base), 3),
             B.fmt(B.median(times[(test, n)]) /
                   B.median(times[(test, base)]), 3)] for n in names]


def parts_table(times, test, digits):
    """The medians of each part's CPU a task, by config."""
    return B.table(["config"] + [f"{p} us" for p in PARTS],
                   [[cfg] + [B.fmt(B.median(times[(f"{test}-{p}", cfg)]),
                                   digits) for p in PARTS]
                    for cfg in CONFIGS]) + "\n"


def report(a, times, out):
    if "noop" in a.only:
        out.append(f"### {a.noop_n:,} no-op tasks, 1 node x 2 slots\n")
        out.append(B.table(["config", "median tasks/s", "(range)",
                            "tasks/s / off's", "of the medians"],
                           rows(times, "noop", CONFIGS, "off", 0)) + "\n")
        out.append(B.table(["config", "median us of CPU a task", "(range)",
                            "CPU / off's", "of the medians"],
                           rows(times, "noop-cpu", CONFIGS, "off", 2)) +
                   "\n")
        out.append(parts_table(times, "noop", 3))
    if "true" in a.only:
        out.append("### 600 x `true`, 1 node x 2 slots\n")
        out.append(B.table(["config", "median s", "(range)", "time / off's",
                            "of the medians"],
                           rows(times, "true", CONFIGS, "off", 3)) + "\n")
        out.append(B.table(["config", "median us of CPU a task", "(range)",
                            "CPU / off's", "of the medians"],
                           rows(times, "true-cpu", CONFIGS, "off", 1)) +
                   "\n")
        out.append(parts_table(times, "true", 1))
    if "files" in a.only:
        out.append(f"### {FILE_N} tasks x {FILE_BYTES:,} bytes of output, "
                   "1 node x 2 slots\n")
        out.append(B.table(["to", "median s", "(range)", "time / sh -c's",
                            "of the medians"],
                           rows(times, "files", ("own", "sh"), "sh", 3)) +
                   "\n")
        out.append("own: the task's \"stdout\" file; sh: `sh -c 'head ... "
                   "> FILE'`\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default=",".join(TESTS))
    ap.add_argument("--bin", default=os.path.join(B.REPO, "bin"))
    ap.add_argument("--off-bin", required=True)
    ap.add_argument("--noop-n", type=int, default=200000)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    a.only = [t for t in a.only.split(",") if t]
    B.install_signal_handlers()
    work = B.make_workdir("ftfarm-bench-res-")
    src_on, src_off = a.bin, a.off_bin
    a.bin = B.snapshot_bin(src_on, os.path.join(work, "on-bin"))
    a.off_bin = B.snapshot_bin(src_off, os.path.join(work, "off-bin"))
    out = [f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
           f"on: {B.bin_id(src_on, a.bin)}; off: "
           f"{B.bin_id(src_off, a.off_bin)}; load average "
           f"{os.getloadavg()[0]:.1f}\n"]
    problems = []
    try:
        run(a, work, out, problems)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    out.append(f"load average at the end {os.getloadavg()[0]:.1f}\n")
    if problems:
        out.append("**Problems:** " + "; ".join(problems[:20]) + "\n")
    print("\n".join(out))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
