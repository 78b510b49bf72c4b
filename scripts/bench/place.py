#!/usr/bin/python3
"""The scheduler's cost per task, alone (scripts/bench/place.c): one-slot
tasks against an older tree's scheduler, and with many multi-slot tasks
pending.

    /usr/bin/python3 scripts/bench/place.py --old TREE [--reps 7]
        [--tasks 200000] [--nodes 16] [--slots 4]

TREE is a checkout of the older tree (its master/sched.c is built, with
-DPLACE_ONE_SLOT_ONLY when it has no sched_add_need).  Three programs,
run in rotating order each round: old (one-slot tasks), new (one-slot
tasks), new --mix (of every 8 tasks 4 need 1 slot, 2 need 2, 1 a whole
node, 1 a GPU; all queued at once, so thousands of multi-slot tasks
wait).  Markdown on stdout: medians of ns per task and of the per-round
ratios.
"""
import argparse
import os
import re
import glob
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def build(tree, out, one_slot_only):
    cmd = ["cc", "-O2", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra",
           "-Werror", "-iquote", os.path.join(tree, "master"),
           "-iquote", os.path.join(tree, "common"),
           os.path.join(REPO, "scripts", "bench", "place.c"),
           *sorted(glob.glob(os.path.join(tree, "master", "sched*.c"))),
           os.path.join(tree, "common", "util.c"),
           "-o", out, "-ljansson", "-lm"]
    if one_slot_only:
        cmd.insert(1, "-DPLACE_ONE_SLOT_ONLY")
    subprocess.run(cmd, check=True)
    return out


def run(exe, args):
    out = subprocess.run([exe, *args], check=True, capture_output=True,
                         text=True).stdout
    return float(re.search(r"([0-9.]+) ns per task", out).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--tasks", type=int, default=200000)
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--slots", type=int, default=4)
    o = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ftfarm-place-")
    with open(os.path.join(o.old, "master", "sched.h")) as f:
        old_has_need = "sched_add_need" in f.read()
    old = build(o.old, os.path.join(work, "old"), not old_has_need)
    new = build(REPO, os.path.join(work, "new"), False)
    args = ["--tasks", str(o.tasks), "--nodes", str(o.nodes), "--slots",
            str(o.slots)]
    runs = [("old", old, args), ("new", new, args),
            ("new --mix", new, args + ["--mix"])]
    got = {name: [] for name, _, _ in runs}
    for r in range(o.reps):
        for name, exe, a in runs[r % 3:] + runs[:r % 3]:
            got[name].append(run(exe, a))
        print(f"round {r + 1}: " + ", ".join(
            f"{k} {v[-1]:.0f}" for k, v in got.items()), file=sys.stderr)
    ratio = [n / b for n, b in zip(got["new"], got["old"])]
    mix = [n / b for n, b in zip(got["new --mix"], got["new"])]
    print(f"| scheduler ({o.nodes} nodes x {o.slots} slots, {o.tasks} tasks) "
          "| ns per task, median (min-max) |")
    print("|---|---|")
    for k, v in got.items():
        print(f"| {k} | {statistics.median(v):.0f} ({min(v):.0f}-"
              f"{max(v):.0f}) |")
    print(f"\nnew / old, one-slot tasks: {statistics.median(ratio):.3f}; "
          f"mix / one-slot (new): {statistics.median(mix):.3f} "
          f"(medians of per-round ratios, {o.reps} rounds)")
    for f in os.listdir(work):
        os.unlink(os.path.join(work, f))
    os.rmdir(work)


if __name__ == "__main__":
    main()
