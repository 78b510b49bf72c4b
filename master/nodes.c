/*
 * nodes: node health, the upper rungs of the re-initialisation ladder.
 *
 * A worker that keeps failing after its respawns hands its node over to
 * node health.  Without a way to power-cycle the node, the node is given
 * up on: it becomes inactive, its workers are retired and their tasks go
 * to the other nodes.
 */
#include <stdio.h>

#include "log.h"
#include "master.h"

const char *
nodes_state_name(enum nstate s)
{
	return s == N_UP ? "up" : s == N_INACTIVE ? "inactive" : "?";
}

void
nodes_init(struct master *m)
{
	int i;

	m->nodes = ft_calloc((size_t)m->cfg.nnodes, sizeof(*m->nodes));
	for (i = 0; i < m->cfg.nnodes; i++)
		m->nodes[i].state = N_UP;
}

/* Give up on node I for REASON. */
static void
node_inactive(struct master *m, int i, const char *reason)
{
	int k;

	m->nodes[i].state = N_INACTIVE;
	jsonl_event(&m->events, "node_inactive");
	jsonl_str(&m->events, "node", m->cfg.nodes[i].name);
	jsonl_str(&m->events, "reason", reason);
	jsonl_end(&m->events);
	log_warnx("node %s is inactive: %s", m->cfg.nodes[i].name, reason);
	for (k = 0; k < m->nworkers; k++)
		if (m->workers[k].node == i)
			registry_retire(m, &m->workers[k], "node inactive");
}

void
nodes_worker_failed(struct master *m, struct worker *w)
{
	struct node *node = &m->nodes[w->node];
	char why[128];

	node->failures++;
	if (node->state != N_UP) {
		registry_retire(m, w, "node inactive");
		return;
	}
	snprintf(why, sizeof(why), "worker %d failed %d times in a row",
		 w->slot, w->failures);
	node_inactive(m, w->node, why);
}
