/*
 * grun: one attempt of a gang task, run from the master's loop.
 *
 * The master's side of the gang protocol (worker/gang/README.md), cut
 * into steps that never block: grun_tick moves the attempt on and
 * returns at once.
 *
 *   spawn    one MPI_Comm_spawn of every rank (bind_to none) on a thread
 *            of its own; given up on after SPAWN_TIMEOUT (it can hang in
 *            the new ranks' MPI_Init fence)
 *   hello    every rank's HELLO (pid, host), then START to each
 *   run      pings each heartbeat; a pong missing at its deadline
 *            (killed and stopped ranks alike) declares the rank dead: it
 *            is SIGKILLed and every live rank gets the cumulative notice
 *            of the next epoch.  A failed RESULT fails the attempt; a
 *            RESULT stands until its rank announces new work
 *   writing  once every live rank reported ok with one digest, the
 *            lowest live rank with the output is asked to WRITE it (the
 *            next one if it dies)
 *   settle   no sooner than DEATH_SETTLE after the last death (sooner,
 *            the next spawn hung in about 1 run in 3)
 *   stop     STOP to each live rank (MPI_Finalize allowed only when
 *            nobody died); SIGKILL what is left after STOP_GRACE; free
 *            the intercommunicator
 *
 * Requests go through the master's treq set, so the loop's polls drive
 * the callbacks; an attempt that is over has retired all of its requests.
 */
#ifndef FT_GRUN_H
#define FT_GRUN_H

#include <jansson.h>

#include "treq.h"

struct grun;

/* What an attempt tells its owner, as it happens.  Any may be NULL. */
struct grun_ops {
	void *ctx;
	/* Every rank said hello and got START. */
	void (*started)(void *ctx, struct grun *g);
	/* RANK (process PID) was declared dead for REASON and killed. */
	void (*dead)(void *ctx, struct grun *g, int rank, int pid,
		     const char *reason);
	/* The notice of EPOCH, naming NDEAD ranks, went to the survivors. */
	void (*notice)(void *ctx, struct grun *g, int epoch, int ndead);
};

struct grun_params {
	const char *exe;		/* the ftfarm-gang program */
	const char *plugin_dir;		/* its argument (the gangs' dir) */
	double heartbeat;		/* seconds between pings */
	double ping_timeout;		/* seconds a pong may take */
	double silence;			/* ranks leave after this much silence */
	double timeout;			/* seconds for the whole run */
};

/* Start attempt ATTEMPT of job JOB (JSON text) on NRANKS processes, of
 * which the first ACTIVE are active ranks.  P is copied; the spawn
 * starts on a thread.  NULL when no thread can be started. */
struct grun *grun_start(const struct grun_params *p, const struct grun_ops *o,
			struct treq_set *tq, const char *job, int nranks,
			int active, int attempt);
/* Move the attempt on.  Returns 1 once it is over (nothing of it left
 * running, its processes gone or killed), else 0. */
int grun_tick(struct grun *g, double now);
/* Once over: did the job succeed (output written)?  Why not (REASON). */
int grun_ok(const struct grun *g);
const char *grun_reason(const struct grun *g);
/* The live ranks' figures merged (a key of a lower rank wins), plus
 * "deaths", "notices", "writer", "spawn_seconds" (a new reference). */
json_t *grun_figures(const struct grun *g);
int grun_deaths(const struct grun *g);
int grun_attempt(const struct grun *g);
/* The ranks as status --json shows them: {"rank", "pid", "host", "role",
 * "state", "step", "epoch"} each (a new array). */
json_t *grun_ranks(const struct grun *g);
/* Is a spawn still hanging somewhere?  Then MPI_Finalize would hang:
 * the master leaves without it. */
int grun_spawn_hung(void);
/* End the job now for REASON (cancelled): the attempt winds down as a
 * failed one does (settle, STOP, kill, free).  Only once the job has
 * started (every pid known): before, it does nothing; call it again. */
void grun_abort(struct grun *g, const char *reason);
/* SIGKILL every process of this attempt still there (the master is
 * leaving), without waiting. */
void grun_kill(struct grun *g);
/* SIGKILL every process running EXE that our launcher started (the
 * processes of hung spawns, which never said hello: the launcher would
 * wait for them for ever).  Only when leaving: killing them earlier made
 * the next spawns hang.  Returns how many. */
int grun_kill_strays(const char *exe);
void grun_free(struct grun *g);

#endif
