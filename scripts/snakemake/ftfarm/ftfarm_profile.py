"""What the profile's Python scripts share: the ftfarm program, the
cluster's config, and the names the profile gives its batches.

A batch is named after the job script Snakemake wrote and the run that
wrote it: .snakemake/tmp.u6c50boo/snakejob.align.3.sh gives
"snakejob.align.3@u6c50boo" (Snakemake makes a new tmp.* directory for
each run).  ftfarm-cancel.py cancels by run, so that a batch whose id
Snakemake never read (its submission cut short by the Ctrl-C) goes too.
"""
import os
import sys

RUN_SEP = "@"


def fail(me, message, status=1):
    """Say MESSAGE on stderr as ME and exit with STATUS."""
    print(f"{me}: {message}", file=sys.stderr)
    sys.exit(status)


def program():
    """The ftfarm program: $FTFARM; else the one of the tree this profile
    is part of (a checkout: scripts/snakemake/ftfarm beside bin/; an
    install: PREFIX/share/ftfarm/snakemake/ftfarm beside PREFIX/bin/);
    else ftfarm in PATH.  ftfarm-status.sh follows the same rule."""
    if os.environ.get("FTFARM"):
        return os.environ["FTFARM"]
    here = os.path.dirname(os.path.abspath(__file__))
    for up in ("../../..", "../../../.."):
        f = os.path.join(here, up, "bin", "ftfarm")
        if os.access(f, os.X_OK):
            return os.path.normpath(f)
    return "ftfarm"


def config(me):
    """The cluster's config file, from FTFARM_CONFIG (exit 1 without)."""
    cfg = os.environ.get("FTFARM_CONFIG")
    if not cfg:
        fail(me, "FTFARM_CONFIG is not set (export it: the cluster's "
             "config file)")
    return cfg


def batch_name(jobscript):
    """The batch name of the job script at path JOBSCRIPT: its file name
    without .sh, RUN_SEP, its directory's name without tmp."""
    path = os.path.abspath(jobscript)
    job = os.path.basename(path)
    if job.endswith(".sh"):
        job = job[:-3]
    run = os.path.basename(os.path.dirname(path))
    if run.startswith("tmp."):
        run = run[4:]
    return f"{job}{RUN_SEP}{run}"


def run_of(name):
    """The run a batch named NAME belongs to (the part after the last
    RUN_SEP), or None for a name this profile did not give."""
    if not isinstance(name, str) or RUN_SEP not in name:
        return None
    return name.rsplit(RUN_SEP, 1)[1] or None
