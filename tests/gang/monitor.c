/*
 * gang-monitor: a master for one gang job, standing in for ftfarm-master
 * until gang tasks are integrated into it.  Run it as the single process
 * of an mpirun, as ftfarm starts its master:
 *
 *   mpirun.openmpi --oversubscribe --bind-to none --enable-recovery \
 *     --mca orte_abort_on_non_zero_status 0 ... -n 1 gang-monitor \
 *     --job JOB.json [--attempts N] [--heartbeat-ms MS] \
 *     [--ping-timeout-ms MS] [--attempt-timeout S] [--events FILE] \
 *     [--gang-bin PATH] [--plugin-dir DIR] [--kill RANK@STEP[:stop][/A]]...
 *
 * JOB.json is the job object ({"type": "ftallreduce", ...}).  The job is
 * checked by its plugin, then run as gang attempts (mon_gang.h) until one
 * succeeds or N (default 3) failed.  --kill sends SIGKILL (or SIGSTOP) to
 * world rank RANK when it announces step STEP ("recover": when it starts a
 * recovery) having seen notice E or a later one (default 0), in attempt A
 * (default 1); detection still goes through pings.
 *
 * --repeat runs the whole job R times (attempts are numbered across the
 * runs), for benchmarks.  Prints one JSON line per run: {"status": "ok"|"failed", "attempts": N,
 * "seconds": S, "reason": ..., "report": {...}, "deaths": D,
 * "notices": E, "spawn_seconds": [...]}.  Exit status 0 ok, 1 failed,
 * 2 bad usage or job.
 */
#include <getopt.h>
#include <jansson.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gang_load.h"
#include "mon_gang.h"
#include "treq.h"
#include "util.h"

struct args {
	const char *job_file;
	int attempts;
	double respawn_delay;		/* seconds between two attempts */
	int repeat;			/* runs of the job (benchmarks) */
	struct mon_opts o;
};

static void
usage(void)
{
	fprintf(stderr, "usage: gang-monitor --job JOB.json [--attempts N] "
		"[--heartbeat-ms MS] [--ping-timeout-ms MS] "
		"[--attempt-timeout S] [--events FILE] [--gang-bin PATH] "
		"[--plugin-dir DIR] [--kill RANK@STEP[+EPOCH][:stop][/ATTEMPT]]... "
		"[--respawn-delay-ms MS] [--repeat R]\n");
	exit(2);
}

/* Parse "RANK@STEP[+EPOCH][:stop][/ATTEMPT]" into K.  0 or -1. */
static int
parse_kill(const char *s, struct mon_kill *k)
{
	char step[32] = "", sig[16] = "kill";
	int n = 0;

	memset(k, 0, sizeof(*k));
	k->attempt = 1;
	if (sscanf(s, "%d@%31[^:/+]%n", &k->rank, step, &n) != 2)
		return -1;
	s += n;
	if (*s == '+' && sscanf(s, "+%d%n", &k->min_epoch, &n) == 1)
		s += n;
	if (*s == ':' && sscanf(s, ":%15[^/]%n", sig, &n) == 1)
		s += n;
	if (*s == '/' && sscanf(s, "/%d%n", &k->attempt, &n) == 1)
		s += n;
	if (*s != '\0' || k->rank < 0 || k->attempt < 1)
		return -1;
	k->step = strcmp(step, "recover") == 0 ? MON_STEP_RECOVER : atoi(step);
	if (strcmp(sig, "kill") == 0)
		k->sig = SIGKILL;
	else if (strcmp(sig, "stop") == 0)
		k->sig = SIGSTOP;
	else
		return -1;
	return 0;
}

/* The ftfarm-gang beside this program's bin/, by default. */
static char *
default_gang_bin(void)
{
	char *dir = ft_exe_dir();
	char *p = ft_asprintf("%s/../../../bin/ftfarm-gang", dir);

	free(dir);
	return p;
}

static void
parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "job", 1, NULL, 'j' }, { "attempts", 1, NULL, 'a' },
		{ "heartbeat-ms", 1, NULL, 'h' },
		{ "ping-timeout-ms", 1, NULL, 'p' },
		{ "attempt-timeout", 1, NULL, 't' },
		{ "events", 1, NULL, 'e' }, { "gang-bin", 1, NULL, 'g' },
		{ "plugin-dir", 1, NULL, 'd' }, { "kill", 1, NULL, 'k' },
		{ "respawn-delay-ms", 1, NULL, 'r' },
		{ "repeat", 1, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(a, 0, sizeof(*a));
	a->attempts = 3;
	a->repeat = 1;
	a->o.heartbeat = 0.2;
	a->o.ping_timeout = 1.5;
	a->o.attempt_timeout = 120;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'j': a->job_file = optarg; break;
		case 'a': a->attempts = atoi(optarg); break;
		case 'h': a->o.heartbeat = atof(optarg) / 1000; break;
		case 'p': a->o.ping_timeout = atof(optarg) / 1000; break;
		case 't': a->o.attempt_timeout = atof(optarg); break;
		case 'g': a->o.gang_bin = optarg; break;
		case 'd': a->o.plugin_dir = optarg; break;
		case 'r': a->respawn_delay = atof(optarg) / 1000; break;
		case 'n': a->repeat = atoi(optarg); break;
		case 'e':
			a->o.events = fopen(optarg, "a");
			if (a->o.events == NULL)
				usage();
			break;
		case 'k':
			a->o.kills = ft_realloc(a->o.kills, (a->o.nkills + 1) *
						sizeof(*a->o.kills));
			if (parse_kill(optarg, &a->o.kills[a->o.nkills++]))
				usage();
			break;
		default:
			usage();
		}
	}
	if (!a->job_file || optind != argc || a->attempts < 1 || a->repeat < 1 ||
	    !(a->o.heartbeat > 0) || !(a->o.ping_timeout > 0))
		usage();
	if (a->o.gang_bin == NULL)
		a->o.gang_bin = default_gang_bin();
	a->o.silence = 10 * a->o.heartbeat + 2 * a->o.ping_timeout;
	if (a->o.silence < 5)
		a->o.silence = 5;
}

/* Load and check the job; its text into *TEXT, its gang size into *N.
 * 0, or -1 after printing why. */
static int
load_job(const struct args *a, char **text, int *n)
{
	json_error_t je;
	json_t *job = json_load_file(a->job_file, JSON_REJECT_DUPLICATES, &je);
	const struct ft_gang_plugin *pl;
	char err[512], *dir;
	struct jerr e;
	void *h;
	int active, spares;

	if (job == NULL) {
		fprintf(stderr, "%s:%d:%d: %s\n", a->job_file, je.line,
			je.column, je.text);
		return -1;
	}
	if (a->o.plugin_dir) {
		dir = ft_strdup(a->o.plugin_dir);
	} else {
		char *bindir = ft_dirname(a->o.gang_bin);

		dir = ft_asprintf("%s/gangs", bindir);
		free(bindir);
	}
	pl = gang_load(dir, jget_str(job, "type", ""), &h, err, sizeof(err));
	free(dir);
	memset(&e, 0, sizeof(e));
	if (pl == NULL || pl->validate(job, "job", &e) == -1) {
		fprintf(stderr, "%s: %s%s%s\n", a->job_file, pl ? e.path : "",
			pl ? ": " : "", pl ? e.msg : err);
		json_decref(job);
		return -1;
	}
	pl->size(job, &active, &spares);
	*n = active + spares;
	*text = json_dumps(job, JSON_COMPACT);
	json_decref(job);
	return 0;
}

/* The final line. */
static void
print_result(const struct mon_outcome *last, int attempts, double seconds,
	     json_t *spawns)
{
	json_t *out = json_pack("{s:s,s:i,s:f,s:s,s:i,s:i,s:o}",
				"status", last->ok ? "ok" : "failed",
				"attempts", attempts, "seconds", seconds,
				"reason", last->reason, "deaths", last->deaths,
				"notices", last->notices, "spawn_seconds",
				spawns);

	json_object_set(out, "report", last->report ? last->report
						    : json_null());
	json_dumpf(out, stdout, JSON_COMPACT | JSON_SORT_KEYS);
	fputc('\n', stdout);
	fflush(stdout);
	json_decref(out);
}

/* Run the job until an attempt succeeds or A->attempts failed, numbering
 * attempts from *NEXT on.  Fills OUT; prints the final line. */
static void
run_job(struct args *a, struct treq_set *tq, const char *job, int n,
	int *next, struct mon_outcome *out)
{
	json_t *spawns = json_array();
	double t0 = ft_now();
	int tries;

	for (tries = 1; tries <= a->attempts; tries++) {
		int attempt = (*next)++;

		json_decref(out->report);
		memset(out, 0, sizeof(*out));
		mon_gang_run(&a->o, tq, job, n, attempt, out);
		json_array_append_new(spawns, json_real(out->spawn_seconds));
		mon_event(&a->o, "attempt_end", json_pack("{s:i,s:b,s:s,s:f}",
			  "attempt", attempt, "ok", out->ok, "reason",
			  out->reason, "seconds", out->seconds));
		if (out->ok)
			break;
		if (tries < a->attempts)
			ft_sleep(a->respawn_delay);
	}
	print_result(out, tries > a->attempts ? a->attempts : tries,
		     ft_now() - t0, spawns);
}

int
main(int argc, char **argv)
{
	struct args a;
	struct mon_outcome out;
	struct treq_set tq;
	char *job;
	int n, run, next = 1, provided, ok = 1;

	parse_args(argc, argv, &a);
	if (load_job(&a, &job, &n) == -1)
		return 2;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	if (provided < MPI_THREAD_MULTIPLE) {
		fprintf(stderr, "gang-monitor: MPI without MPI_THREAD_MULTIPLE\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	treq_set_init(&tq);
	memset(&out, 0, sizeof(out));
	for (run = 0; run < a.repeat; run++) {
		run_job(&a, &tq, job, n, &next, &out);
		ok &= out.ok;
	}
	if (mon_gang_spawn_hung()) {
		mon_event(&a.o, "strays_killed", json_pack("{s:o}", "pids",
			  mon_gang_kill_strays(&a.o)));
		_exit(ok ? 0 : 1);	/* MPI_Finalize would wait for it */
	}
	MPI_Finalize();
	treq_set_destroy(&tq);
	return ok ? 0 : 1;
}
