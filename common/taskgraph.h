/*
 * taskgraph: the "after" lists of a batch's tasks, as a graph.
 *
 * Task I's "after": [J, K] says it runs once tasks J and K have
 * succeeded.  The lists are kept as one array per batch (CSR: task I's
 * are idx[off[I] .. off[I + 1] - 1]).  A batch is refused when a list
 * names a task it does not have, the task itself, or when the lists make
 * a cycle; each check is linear in the tasks and their lists, so a chain
 * or a fan-in of a million tasks is checked in a fraction of a second.
 */
#ifndef FT_TASKGRAPH_H
#define FT_TASKGRAPH_H

#include <stddef.h>
#include <stdint.h>

/* The "after" lists of N tasks (off has N + 1 entries). */
struct taskgraph {
	uint32_t n;
	uint32_t *off;
	uint32_t *idx;
};

/* Builds a taskgraph task by task, in order. */
struct taskgraph_builder {
	struct taskgraph g;
	size_t cap_off, cap_idx;
	uint32_t nidx;
};

void taskgraph_init(struct taskgraph_builder *b);
/* Task number b->g.n gets the N entries of AFTER (N may be 0). */
void taskgraph_add(struct taskgraph_builder *b, const uint32_t *after,
		   uint32_t n);
/* The graph built (the builder is emptied). */
void taskgraph_take(struct taskgraph_builder *b, struct taskgraph *g);
void taskgraph_free(struct taskgraph *g);

/* Is G sound: every entry names another task of G, and no cycle?  0, or
 * -1 with *TASK the task whose list is at fault and WHY (what is wrong:
 * "no task 12 in this batch of 10", "cycle: 3 -> 5 -> 3"). */
int taskgraph_check(const struct taskgraph *g, uint32_t *task, char *why,
		    size_t n);

#endif
