/*
 * mon_gang: the master's side of one gang attempt, as the standalone
 * monitor runs it (the master will do the same from its event loop).
 *
 * One attempt: spawn the gang (one MPI_Comm_spawn, bind_to none), take
 * every rank's HELLO, send START, then until the job ends:
 *   - ping every live rank each heartbeat; a pong missing at the deadline
 *     (dead or stopped alike) declares the rank dead: it is SIGKILLed, and
 *     every live rank gets the cumulative notice of the new epoch;
 *   - a failed RESULT ends the attempt; a RESULT stands until its rank
 *     announces new work (a recovery after a later death);
 *   - once every live rank reported ok with the same digest, one of them
 *     (the lowest world rank that has the output) is asked to WRITE; if it
 *     dies, the next one is;
 * then STOP everyone (finalize allowed only when nobody died), SIGKILL
 * whatever is still there after a grace time, free the intercommunicator.
 *
 * Kills scheduled by the caller (for tests) are sent when the rank
 * announces the step; the monitor still detects them only by their pings.
 */
#ifndef FT_MON_GANG_H
#define FT_MON_GANG_H

#include <jansson.h>
#include <stdio.h>

#include "treq.h"

#define MON_STEP_RECOVER (-2)	/* a kill when the rank starts recovering */

/* Send SIG to world rank RANK when it announces STEP having seen notice
 * MIN_EPOCH or a later one, in attempt ATTEMPT. */
struct mon_kill {
	int rank, step, min_epoch, sig, attempt;
	int done;
};

struct mon_opts {
	const char *gang_bin;		/* the ftfarm-gang program */
	const char *plugin_dir;		/* its argument, or NULL */
	double heartbeat;		/* seconds between pings */
	double ping_timeout;		/* seconds a pong may take */
	double silence;			/* given to the ranks in START */
	double attempt_timeout;		/* seconds for a whole attempt */
	FILE *events;			/* JSON lines, or NULL */
	struct mon_kill *kills;
	int nkills;
};

struct mon_outcome {
	int ok;
	char reason[512];		/* why not ok */
	double seconds;			/* of the attempt, spawn included */
	double spawn_seconds;
	int deaths, notices;
	int writer;			/* world rank that wrote, or -1 */
	json_t *report;			/* the ranks' figures merged (a key
				 * of a lower world rank wins), or NULL */
};

/* Run attempt ATTEMPT of the job JOB_TEXT on a gang of NRANKS processes,
 * its MPI requests in TQ (destroy TQ only after MPI_Finalize: abandoned
 * requests' buffers stay MPI's).  Fills OUT (OUT->report is a new
 * reference or NULL).  Returns 0, or -1 when the gang could not even be
 * spawned (OUT->reason says why). */
int mon_gang_run(const struct mon_opts *o, struct treq_set *tq,
		 const char *job_text, int nranks, int attempt,
		 struct mon_outcome *out);

/* Did a spawn hang (then leave without MPI_Finalize)? */
int mon_gang_spawn_hung(void);
/* SIGKILL the processes of hung spawns (children of our launcher running
 * the gang program that never said hello: they sit in MPI_Init and the
 * launcher would wait for them for ever), once no gang runs.  Returns
 * their pids (a new JSON array). */
json_t *mon_gang_kill_strays(const struct mon_opts *o);

/* Write the event NAME with the members of FIELDS (a new reference,
 * stolen) to O->events, with "ts". */
void mon_event(const struct mon_opts *o, const char *name, json_t *fields);

#endif
