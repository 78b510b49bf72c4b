#!/usr/bin/python3
"""Two builds of the wordcount plugin side by side, task by task, in one
process: the map, reduce or merge tasks of a job, without the cluster.

    /usr/bin/python3 scripts/bench/wc_phase.py --old DIR [--new DIR]
        [--phase map] [--rounds 10] [--copies 1] [--mb 300]
        [--corpus /tmp/ftfarm-wc-corpus]

DIR is a bin/ directory as `make` builds it (its tasks/wordcount.so is
used).  scripts/bench/wc_phase.c (built here with cc) plans a job over the
corpus (wordcount.py's, built if missing), runs the phases before the one
measured with the old build, then each task of that phase --rounds times
with each build, the order alternating from task to task.  --copies K runs
K such processes at once, each on its own job directory, as K workers of a
cluster load K CPUs.  A cluster's word-count time drifts with the machine
by half within minutes; a task and its twin run a few milliseconds apart
compare fairly.  Reported: the medians of both builds' task times and the
median of the ratios new/old of each task's pair (< 1: new is faster),
with its quartiles.  Markdown on stdout.
"""
import argparse
import os
import shutil
import subprocess
import sys

import benchlib as B
import wordcount

PHASES = {"map": 0, "reduce": 1, "merge": 2}


def build(work):
    exe = os.path.join(work, "wc_phase")
    subprocess.run(["cc", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror",
                    "-iquote", os.path.join(B.REPO, "common"),
                    os.path.join(B.REPO, "scripts", "bench", "wc_phase.c"),
                    "-o", exe, "-ljansson", "-ldl"], check=True)
    return exe


def plugin(bindir, work, name):
    dst = os.path.join(work, name + ".so")
    shutil.copy(os.path.join(bindir, "tasks", "wordcount.so"), dst)
    return dst


def quartiles(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 4], B.median(xs), xs[(3 * n) // 4]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", default=os.path.join(B.REPO, "bin"))
    ap.add_argument("--phase", choices=sorted(PHASES), default="map")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--copies", type=int, default=1)
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--corpus", default="/tmp/ftfarm-wc-corpus")
    a = ap.parse_args()
    B.install_signal_handlers()
    wordcount.corpus(a.corpus, a.mb)
    work = B.make_workdir("ftfarm-wcphase-")
    try:
        exe = build(work)
        old, new = plugin(a.old, work, "old"), plugin(a.new, work, "new")
        B.log(f"{a.phase} tasks, {a.rounds} rounds, {a.copies} at once")
        procs = []
        for c in range(a.copies):
            d = os.path.join(work, f"job{c}")
            os.mkdir(d)
            procs.append(subprocess.Popen(
                [exe, old, new, a.corpus, d, str(PHASES[a.phase]),
                 str(a.rounds)], stdout=subprocess.PIPE))
        times = {"old": [], "new": []}
        ratios = []
        for p in procs:
            out, _ = p.communicate()
            if p.returncode != 0:
                sys.exit(f"wc_phase: exit {p.returncode}")
            rows = [l.split() for l in out.decode().splitlines()]
            for x, y in zip(rows[0::2], rows[1::2]):
                pair = {x[0]: float(x[2]), y[0]: float(y[2])}
                times["old"].append(pair["old"])
                times["new"].append(pair["new"])
                ratios.append(pair["new"] / pair["old"])
        q1, med, q3 = quartiles(ratios)
        print(f"{B.machine_line(B.machine_info())}\n")
        print(f"Command: `/usr/bin/python3 scripts/bench/wc_phase.py "
              f"--old {a.old} --new {a.new} --phase {a.phase} --rounds "
              f"{a.rounds} --copies {a.copies}`\n")
        print(B.table(["phase", "copies", "pairs", "old median ms",
                       "new median ms", "new/old (median of pairs)",
                       "quartiles"],
                      [[a.phase, a.copies, len(ratios),
                        B.fmt(B.median(times["old"]) * 1e3, 1),
                        B.fmt(B.median(times["new"]) * 1e3, 1),
                        B.fmt(med), f"{B.fmt(q1)}-{B.fmt(q3)}"]]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
