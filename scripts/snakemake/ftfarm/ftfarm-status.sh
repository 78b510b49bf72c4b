#!/bin/sh
# ftfarm-status.sh BATCH_ID: Snakemake's --cluster-status for ftfarm.
#
# Prints the one word Snakemake asks for:
#   running   the batch waits or runs, or the cluster is down (stopped,
#             or between two allocations): its next start resumes it;
#   success   it finished and its task succeeded;
#   failed    its task failed, the batch was cancelled, or the cluster
#             does not know it (no such batch, or forgotten): it will never
#             finish there, and "failed" lets Snakemake clean the job's
#             outputs and retry it (--restart-times) or report it, where
#             a non-zero exit would stop the whole workflow.
# Exits 1 (Snakemake then stops, saying it could not get the status) only
# when `ftfarm batch` fails otherwise (it waits for a master that
# restarts): a state dir that cannot be read, a master that went away in
# the middle of its answer.
#
# A shell script, not Python: Snakemake runs it for every job at every
# round of checks, and a Python interpreter's start costs ten times
# `ftfarm batch` itself.  FTFARM_CONFIG names the cluster's config;
# FTFARM the ftfarm program (default: the one of this tree, installed or
# checked out, else ftfarm in PATH; the rule of ftfarm-submit.py).
set -u
case $0 in
*/*)	here=${0%/*} ;;
*)	here=. ;;
esac
me="ftfarm-status"
if [ $# -ne 1 ]; then
	echo "usage: $me BATCH_ID" >&2
	exit 2
fi
if [ -z "${FTFARM_CONFIG:-}" ]; then
	echo "$me: FTFARM_CONFIG is not set (export it: the cluster's" \
	     "config file)" >&2
	exit 1
fi
ftfarm=${FTFARM:-}
if [ -z "$ftfarm" ]; then
	ftfarm=ftfarm
	for f in "$here/../../../bin/ftfarm" "$here/../../../../bin/ftfarm"; do
		if [ -x "$f" ]; then
			ftfarm=$f
			break
		fi
	done
fi

answer=$("$ftfarm" batch -c "$FTFARM_CONFIG" "$1" --json 2>&1)
# ftfarm(1), EXIT STATUS: 3 no such batch, 4 forgotten, 5 no master
# answers (the cluster is down); never the messages' words.
case $? in
0)	;;
3|4)
	echo "$me: $answer: telling snakemake the job failed" >&2
	echo failed
	exit 0 ;;
5)
	# Stopped, or between two Slurm allocations: the next start of the
	# config resumes the batch, so it is still to run.
	echo "$me: $answer: the job waits for the cluster" >&2
	echo running
	exit 0 ;;
*)
	echo "$me: $answer" >&2
	exit 1 ;;
esac
# `ftfarm batch --json` prints the batch's row with each of its keys on a
# line of its own, two spaces in ("  \"state\": \"running\","); the
# quotes and newlines of a string are escaped, so only the row's keys
# match.  Read with the shell's own patterns: no process more.
nl='
'
# field KEY: the value of the row's KEY (a number or a word) into v.
field() {
	case $answer in
	*"$nl  \"$1\": "*)
		v=${answer#*"$nl  \"$1\": "}
		v=${v%%"$nl"*}
		v=${v%,}
		v=${v#\"}
		v=${v%\"} ;;
	*)	v= ;;
	esac
}
answer="$nl$answer"
field state; state=$v
field ok; ok=$v
field failed; failed=$v
field total; total=$v
case $state in
waiting|running)
	echo running ;;
finished)
	if [ "$failed" = 0 ] && [ -n "$ok" ] && [ "$ok" = "$total" ]; then
		echo success
	else
		echo failed
	fi ;;
cancelled)
	echo failed ;;
*)
	echo "$me: batch $1: no state in ftfarm's answer: $answer" >&2
	exit 1 ;;
esac
