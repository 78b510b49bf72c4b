/*
 * health: node health, the re-initialisation ladder (after FTCL).
 *
 * A failed worker is respawned on its node; one that fails again before
 * finishing a task (respawn_limit failures in a row) hands its node over:
 * without a way to power-cycle the node, the node is given up on (it
 * becomes INACTIVE), its workers are retired and their tasks go to the
 * other nodes.  When no worker is left to run anything, the open tasks
 * fail.  Node health sits above the registry: it hears of failures
 * through the registry's ops and acts through the registry's calls.
 */
#ifndef FT_HEALTH_H
#define FT_HEALTH_H

#include "master.h"

void health_init(struct master *m);
void health_free(struct master *m);
/* Worker W failed (it is DEAD): respawn it, or give up on its node. */
void health_worker_failed(struct master *m, struct worker *w);
/* Periodic work: fail what is open when no worker is left. */
void health_cron(struct master *m, double now);

#endif
