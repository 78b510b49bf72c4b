/*
 * farm: the parts of the master wired together, and its periodic work.
 *
 * The scheduler's news goes to the registry (cancel, slow, hung) and to
 * the batches (a task failed for good); the registry's to the batches (a
 * result) and to node health (a failure); the batches' to the registry
 * (tasks queued) and to the control commands (a batch finished).  News
 * that would re-enter the scheduler from inside it is deferred (defer.h).
 */
#ifndef FT_FARM_H
#define FT_FARM_H

#include "master.h"

/* Make the scheduler, registry, node health and batches of M. */
void farm_init(struct master *m);
void farm_free(struct master *m);
/* The cron: deadlines, the ladder, respawns, pings, dispatch, stopping.
 * Returns 1 once the master may leave its loop. */
int farm_cron(struct master *m, double now);
/* Is there work under way: tasks not yet ended, workers starting? */
int farm_busy(struct master *m);
/* Rotate master.log and events.jsonl (SIGHUP, `ftfarm rotate`), or only
 * those past the config's log_max_bytes when ONLY_BIG. */
void farm_rotate(struct master *m, int only_big);
/* Write pending event and result lines. */
void farm_flush(struct master *m);

#endif
