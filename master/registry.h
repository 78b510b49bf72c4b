/*
 * registry: the master's workers.
 *
 * Each worker slot has at most one live process.  The registry starts
 * them (spawn.h), talks to them through their links (link.h: one standing
 * receive, a ping every heartbeat, timed sends), hands them the
 * scheduler's tasks, and declares them dead when a link fails, a hello
 * does not come, or the scheduler finds them hung.  A dead worker is
 * killed (if the master can), its link closed and its tasks given back to
 * the scheduler; who is to blame is node health's to say, asked through
 * ops.dying before the tasks go back, and what happens next (respawn,
 * retire) its decision, asked through ops.failed after the current
 * callback.  A worker whose node takes no tasks is held: it may start and
 * say hello, but gets nothing to run.
 * Every change of a worker's state goes through worker_set (worker.h).
 */
#ifndef FT_REGISTRY_H
#define FT_REGISTRY_H

#include <stdint.h>

#include "master.h"
#include "proto.h"

/* A worker's finished tasks vouch for its node (clear the node's failures
 * in a row) only once it has lived this many seconds past its hello: a
 * node that kills whatever starts there within a moment (power off) is
 * sick although each respawn finished a short task first. */
#define REGISTRY_VOUCH_AFTER 2.0

struct registry_ops {
	void *ctx;
	/* W's result R of task TID was the task's first: record it. */
	void (*result)(void *ctx, struct worker *w, uint64_t tid,
		       const struct proto_result *r);
	/* W has just become DEAD, its tasks not yet given back: W->died_on
	 * is the task it was running (0: none), W->died_hung whether its
	 * process was still there.  Blame; do nothing else.  Never while
	 * stopping. */
	void (*dying)(void *ctx, struct worker *w);
	/* W failed and is DEAD (or its spawn failed): decide what next.
	 * Called from the deferred queue, never while stopping. */
	void (*failed)(void *ctx, struct worker *w);
	/* The agent of joined node NODE leaves by itself for WHY. */
	void (*leaving)(void *ctx, int node, const char *why);
	/* Joined node NODE has left: its workers are retired already. */
	void (*left)(void *ctx, int node);
};

/* Set up the slots and links of M's config (workers NEW). */
void registry_init(struct master *m, const struct registry_ops *ops);
void registry_free(struct master *m);
/* Start every worker: spawn each (dynamic) or attach the world's ranks
 * (static).  0, or -1 with ERR when none could start. */
int registry_start(struct master *m, char *err, size_t n);
/* Node NODE (a new one, or one known) joined with SLOTS slots: its
 * workers made or set aside to match (those past SLOTS are absent), and
 * each not running started (they wait for its agent, agents_joined). */
void registry_join_node(struct master *m, int node, int slots);

/* Hand W (or every up worker) what the scheduler has for it. */
void registry_dispatch(struct master *m, struct worker *w);
/* Offer tasks to every idle worker if the scheduler let workers or
 * GPUs go, or reserved a node, since the last look (sched_wake). */
void registry_wake(struct master *m);
void registry_dispatch_all(struct master *m);
/* Go on with a dispatch pass that stopped after PASS_TASKS tasks, so that
 * the loop could read and write in between. */
void registry_pass_more(struct master *m);

/* W failed for REASON: declare it dead now.  Not from inside a scheduler
 * call (use registry_doom there). */
void registry_fail(struct master *m, struct worker *w, const char *reason);
/* The same, after the current callback. */
void registry_doom(struct master *m, struct worker *w, const char *reason);
/* Respawn W (DEAD) once its old process is gone, after a short delay. */
void registry_respawn_later(struct master *m, struct worker *w);
/* Take W out of service (its node is given up on, or rebooted): kill
 * it, its tasks back to the queue without counting against them. */
void registry_retire(struct master *m, struct worker *w, const char *reason);
/* Start W (INACTIVE or DEAD) again soon: its node is coming back. */
void registry_revive(struct master *m, struct worker *w);
/* Hold W (HELD: its node takes no tasks; it keeps what it runs) or let
 * it take tasks again. */
void registry_hold(struct master *m, struct worker *w, int held);

/* The scheduler's news for W: drop instance (TID, ATTEMPT); W became
 * slow on TID. */
void registry_cancel(struct master *m, struct worker *w, uint64_t tid,
		     uint32_t attempt);
void registry_slow(struct master *m, struct worker *w, uint64_t tid);

/* Periodic work: finished spawns, hello deadlines, respawns, pings,
 * states. */
void registry_cron(struct master *m, double now);
/* When the next heartbeat round pings the workers (monotonic). */
double registry_next_round(const struct master *m);
/* Is any worker being started, or waiting for a respawn? */
int registry_starting(const struct master *m);
/* Is an MPI_Comm_spawn under way on a spawner thread?  (Killing the
 * process it starts, as a power cycle does, can hang it.) */
int registry_spawn_busy(const struct master *m);
/* Does any worker run or wait for a respawn? */
int registry_any_left(const struct master *m);

/* Shutdown: tell every worker to stop; have they all; kill the rest. */
void registry_stop_all(struct master *m);
int registry_all_stopped(const struct master *m);
void registry_kill_leftovers(struct master *m);
/* Static launch only: has any rank of the world died?  (Open MPI's
 * MPI_Finalize would then wait for it.) */
int registry_lost_ranks(const struct master *m);

#endif
