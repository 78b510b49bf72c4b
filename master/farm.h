/*
 * farm: the parts of the master wired together, and its periodic work.
 *
 * The scheduler's news goes to the registry (cancel, slow, hung) and to
 * the batches (a task failed for good, with node health's word on why);
 * the registry's to the batches (a result) and to node health (a death
 * to blame, a failure, a result for blame); the batches' to the registry
 * (tasks queued) and to the control commands (a batch finished); node
 * health's to the control commands (a reboot ended); the store's
 * (synced, failed, recovered) to the batches and the events.  News
 * that would re-enter the scheduler from inside it is deferred (defer.h).
 */
#ifndef FT_FARM_H
#define FT_FARM_H

#include "master.h"

/* Make the scheduler, registry, node health and batches of M. */
void farm_init(struct master *m);
void farm_free(struct master *m);
struct agent_join;
/* The agent of node J->name joined over TCP on FD (taken over; the N
 * bytes at REST came after its JOIN): a new node of the farm, or the next
 * incarnation of one that joined before, its workers made or set aside
 * and started.  0, or -1 with ERR (it may not join: FD is the caller's
 * to answer and close). */
int farm_join(struct master *m, const struct agent_join *j, int fd,
	      const void *rest, size_t n, char *err, size_t len);
/* The cron: deadlines, the ladder, respawns, pings, dispatch, stopping.
 * Returns 1 once the master may leave its loop. */
int farm_cron(struct master *m, double now);
/* Is there work under way: tasks not yet ended, workers starting? */
int farm_busy(struct master *m);
/* Write what is pending: result lines, then events.  0, or -1 when
 * something stays pending (the store has the failure). */
int farm_flush(struct master *m);
/* Set up the store (after the loop) and route the events through it.
 * 0, or -1 with ERR. */
int farm_open_store(struct master *m, char *err, size_t n);

#endif
