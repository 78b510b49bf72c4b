/*
 * aplan: how many Slurm allocations each queue should ask for now, and
 * how many of its pending ones are no longer needed (alloc.h acts on
 * it).  No I/O, no time of its own: the master's view in, a decision
 * out, so that it can be tested alone.
 *
 * Work that waits is measured in slots: the tasks queued and not handed
 * out.  What may start them is the slots idle now and the slots coming:
 * those of the allocations pending, and of those running whose nodes
 * have not all joined yet.  While the waiting work is more than that, a
 * queue that may asks for one more allocation, the first such queue in
 * the config's order: one that is active, has fewer than its backlog
 * pending, whose nodes (running, pending and this one) stay within its
 * max_nodes.  Work that no node now can take because its
 * time request is longer than any node's time left asks for an
 * allocation even when slots would be free, of the first queue long
 * enough for it (ft_alloc_usable, config.h), unless an allocation of such a queue
 * that has not joined yet will serve it.  When nothing waits, the
 * pending allocations are not needed: each is cancelled.
 */
#ifndef FT_APLAN_H
#define FT_APLAN_H

#include <stdint.h>

/* A queue as it stands. */
struct aplan_queue {
	int paused;
	int nodes;			/* per allocation */
	int max_nodes;
	int backlog;
	int slots;			/* of each node (0: unknown, taken as 1) */
	double time_limit;		/* seconds */
	int pending;			/* allocations pending */
	int running;			/* allocations running */
	int starting_nodes;		/* nodes of running ones not joined yet */
};

/* What waits. */
struct aplan_need {
	uint64_t waiting;		/* slots queued tasks need */
	uint64_t idle;			/* slots idle now that may take them */
	double unmet;			/* the longest time request that no node
					 * up now can meet, 0: none */
};

/* Decide for the N queues QS: SUBMIT[i] allocations to ask of queue i
 * now (0 or 1), CANCEL[i] of its pending ones to cancel. */
void aplan_decide(const struct aplan_need *need, const struct aplan_queue *qs,
		  int n, int *submit, int *cancel);

#endif
