/*
 * parked: task results held back for a moment (no MPI, no I/O).
 *
 * A task killed by signal 9 whose worker dies right after was killed with
 * its worker (power loss, the kernel's OOM killer, a node going down): that
 * is the node's doing, not the task's.  Its report is held for a grace; if
 * the worker dies meanwhile it is dropped (the task is lost, and runs
 * again), else it is taken as the task's own outcome.
 */
#ifndef FT_PARKED_H
#define FT_PARKED_H

#include <stddef.h>

#include "proto.h"

struct parked;

/* One held result: worker slot, its spawn generation, and the result
 * (its strings owned by the set). */
struct parked_result {
	int worker;
	unsigned gen;
	double until;			/* monotonic: taken as final then */
	struct proto_result r;
};

/* Is R a report of the task whose process signal 9 killed (its
 * "signal" field), not for going past its memory limit (a reason that
 * starts "memory:")? */
int parked_is_kill(const struct proto_result *r);
struct parked *parked_new(void);
void parked_free(struct parked *p);
/* Hold R (copied) of WORKER in generation GEN until UNTIL. */
void parked_add(struct parked *p, int worker, unsigned gen, double until,
		const struct proto_result *r);
/* The number of held results. */
size_t parked_count(const struct parked *p);
/* The I-th held result. */
const struct parked_result *parked_at(const struct parked *p, size_t i);
/* Forget the I-th held result (the last one moves into its place). */
void parked_drop(struct parked *p, size_t i);

#endif
