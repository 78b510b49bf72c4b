/* sched_place: where queued tasks start (see sched_int.h). */
#include "sched_int.h"

static int
popcount64(uint64_t x)
{
	return __builtin_popcountll(x);
}

/* WORKER is free: up, in service, with nothing to run and nobody's. */
static int
is_free(const struct sworker *w)
{
	return w->up && !w->paused && w->n == 0 && w->holder < 0 && !w->wide;
}

/* Slots of NODE in service (free or busy) and, in *FREE, free ones. */
static int
node_slots(const struct sched *s, int node, int *free)
{
	const struct snode *n = &s->nodes[node];
	int i, up = 0;

	*free = 0;
	for (i = 0; i < n->nw; i++) {
		const struct sworker *w = &s->w[n->w[i]];

		up += w->up && !w->paused;
		*free += is_free(w);
	}
	return up;
}

/* Could NODE ever hold task TID shaped F (its slots in service, its
 * memory, the time it has left)? */
static int
node_could(const struct sched *s, int node, const struct fifo *f,
	   uint64_t tid)
{
	uint32_t mem = sched_mem_of(s, tid);
	int free;

	return node_slots(s, node, &free) >= f->cpus &&
	       s->nodes[node].ngpus >= f->gpus &&
	       (s->nodes[node].mem == 0 || s->nodes[node].mem >= mem) &&
	       sched_time_fits(s, node, sched_treq_of(s, tid));
}

/* Can task TID shaped F start on WORKER now? */
static int
fits(struct sched *s, int worker, const struct fifo *f, uint64_t tid)
{
	const struct sworker *w = &s->w[worker];
	const struct snode *n = &s->nodes[w->node];
	int free;

	if (!is_free(w) ||
	    n->ngpus - popcount64(n->gpus_busy) < f->gpus ||
	    !sched_time_fits(s, w->node, sched_treq_of(s, tid)))
		return 0;
	if (!sched_mem_fits(s, worker, sched_mem_of(s, tid))) {
		s->mem_waits = 1;
		return 0;
	}
	node_slots(s, w->node, &free);
	return free >= f->cpus;
}

/* Start wide task TID (shaped F) on WORKER: hold cpus - 1 free workers
 * of its node and the first free GPUs. */
static void
place_wide(struct sched *s, int worker, struct fifo *f, uint64_t tid,
	   double now, struct sched_pick *out)
{
	struct sworker *w = &s->w[worker];
	struct snode *n = &s->nodes[w->node];
	int i, need = f->cpus - 1, g;

	sched_start_instance(s, worker, tid, now, out, 0);
	for (i = 0; i < n->nw && need > 0; i++) {
		struct sworker *o = &s->w[n->w[i]];

		if (n->w[i] != worker && is_free(o)) {
			o->holder = worker;
			need--;
		}
	}
	for (g = 0; g < n->ngpus && popcount64(w->gpus) < f->gpus; g++)
		if (!(n->gpus_busy & (1ull << g)))
			w->gpus |= 1ull << g;
	n->gpus_busy |= w->gpus;
	w->wide = 1;
	out->cpus = f->cpus;
	out->gpus = w->gpus;
	if (n->resv == tid)
		n->resv = 0;
}

/* The node F's head keeps, or -1 when it keeps none (or no longer
 * may: the task moved on, or the node cannot hold it any more). */
static int
resv_node(struct sched *s, struct fifo *f, uint64_t head)
{
	int r = f->resv_node;

	if (f->resv != head || s->nodes[r].resv != head)
		return -1;
	if (!node_could(s, r, f, head)) {
		s->nodes[r].resv = 0;
		f->resv = 0;
		s->wake = 1;
		return -1;
	}
	return r;
}

/* Reserve for HEAD (shaped F) the node with the most free slots among
 * those that could hold it and keep nothing else.  The node, or -1. */
static int
reserve(struct sched *s, struct fifo *f, uint64_t head)
{
	int k, best = -1, bfree = -1, free;

	for (k = 0; k < s->nnodes; k++) {
		if (s->nodes[k].resv != 0 && s->nodes[k].resv != head &&
		    sched_task_of(s, s->nodes[k].resv)->state == TASK_QUEUED)
			continue;
		if (!node_could(s, k, f, head))
			continue;
		node_slots(s, k, &free);
		if (free > bfree) {
			best = k;
			bfree = free;
		}
	}
	if (best < 0)
		return -1;
	s->nodes[best].resv = head;
	f->resv = head;
	f->resv_node = best;
	s->wake = 1;		/* its idle workers may hold it now */
	return best;
}

/* Consider wide task HEAD (shaped F) for WORKER. */
static enum pick
pick_wide(struct sched *s, int worker, struct fifo *f, uint64_t head,
	  double now, struct sched_pick *out)
{
	int r = resv_node(s, f, head);

	if (fits(s, worker, f, head)) {
		if (r >= 0 && r != s->w[worker].node) {
			s->nodes[r].resv = 0;
			s->wake = 1;
		}
		sched_fifo_drop(f);
		place_wide(s, worker, f, head, now, out);
		return PICK_ONE;
	}
	if (r < 0)
		r = reserve(s, f, head);
	return r == s->w[worker].node ? PICK_HOLD : PICK_NONE;
}

/* One task for WORKER: of the highest priority that has one for it,
 * a wide task first (it starts here, or keeps a node, this one or
 * another), else the oldest one-slot task. */
enum pick
sched_place_pick(struct sched *s, int worker, double now, struct sched_pick *out)
{
	int i, j;

	for (i = 0; i < s->nlv; i++) {
		struct level *l = &s->lv[i];
		uint64_t head;

		for (j = 1; j < l->n; j++) {
			enum pick p;

			if ((head = sched_fifo_head(s, &l->v[j])) != 0 &&
			    (p = pick_wide(s, worker, &l->v[j], head, now,
					   out)) != PICK_NONE)
				return p;
		}
		if ((head = sched_fifo_head(s, &l->v[0])) != 0) {
			if (!sched_mem_fits(s, worker, sched_mem_of(s, head))) {
				s->mem_waits = 1;	/* it waits for memory */
				return PICK_NONE;
			}
			sched_fifo_drop(&l->v[0]);
			sched_start_instance(s, worker, head, now, out, 0);
			return PICK_ONE;
		}
	}
	return PICK_NONE;
}

/* WORKER's node is kept for a wide task: start it here if it fits.
 * 1: it started; 0: the node is not kept; -1: kept, it waits. */
int
sched_place_kept(struct sched *s, int worker, double now, struct sched_pick *out)
{
	struct snode *n = &s->nodes[s->w[worker].node];
	struct sched_task *t;
	struct fifo *f;

	if (n->resv == 0)
		return 0;
	t = sched_task_of(s, n->resv);
	f = sched_fifo_of(s, n->resv);
	if (t->state != TASK_QUEUED || sched_fifo_head(s, f) != n->resv ||
	    resv_node(s, f, n->resv) != s->w[worker].node) {
		n->resv = 0;
		return 0;
	}
	if (!fits(s, worker, f, n->resv))
		return -1;
	sched_fifo_drop(f);
	place_wide(s, worker, f, n->resv, now, out);
	return 1;
}


int
sched_wake(struct sched *s)
{
	int w = s->wake;

	s->wake = 0;
	return w;
}

int
sched_holder(const struct sched *s, int worker)
{
	return s->w[worker].holder;
}

/* Why the wide task HEAD (shaped F) waits. */
static void
why_waits(struct sched *s, struct fifo *f, uint64_t head,
	  struct sched_wait *out)
{
	const struct sched_task *t = sched_task_of(s, head);
	int k, could = 0;

	out->batch = t->batch;
	out->index = t->index;
	out->cpus = f->cpus;
	out->gpus = f->gpus;
	out->mem = sched_mem_of(s, head);
	out->treq = sched_treq_of(s, head);
	out->node = resv_node(s, f, head);
	for (k = 0; k < s->nnodes && !could; k++)
		could = node_could(s, k, f, head);
	out->why = out->node >= 0 ? SCHED_WAIT_RESERVED :
		   could ? SCHED_WAIT_BUSY : SCHED_WAIT_NO_NODE;
}

int
sched_waiting(struct sched *s, struct sched_wait *out, int max)
{
	int i, j, n = 0;

	for (i = 0; i < s->nlv; i++) {
		for (j = 1; j < s->lv[i].n && n < max; j++) {
			struct fifo *f = &s->lv[i].v[j];
			uint64_t head = sched_fifo_head(s, f);

			if (head != 0)
				why_waits(s, f, head, &out[n++]);
		}
	}
	return n;
}


uint32_t
sched_unmet(struct sched *s, double now)
{
	uint32_t most = 0;
	int i, j, k;

	s->now = now;
	for (i = 0; i < s->nlv; i++) {
		for (j = 1; j < s->lv[i].n; j++) {
			struct fifo *f = &s->lv[i].v[j];
			uint64_t head = f->tb ? sched_fifo_head(s, f) : 0;
			int could = 0;

			if (head == 0 || sched_treq_of(s, head) <= most)
				continue;
			for (k = 0; k < s->nnodes && !could; k++)
				could = node_could(s, k, f, head);
			if (!could)
				most = sched_treq_of(s, head);
		}
	}
	return most;
}
