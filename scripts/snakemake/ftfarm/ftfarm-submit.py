#!/usr/bin/python3
"""ftfarm-submit.py JOBSCRIPT: Snakemake's --cluster command for ftfarm.

Submits the job script Snakemake wrote as a batch of one exec task to the
cluster FTFARM_CONFIG names, and prints the batch id (Snakemake's
external job id), as `ftfarm submit` prints it.  From the properties
Snakemake writes into the job script ("# properties = {...}"):

    threads              -> --cpus (slots of one node)
    resources gpus       -> --gpus
    resources runtime    -> --timeout and --time-request (runtime is in
                            minutes): the job starts only on a node
                            whose allocation has that much time left
    resources mem_mib    -> --mem (mebibytes; else mem_mb, taken as
                            mebibytes as Slurm's --mem takes it)
    log                  -> --stdout and --stderr: the job's output goes
                            to the rule's log file (a rule with two log
                            files: its output to the first, its errors
                            to the second), appended to what the rule
                            itself writes there; their directories are
                            made first

The batch is named JOBNAME@RUN (ftfarm_profile.batch_name).  A request no
node can meet is refused by ftfarm (exit 2, its message on stderr);
Snakemake then reports the job's submission failed.

The task runs the job script under GUARD: the master may start a copy of
a task that straggles on an idle slot (the first result wins), and two
copies of a Snakemake job would delete and rewrite the same outputs at
once.  GUARD holds a lock on a file of this submission while the job
runs and writes the job's exit status into it: a copy waits for the lock
and then ends with that status without running the job; a copy or a
reassigned attempt that finds no status (the first one's slot died)
runs the job.  The lock is the guard's own (the job does not inherit
it), so it goes when the guard's process group is killed.
"""
import json
import os
import re
import secrets
import sys

sys.dont_write_bytecode = True    # nothing written beside the profile
import ftfarm_profile as fp  # noqa: E402

ME = "ftfarm-submit"
PROPERTIES = re.compile(r"^# properties = (.*)$")
# sh -c GUARD ftfarm-job STATUS_FILE JOBSCRIPT
GUARD = """exec 9>>"$1" && flock 9 || exit 1
if read -r rc <"$1"; then exit "$rc"; fi
"$2" 9>&-
rc=$?
echo "$rc" >&9
exit "$rc"
"""


def properties(jobscript):
    """The job's properties that Snakemake wrote into JOBSCRIPT (a dict);
    exits 2 when there are none."""
    try:
        with open(jobscript, encoding="utf-8") as f:
            for line in f:
                m = PROPERTIES.match(line.rstrip("\n"))
                if m:
                    return json.loads(m.group(1))
    except OSError as e:
        fp.fail(ME, f"{jobscript}: {e.strerror}", 2)
    except ValueError as e:
        fp.fail(ME, f"{jobscript}: its properties line: {e}", 2)
    fp.fail(ME, f"{jobscript}: no '# properties = ' line (a job script of "
            "snakemake's --cluster?)", 2)


def whole(props, what, value, least):
    """VALUE (an int, or a string of digits) as an int >= LEAST; exits 2
    naming the job and WHAT otherwise."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and \
            value >= least:
        return value
    job = props.get("rule") or props.get("groupid") or "?"
    fp.fail(ME, f"job {props.get('jobid', '?')} of {job}: {what} = "
            f"{value!r}: not a whole number >= {least}", 2)


def submit_options(props):
    """The options of `ftfarm submit` that ask for what the job needs."""
    res = props.get("resources") or {}
    opts = ["--cpus", str(whole(props, "threads", props.get("threads", 1),
                                1))]
    gpus = whole(props, "resources gpus", res.get("gpus", 0), 0)
    if gpus:
        opts += ["--gpus", str(gpus)]
    if res.get("runtime") is not None:
        minutes = whole(props, "resources runtime", res["runtime"], 1)
        opts += ["--timeout", str(60 * minutes),
                 "--time-request", str(60 * minutes)]
    for key in ("mem_mib", "mem_mb"):
        if res.get(key) is not None:
            mib = whole(props, f"resources {key}", res[key], 1)
            opts += ["--mem", f"{mib}M"]
            break
    return opts + log_options(props)


def log_options(props):
    """--stdout and --stderr naming the job's log files, their
    directories made (the task opens them before the job runs)."""
    logs = props.get("log") or []
    if isinstance(logs, dict):
        logs = list(logs.values())
    logs = [os.path.abspath(p) for p in logs if isinstance(p, str) and p]
    if not logs:
        return []
    for p in logs[:2]:
        os.makedirs(os.path.dirname(p), exist_ok=True)
    out, err = logs[0], logs[1] if len(logs) > 1 else logs[0]
    return ["--stdout", out.replace("%", "%%"),
            "--stderr", err.replace("%", "%%")]


def main(argv):
    if len(argv) != 2:
        fp.fail(ME, "usage: ftfarm-submit.py JOBSCRIPT (snakemake's "
                "--cluster command)", 2)
    jobscript = os.path.abspath(argv[1])
    cfg = fp.config(ME)
    opts = submit_options(properties(jobscript))
    ftfarm = fp.program()
    status_file = f"{jobscript}.{secrets.token_hex(4)}.status"
    args = [ftfarm, "submit", "-c", cfg, "--name",
            fp.batch_name(jobscript), *opts, "--", "/bin/sh", "-c", GUARD,
            "ftfarm-job", status_file, jobscript]
    try:
        os.execvp(ftfarm, args)
    except OSError as e:
        fp.fail(ME, f"cannot run {ftfarm}: {e.strerror} (set FTFARM to the "
                "ftfarm program)")


if __name__ == "__main__":
    main(sys.argv)
