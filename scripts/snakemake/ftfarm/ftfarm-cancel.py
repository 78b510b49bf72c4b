#!/usr/bin/python3
"""ftfarm-cancel.py BATCH_ID...: Snakemake's --cluster-cancel for ftfarm.

Snakemake runs it once it is interrupted (Ctrl-C, SIGINT) with the ids of
the jobs it submitted, finished or not, and gives it 2 s.  It cancels
those batches that are still waiting or running, and every other batch
of the same runs (ftfarm_profile: the name says the run) still waiting or
running: one whose submission the interrupt cut short has an id that
Snakemake never read.  One `ftfarm status` and one `ftfarm cancel` for
them all.  Says how many it cancelled; exits 1 if ftfarm could not
cancel one (a batch that ended meanwhile is not an error).
"""
import json
import signal
import subprocess
import sys

sys.dont_write_bytecode = True    # nothing written beside the profile
import ftfarm_profile as fp  # noqa: E402

ME = "ftfarm-cancel"
LIVE = ("waiting", "running")


def batches(ftfarm, cfg):
    """The batches of `ftfarm status --json` (every one not ended, and
    the latest ended ones); exits 1 when the master does not answer."""
    r = subprocess.run([ftfarm, "status", "-c", cfg, "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fp.fail(ME, r.stderr.strip() or f"ftfarm status: exit {r.returncode}")
    return json.loads(r.stdout).get("batches", [])


def to_cancel(rows, ids):
    """The ids of the rows still waiting or running that are among IDS
    or belong to a run one of IDS belongs to, in order."""
    runs = {fp.run_of(b.get("name")) for b in rows if b.get("id") in ids}
    runs.discard(None)
    return sorted(b["id"] for b in rows if b.get("state") in LIVE and
                  (b["id"] in ids or fp.run_of(b.get("name")) in runs))


def main(argv):
    # A second Ctrl-C must not cut the cancelling short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ids = set()
    for a in argv[1:]:
        if not a.isdigit():
            fp.fail(ME, f"{a!r} is not a batch id", 2)
        ids.add(int(a))
    cfg = fp.config(ME)
    ftfarm = fp.program()
    live = to_cancel(batches(ftfarm, cfg), ids)
    if not live:
        return 0
    r = subprocess.run([ftfarm, "cancel", "-c", cfg, *map(str, live)],
                       capture_output=True, text=True)
    problems = [line for line in r.stderr.splitlines()
                if not line.endswith(" has finished")]
    for line in problems:
        print(f"{ME}: {line}", file=sys.stderr)
    done = sum(line.startswith("batch ") for line in r.stdout.splitlines())
    print(f"{ME}: {done} ftfarm batches of this run cancelled",
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
