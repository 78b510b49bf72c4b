/*
 * worker: the life of one worker slot, as a state machine.
 *
 *        spawn            spawned           hello
 *   NEW -------> SPAWNING -------> STARTING -------> IDLE <-> BUSY <-> SLOW
 *    |  (a spawn in the loop, or static launch)  ^          |
 *    +-------------------------------------------+          | stop
 *                                                            v
 *   (starting or live) --fail--> DEAD --respawn--> ...   STOPPING --bye--> STOPPED
 *   (any but STOPPED) --retire--> INACTIVE --revive (its node is back)--> ...
 *
 * worker_set() is the only writer of a worker's state.  It refuses a
 * transition the table does not allow, logs the change, keeps the
 * counters (failures, respawns) and emits the change's event
 * (worker_up, worker_respawned, worker_dead, worker_spawn_failed,
 * worker_inactive).  Changes between IDLE, BUSY and SLOW follow the
 * scheduler's load and are quiet.  Nothing here talks MPI: a worker's
 * messages go through its link (link.h), the decisions about it are the
 * registry's and node health's.
 */
#ifndef FT_WORKER_H
#define FT_WORKER_H

#include <stdint.h>
#include <sys/types.h>

#include "events.h"

enum wstate {
	W_NEW = 0,			/* never started */
	W_SPAWNING,			/* its spawn runs on a spawner thread */
	W_STARTING,			/* its process is there, no hello yet */
	W_IDLE,
	W_BUSY,
	W_SLOW,
	W_STOPPING,			/* told to stop, no bye yet */
	W_STOPPED,			/* said bye */
	W_DEAD,				/* failed; may be respawned */
	W_INACTIVE,			/* given up on */
	W_NSTATES
};

struct worker {
	int id;				/* its slot: index in the registry */
	int node;			/* index in cfg.nodes */
	const char *node_name;
	enum wstate state;
	double since;			/* when it entered its state (monotonic) */
	pid_t pid;			/* its process, 0 while unknown */
	unsigned long long start;	/* the process's start time (with pid:
					 * which process, for good) */
	char host[64];			/* where it runs (the hello's, else the node's) */
	int respawns;			/* times started after the first */
	int failures;			/* failures since it last finished a task */
	int ever_up;			/* has said hello once */
	double hello_at;		/* its last hello (monotonic) */
	int killed;			/* its last death killed its process */
	int bye;			/* said bye */
	uint64_t tasks_done;
	/* Respawn (DEAD only): not before respawn_at, and only once the
	 * process being replaced (old_pid) is gone. */
	int respawn_due;
	double respawn_at;
	pid_t old_pid;
	unsigned spawn_gen;		/* which spawn is the current one */
	const char *doomed;		/* a failure found inside a tick, for after it */
	int held;			/* its node takes no tasks now */
	int ending;			/* its slot got SIGTERM (its job ends):
					 * it takes no more tasks */
	int absent;			/* not a slot of its (joined) node's
					 * incarnation: never started */
	double heard;			/* its last message (monotonic) */
	int reported_hung;		/* its agent killed it: no answer */
	int agent_died;			/* it died with its node agent */
	int with_agent;			/* ... and another slot carries the
					 * node's failure (node health) */
	/* Its last death, for node health's blame: the task it was running
	 * (0: none), whether its process was still there (a hang), whether
	 * a respawn of it did not come back (its spawn or hello failed or
	 * timed out), and whom node health charged with it. */
	uint64_t died_on;
	int died_hung;
	int died_starting;
	int spawn_hung;			/* its spawn did not return in time */
	int charged_task;
};

/* Fill W for slot ID on node NODE (named NODE_NAME): state NEW. */
void worker_init(struct worker *w, int id, int node, const char *node_name);
/* Move W to TO for REASON (may be NULL for the quiet changes), emitting
 * its event on EV.  0, or -1 (logged, W unchanged) when the table does
 * not allow the change. */
int worker_set(struct worker *w, enum wstate to, const char *reason,
	       struct events *ev);
/* May the table take W from FROM to TO? */
int worker_can(enum wstate from, enum wstate to);
const char *worker_state_name(enum wstate s);
/* Starting or running: it has (or will have) a process that talks to us. */
int worker_live(const struct worker *w);
/* Up: said hello and not yet told to stop (IDLE, BUSY or SLOW). */
int worker_up(const struct worker *w);

#endif
