/* sched_inst: instances: each worker's ring of instances, what it is
 * charged of its node's memory, starting an instance (see sched_int.h). */
#include <math.h>
#include <stdlib.h>

#include "sched_int.h"
#include "util.h"

/* ---- each worker's ring of instances ---- */

static void
ring_push(struct sworker *w, const struct inflight *in)
{
	if (w->n == w->cap) {
		int ncap = w->cap ? w->cap * 2 : 8, i;
		struct inflight *r = ft_malloc((size_t)ncap * sizeof(*r));

		for (i = 0; i < w->n; i++)
			r[i] = *sched_ring_at(w, i);
		free(w->ring);
		w->ring = r;
		w->cap = ncap;
		w->head = 0;
	}
	*sched_ring_at(w, w->n) = *in;
	w->n++;
}

void
sched_ring_remove(struct sworker *w, int i)
{
	if (i == 0) {
		w->head = (w->head + 1) % w->cap;
	} else {
		for (; i < w->n - 1; i++)
			*sched_ring_at(w, i) = *sched_ring_at(w, i + 1);
	}
	w->n--;
}

int
sched_ring_find(struct sworker *w, uint64_t tid, uint32_t attempt)
{
	int i;

	for (i = 0; i < w->n; i++) {
		struct inflight *in = sched_ring_at(w, i);

		if (in->tid == tid && in->attempt == attempt)
			return i;
	}
	return -1;
}

/* ---- what a worker is charged of its node's memory ---- */

int
sched_mem_fits(const struct sched *s, int worker, uint32_t mem)
{
	const struct sworker *w = &s->w[worker];
	const struct snode *n = &s->nodes[w->node];

	return mem <= w->mem || n->mem == 0 ||
	       n->mem_used - w->mem + mem <= n->mem;
}

/* W takes an instance needing MEM MiB. */
static void
charge_add(struct sched *s, struct sworker *w, uint32_t mem)
{
	if (mem > w->mem) {
		s->nodes[w->node].mem_used += mem - w->mem;
		w->mem = mem;
		w->mem_n = 1;
	} else if (mem == w->mem && mem > 0) {
		w->mem_n++;
	}
}

/* W's charge, its instances having changed: the largest need left. */
void
sched_charge_recount(struct sched *s, struct sworker *w)
{
	uint32_t most = 0, n = 0;
	int i;

	for (i = 0; i < w->n; i++) {
		uint32_t m = sched_ring_at(w, i)->mem;

		if (m > most) {
			most = m;
			n = 1;
		} else if (m == most) {
			n++;
		}
	}
	s->nodes[w->node].mem_used -= w->mem - most;
	w->mem = most;
	w->mem_n = most ? n : 0;
}

/* W gave up an instance needing MEM MiB (its ring has lost it). */
void
sched_charge_drop(struct sched *s, struct sworker *w, uint32_t mem)
{
	if (mem == 0 || mem != w->mem || --w->mem_n > 0)
		return;
	sched_charge_recount(s, w);
	if (s->mem_waits) {	/* a head kept waiting may fit now */
		s->wake = 1;
		s->mem_waits = 0;
	}
}

/* ---- starting an instance ---- */

/* Start an instance of TID on WORKER and describe it in OUT. */
void
sched_start_instance(struct sched *s, int worker, uint64_t tid, double now,
		     struct sched_pick *out, int duplicate)
{
	struct sworker *w = &s->w[worker];
	struct sched_task *t = sched_task_of(s, tid);
	struct inflight in;

	if (t->state == TASK_QUEUED)
		s->nqueued--;
	t->state = TASK_RUNNING;
	t->ninst++;
	in.tid = tid;
	in.attempt = ++t->attempts;
	in.mem = sched_mem_of(s, tid);
	charge_add(s, w, in.mem);
	in.seq = ++s->seq;
	in.lead = w->n == 0;
	if (w->n == 0)
		w->heard = now;
	in.start = now;
	in.deadline = now + t->timeout + s->p.grace + w->n * w->ewma;
	ring_push(w, &in);
	s->straggle_at = fmin(s->straggle_at,
			      now + fmax(s->p.dup_min, 3 * s->mean_service));
	out->tid = tid;
	out->attempt = in.attempt;
	out->task = t;
	out->duplicate = duplicate;
	out->cpus = 1;
	out->gpus = 0;
}
