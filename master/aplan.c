/* aplan: what the allocation queues should do now (see aplan.h). */
#include "aplan.h"
#include "config.h"

static uint64_t
slots_of(const struct aplan_queue *q)
{
	return (uint64_t)(q->slots > 0 ? q->slots : 1);
}

/* Slots that Q's allocations will bring once they run and join. */
static uint64_t
coming(const struct aplan_queue *q)
{
	return ((uint64_t)q->pending * (uint64_t)q->nodes +
		(uint64_t)q->starting_nodes) * slots_of(q);
}

/* May Q ask for one more allocation now? */
static int
has_room(const struct aplan_queue *q)
{
	return !q->paused && q->pending < q->backlog &&
	       (q->pending + q->running + 1) * q->nodes <= q->max_nodes;
}

/* Will an allocation of a queue long enough for T come anyway (pending,
 * or running with nodes yet to join)? */
static int
unmet_served(const struct aplan_queue *qs, int n, double t)
{
	int i;

	for (i = 0; i < n; i++)
		if ((qs[i].pending > 0 || qs[i].starting_nodes > 0) &&
		    ft_alloc_usable(qs[i].time_limit) >= t)
			return 1;
	return 0;
}

void
aplan_decide(const struct aplan_need *need, const struct aplan_queue *qs,
	     int n, int *submit, int *cancel)
{
	uint64_t ahead = need->idle;
	int i, asked = 0;

	for (i = 0; i < n; i++) {
		submit[i] = 0;
		cancel[i] = need->waiting == 0 ? qs[i].pending : 0;
		ahead += coming(&qs[i]);
	}
	if (need->waiting == 0)
		return;
	/* A time request no node up can meet: a long enough queue asks. */
	if (need->unmet > 0 && !unmet_served(qs, n, need->unmet))
		for (i = 0; i < n && !asked; i++)
			if (has_room(&qs[i]) &&
			    ft_alloc_usable(qs[i].time_limit) >= need->unmet)
				submit[i] = asked = 1;
	if (asked || need->waiting <= ahead)
		return;
	for (i = 0; i < n; i++)
		if (has_room(&qs[i])) {
			submit[i] = 1;
			return;
		}
}
