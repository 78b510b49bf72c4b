/* health: node health, the re-initialisation ladder (see health.h). */
#include "health.h"

#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "registry.h"

void
health_init(struct master *m)
{
	int i;

	m->nodes = ft_calloc((size_t)m->cfg.nnodes, sizeof(*m->nodes));
	for (i = 0; i < m->cfg.nnodes; i++)
		node_init(&m->nodes[i], i, m->cfg.nodes[i].name);
}

void
health_free(struct master *m)
{
	free(m->nodes);
	m->nodes = NULL;
}

/* Give up on node N for REASON: retire its workers. */
static void
give_up(struct master *m, struct node *n, const char *reason)
{
	int k;

	if (node_set(n, N_INACTIVE, reason, &m->events) == -1)
		return;
	for (k = 0; k < m->nworkers; k++)
		if (m->workers[k].node == n->id)
			registry_retire(m, &m->workers[k], "node inactive");
}

void
health_worker_failed(struct master *m, struct worker *w)
{
	struct node *n = &m->nodes[w->node];
	char why[128];

	if (m->static_world) {
		log_warnx("worker %d: static launch cannot respawn; its tasks "
			  "go to the other workers", w->id);
		return;
	}
	if (n->state != N_UP) {
		registry_retire(m, w, "node inactive");
		return;
	}
	if (w->failures <= m->cfg.respawn_limit) {
		registry_respawn_later(m, w);
		return;
	}
	snprintf(why, sizeof(why), "worker %d failed %d times in a row", w->id,
		 w->failures);
	give_up(m, n, why);
}

void
health_cron(struct master *m, double now)
{
	(void)now;
	if (sched_open(m->sched) == 0 || m->stopping || registry_any_left(m))
		return;
	log_warnx("no worker is left: failing %llu open tasks",
		  (unsigned long long)sched_open(m->sched));
	sched_fail_open(m->sched, "no live workers");
}
