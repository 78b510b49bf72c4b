/* sched_queue: the scheduler's queues (see sched_int.h). */
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"
#include "util.h"

static void
fifo_grow(struct fifo *f)
{
	size_t ncap = f->cap ? f->cap * 2 : 1024, i;
	uint64_t *q = ft_malloc(ncap * sizeof(*q));

	for (i = 0; i < f->len; i++)
		q[i] = f->q[(f->head + i) % f->cap];
	free(f->q);
	f->q = q;
	f->cap = ncap;
	f->head = 0;
}

static void
fifo_push(struct fifo *f, uint64_t tid, int front)
{
	if (f->len == f->cap)
		fifo_grow(f);
	if (front) {
		f->head = (f->head + f->cap - 1) % f->cap;
		f->q[f->head] = tid;
	} else {
		f->q[(f->head + f->len) % f->cap] = tid;
	}
	f->len++;
}

/* F's first task still queued (the stale ones before it dropped), or 0. */
uint64_t
sched_fifo_head(struct sched *s, struct fifo *f)
{
	while (f->len > 0) {
		uint64_t tid = f->q[f->head];

		if (sched_task_of(s, tid)->state == TASK_QUEUED)
			return tid;
		f->head = (f->head + 1) % f->cap;
		f->len--;
	}
	return 0;
}

void
sched_fifo_drop(struct fifo *f)
{
	f->head = (f->head + 1) % f->cap;
	f->len--;
}

/* The level of priority PRIO, made when missing. */
static struct level *
level_of(struct sched *s, int prio)
{
	int i, j;

	for (i = 0; i < s->nlv && s->lv[i].prio >= prio; i++)
		if (s->lv[i].prio == prio)
			return &s->lv[i];
	s->plain = NULL;	/* the levels move */
	s->lv = ft_realloc(s->lv, (size_t)(s->nlv + 1) * sizeof(*s->lv));
	for (j = s->nlv; j > i; j--)
		s->lv[j] = s->lv[j - 1];
	s->nlv++;
	memset(&s->lv[i], 0, sizeof(s->lv[i]));
	s->lv[i].prio = prio;
	s->lv[i].v = ft_calloc(1, sizeof(struct fifo));
	s->lv[i].n = 1;
	s->lv[i].v[0].cpus = 1;
	return &s->lv[i];
}

/* The time bucket of a request of TREQ seconds (see struct fifo). */
static int
time_bucket(uint32_t treq)
{
	int b = 1;

	if (treq == 0)
		return 0;
	while (b < 33 && (1ull << (b - 1)) < treq)
		b++;
	return b;
}

/* The FIFO of task TID's priority and shape, made when missing. */
struct fifo *
sched_fifo_of(struct sched *s, uint64_t tid)
{
	const struct sched_task *t = sched_task_of(s, tid);
	struct level *l = level_of(s, t->prio);
	int i, tb = time_bucket(sched_treq_of(s, tid));

	for (i = 0; i < l->n; i++)
		if (l->v[i].cpus == t->cpus_m1 + 1 && l->v[i].gpus == t->gpus &&
		    l->v[i].tb == tb)
			return &l->v[i];
	s->plain = NULL;	/* the FIFOs of L move */
	l->v = ft_realloc(l->v, (size_t)(l->n + 1) * sizeof(*l->v));
	memset(&l->v[l->n], 0, sizeof(*l->v));
	l->v[l->n].cpus = t->cpus_m1 + 1;
	l->v[l->n].gpus = t->gpus;
	l->v[l->n].tb = tb;
	return &l->v[l->n++];
}

/* Queue TID, whose record is T, at the back (or the FRONT) of its FIFO. */
void
sched_queue_push(struct sched *s, const struct sched_task *t, uint64_t tid,
	   int front)
{
	struct fifo *f;

	if (t->cpus_m1 == 0 && t->gpus == 0 && t->prio == 0 &&
	    sched_treq_of(s, tid) == 0) {
		if (s->plain == NULL)
			s->plain = sched_fifo_of(s, tid);
		f = s->plain;
	} else {
		f = sched_fifo_of(s, tid);
	}
	fifo_push(f, tid, front);
}

void
sched_queues_free(struct sched *s)
{
	int i, j;

	for (i = 0; i < s->nlv; i++) {
		for (j = 0; j < s->lv[i].n; j++)
			free(s->lv[i].v[j].q);
		free(s->lv[i].v);
	}
	free(s->lv);
	s->lv = NULL;
	s->nlv = 0;
	s->plain = NULL;
}

