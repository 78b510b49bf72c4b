/*
 * loop: the master's libev loop.
 *
 * MPI has no file descriptor to wait on, so the loop polls it: on every
 * iteration while messages flow (an idle watcher keeps the loop from
 * blocking), then, once nothing happened for a short while, from a timer
 * whose period doubles up to a ceiling so that an idle master leaves the
 * cores to the workers.  Anything that sends makes the loop hot again
 * (master_kick).  A cron timer runs the farm's periodic work and the
 * flushes; work deferred by any callback runs before the loop blocks.
 */
#ifndef FT_LOOP_H
#define FT_LOOP_H

#include "master.h"

/* Make M's loop (m->loop) and its watchers.  0, or -1. */
int loop_init(struct master *m);
/* Run until the farm says the master may leave (after a stop). */
void loop_run(struct master *m);

#endif
