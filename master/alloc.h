/*
 * alloc: automatic allocation.  The config's "allocations" are queues of
 * Slurm allocations the master asks for itself while work waits, each
 * running `ftfarm join` on its nodes, and gives back when idle.
 *
 * Each tick (a second) the master
 *   - follows the farm's allocations through Slurm's own squeue, by the
 *     job name it gives them (ftfarm.<hash of the state dir>.<queue>), so
 *     that a master that restarts finds them all, even one whose id it
 *     had not yet written down: pending, running, ended (an ended one
 *     whose agents never joined is a failure of its queue);
 *   - decides with aplan.h how many to ask for and how many pending ones
 *     to cancel, and does it: sbatch (one per queue at a time, one a
 *     second at most, longer after failures), scancel;
 *   - sends an allocation's node that has had nothing to do for its
 *     queue's idle_s away (ftfarm leave): once its nodes have left, the
 *     allocation ends by itself.
 * A queue whose submissions fail FAILS_TO_PAUSE times in a row, or whose
 * allocations end before their agents join, is paused with Slurm's own
 * message as its reason, and asks for nothing until resumed.  A dry run
 * (`sbatch --test-only`) checks each queue when the master starts and
 * when it is resumed.  The queues' state (paused, reason, submissions)
 * and the allocations' ids are kept in <state_dir>/allocations.json for
 * the next master; `ftfarm stop` cancels the farm's allocations.
 *
 * The allocation's script, <state_dir>/alloc/<queue>.sh, runs the
 * queue's start_command then `ftfarm join` on each node (srun, one task a
 * node); its output goes to <state_dir>/alloc/slurm-<id>.out.
 */
#ifndef FT_ALLOC_H
#define FT_ALLOC_H

#include <jansson.h>
#include <stddef.h>

#include "master.h"

#define FAILS_TO_PAUSE 3

/* Set up the config's queues (none: nothing to do): their scripts, the
 * state a master before left, a dry run each.  Call once the store and
 * the loop are up. */
void alloc_init(struct master *m);
void alloc_free(struct master *m);
/* Periodic work (follow, decide, submit, cancel, idle nodes away). */
void alloc_cron(struct master *m, double now);
/* The queues and their live allocations: {"queues": [...]}. */
json_t *alloc_json(struct master *m);
/* Pause or resume queue NAME (resume: after a dry run that passes).
 * 0, or -1 with ERR (no such queue). */
int alloc_set(struct master *m, const char *name, int paused, char *err,
	      size_t n);
/* Is NODE's agent one of an allocation of the farm's queues? */
int alloc_owns_node(struct master *m, int node);
/* The farm stops (`ftfarm stop`): cancel every allocation it has. */
void alloc_stop(struct master *m);

#endif
