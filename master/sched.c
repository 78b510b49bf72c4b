/* sched: the master's task scheduler. */
#include "sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* One instance a worker holds, in dispatch order. */
struct inflight {
	uint64_t tid;
	uint64_t seq;
	uint32_t attempt;
	double start;
	double deadline;
};

struct sworker {
	int up;
	int paused;
	struct inflight *ring;		/* circular, oldest at head */
	int cap, head, n;
	int window;
	double ewma;			/* seconds per task, 0 = not measured */
	double last;			/* seconds of its last finished task */
	int slow;
	uint64_t slow_seq;
	double slow_since;
};

/* Tasks live in chunks of CHUNK; a chunk all of whose tasks have ended is
 * freed by sched_reclaim, so that memory follows the work in flight, not
 * the history. */
#define CHUNK_SHIFT 12
#define CHUNK (1u << CHUNK_SHIFT)

struct chunk {
	uint32_t open;			/* its tasks not yet ended */
	struct sched_task t[CHUNK];
};

struct sched {
	struct sched_params p;
	struct sched_ops ops;
	struct chunk **chunks;		/* task ID i is chunks[(i-1) / CHUNK] */
	size_t nchunks, ccap;
	size_t *done;			/* chunks whose tasks have all ended */
	size_t ndone, dcap;
	uint64_t ntasks;
	uint64_t *queue;		/* circular deque of task IDs */
	size_t qcap, qhead, qlen;
	size_t nqueued;			/* tasks in TASK_QUEUED */
	uint64_t nopen;			/* tasks neither done nor failed */
	struct sworker *w;
	int nw;
	uint64_t seq;			/* last dispatch sequence number */
	uint64_t newest_done;		/* highest sequence number completed */
	double mean_service;		/* over all workers */
};

#define REFILL_WIDE 16		/* windows this wide are refilled by halves */

void
sched_params_default(struct sched_params *p)
{
	p->max_attempts = 3;
	p->slow_timeout = 60;
	p->grace = 2;
	p->window_target = 0.002;
	p->window_max = 256;
	p->prefetch_below = 0.1;
	p->dup_min = 0.05;
}

struct sched *
sched_new(int nworkers, const struct sched_params *p,
	  const struct sched_ops *ops)
{
	struct sched *s = ft_calloc(1, sizeof(*s));
	int i;

	s->p = *p;
	if (ops)
		s->ops = *ops;
	s->nw = nworkers;
	s->w = ft_calloc((size_t)nworkers, sizeof(*s->w));
	for (i = 0; i < nworkers; i++)
		s->w[i].window = 1;
	return s;
}

void
sched_free(struct sched *s)
{
	size_t i;
	int k;

	if (s == NULL)
		return;
	for (i = 0; i < s->nchunks; i++)
		free(s->chunks[i]);
	for (k = 0; k < s->nw; k++)
		free(s->w[k].ring);
	free(s->chunks);
	free(s->done);
	free(s->queue);
	free(s->w);
	free(s);
}

/* Task TID, which must be live (not reclaimed). */
static struct sched_task *
task_of(const struct sched *s, uint64_t tid)
{
	return &s->chunks[(tid - 1) >> CHUNK_SHIFT]->t[(tid - 1) & (CHUNK - 1)];
}

/* ---- the queue: a deque of task IDs, stale entries skipped on pop ---- */

static void
queue_grow(struct sched *s)
{
	size_t ncap = s->qcap ? s->qcap * 2 : 1024, i;
	uint64_t *q = ft_malloc(ncap * sizeof(*q));

	for (i = 0; i < s->qlen; i++)
		q[i] = s->queue[(s->qhead + i) % s->qcap];
	free(s->queue);
	s->queue = q;
	s->qcap = ncap;
	s->qhead = 0;
}

static void
queue_push_back(struct sched *s, uint64_t tid)
{
	if (s->qlen == s->qcap)
		queue_grow(s);
	s->queue[(s->qhead + s->qlen) % s->qcap] = tid;
	s->qlen++;
}

static void
queue_push_front(struct sched *s, uint64_t tid)
{
	if (s->qlen == s->qcap)
		queue_grow(s);
	s->qhead = (s->qhead + s->qcap - 1) % s->qcap;
	s->queue[s->qhead] = tid;
	s->qlen++;
}

/* The next queued task, or 0. */
static uint64_t
queue_pop(struct sched *s)
{
	while (s->qlen > 0) {
		uint64_t tid = s->queue[s->qhead];

		s->qhead = (s->qhead + 1) % s->qcap;
		s->qlen--;
		if (task_of(s, tid)->state == TASK_QUEUED)
			return tid;
	}
	return 0;
}

/* ---- each worker's ring of instances ---- */

static struct inflight *
ring_at(struct sworker *w, int i)
{
	return &w->ring[(w->head + i) % w->cap];
}

static void
ring_push(struct sworker *w, const struct inflight *in)
{
	if (w->n == w->cap) {
		int ncap = w->cap ? w->cap * 2 : 8, i;
		struct inflight *r = ft_malloc((size_t)ncap * sizeof(*r));

		for (i = 0; i < w->n; i++)
			r[i] = *ring_at(w, i);
		free(w->ring);
		w->ring = r;
		w->cap = ncap;
		w->head = 0;
	}
	*ring_at(w, w->n) = *in;
	w->n++;
}

static void
ring_remove(struct sworker *w, int i)
{
	if (i == 0) {
		w->head = (w->head + 1) % w->cap;
	} else {
		for (; i < w->n - 1; i++)
			*ring_at(w, i) = *ring_at(w, i + 1);
	}
	w->n--;
}

static int
ring_find(struct sworker *w, uint64_t tid, uint32_t attempt)
{
	int i;

	for (i = 0; i < w->n; i++) {
		struct inflight *in = ring_at(w, i);

		if (in->tid == tid && in->attempt == attempt)
			return i;
	}
	return -1;
}

/* ---- tasks ---- */

uint64_t
sched_add(struct sched *s, uint32_t batch, uint32_t index, const char *spec,
	  uint32_t len, double timeout)
{
	size_t c = (size_t)(s->ntasks >> CHUNK_SHIFT);
	struct sched_task *t;

	if (c == s->nchunks) {
		if (s->nchunks == s->ccap) {
			s->ccap = s->ccap ? s->ccap * 2 : 16;
			s->chunks = ft_realloc(s->chunks,
					       s->ccap * sizeof(*s->chunks));
		}
		s->chunks[s->nchunks++] = ft_malloc(sizeof(struct chunk));
		s->chunks[c]->open = 0;
	}
	s->chunks[c]->open++;
	t = &s->chunks[c]->t[s->ntasks & (CHUNK - 1)];
	s->ntasks++;
	memset(t, 0, sizeof(*t));
	t->spec = spec;
	t->spec_len = len;
	t->batch = batch;
	t->index = index;
	t->timeout = (float)timeout;
	t->state = TASK_QUEUED;
	s->nqueued++;
	s->nopen++;
	queue_push_back(s, s->ntasks);
	return s->ntasks;
}

void
sched_set_kind(struct sched *s, uint64_t tid, uint8_t kind)
{
	if (tid > 0 && tid <= s->ntasks &&
	    s->chunks[(tid - 1) >> CHUNK_SHIFT] != NULL)
		task_of(s, tid)->kind = kind;
}

const struct sched_task *
sched_task(const struct sched *s, uint64_t tid)
{
	size_t c;

	if (tid == 0 || tid > s->ntasks)
		return NULL;
	c = (size_t)((tid - 1) >> CHUNK_SHIFT);
	if (s->chunks[c] == NULL)
		return NULL;
	return task_of(s, tid);
}

/* A task of chunk C ended: when all of a full chunk's have, it may go. */
static void
chunk_ended(struct sched *s, size_t c)
{
	if (--s->chunks[c]->open > 0 ||
	    ((uint64_t)(c + 1) << CHUNK_SHIFT) > s->ntasks)
		return;
	if (s->ndone == s->dcap) {
		s->dcap = s->dcap ? s->dcap * 2 : 16;
		s->done = ft_realloc(s->done, s->dcap * sizeof(*s->done));
	}
	s->done[s->ndone++] = c;
}

/* TID ended (done or failed): it needs its spec no more. */
static void
task_end(struct sched *s, uint64_t tid, enum task_state state)
{
	struct sched_task *t = task_of(s, tid);

	if (t->state == TASK_QUEUED)
		s->nqueued--;
	t->state = (uint8_t)state;
	t->spec = NULL;
	s->nopen--;
	chunk_ended(s, (size_t)((tid - 1) >> CHUNK_SHIFT));
}

size_t
sched_reclaim(struct sched *s)
{
	size_t i, freed = 0;

	for (i = 0; i < s->ndone; i++) {
		size_t c = s->done[i];

		/* A chunk may have been filled up again since. */
		if (s->chunks[c] && s->chunks[c]->open == 0 &&
		    ((uint64_t)(c + 1) << CHUNK_SHIFT) <= s->ntasks) {
			free(s->chunks[c]);
			s->chunks[c] = NULL;
			freed++;
		}
	}
	s->ndone = 0;
	return freed;
}

/* Instance (TID, ATTEMPT) was lost for REASON.  STARTED: it may have
 * been running (it counts against max_attempts); an instance still
 * waiting in a worker's queue does not. */
static void
instance_lost(struct sched *s, int worker, uint64_t tid, uint32_t attempt,
	      const char *reason, int started)
{
	struct sched_task *t = task_of(s, tid);
	char why[160];

	t->ninst--;
	if (t->state != TASK_RUNNING)
		return;
	if (started)
		t->failures++;
	if (t->ninst > 0)
		return;		/* another instance may still finish it */
	if (t->failures >= s->p.max_attempts) {
		snprintf(why, sizeof(why), "lost %d times, last: %s",
			 t->failures, reason);
		task_end(s, tid, TASK_FAILED);
		if (s->ops.failed)
			s->ops.failed(s->ops.ctx, tid, why);
		return;
	}
	t->state = TASK_QUEUED;
	s->nqueued++;
	queue_push_front(s, tid);
	if (s->ops.reassigned)
		s->ops.reassigned(s->ops.ctx, tid, attempt, worker, reason);
}

/* ---- workers ---- */

void
sched_worker_up(struct sched *s, int worker)
{
	struct sworker *w = &s->w[worker];

	w->up = 1;
	w->paused = 0;
	w->slow = 0;
	w->window = 1;
	w->ewma = 0;
	w->last = 0;
}

void
sched_worker_pause(struct sched *s, int worker)
{
	s->w[worker].paused = 1;
}

void
sched_worker_resume(struct sched *s, int worker)
{
	s->w[worker].paused = 0;
}

void
sched_worker_release(struct sched *s, int worker, const char *reason,
		     double now)
{
	struct sworker *w = &s->w[worker];

	(void)now;
	w->up = 0;
	w->slow = 0;
	while (w->n > 0) {
		struct inflight in = *ring_at(w, w->n - 1);

		w->n--;
		instance_lost(s, worker, in.tid, in.attempt, reason, 0);
	}
}

void
sched_worker_down(struct sched *s, int worker, const char *reason, double now)
{
	struct sworker *w = &s->w[worker];

	(void)now;
	w->up = 0;
	w->slow = 0;
	/* Newest first: each goes to the front, so the oldest ends up first.
	 * Workers run their instances in order: only the oldest can have
	 * started. */
	while (w->n > 0) {
		struct inflight in = *ring_at(w, w->n - 1);

		w->n--;
		instance_lost(s, worker, in.tid, in.attempt, reason, w->n == 0);
	}
}

/* Start an instance of TID on WORKER and describe it in OUT. */
static void
start_instance(struct sched *s, int worker, uint64_t tid, double now,
	       struct sched_pick *out, int duplicate)
{
	struct sworker *w = &s->w[worker];
	struct sched_task *t = task_of(s, tid);
	struct inflight in;

	if (t->state == TASK_QUEUED)
		s->nqueued--;
	t->state = TASK_RUNNING;
	t->ninst++;
	in.tid = tid;
	in.attempt = ++t->attempts;
	in.seq = ++s->seq;
	in.start = now;
	in.deadline = now + t->timeout + s->p.grace + w->n * w->ewma;
	ring_push(w, &in);
	out->tid = tid;
	out->attempt = in.attempt;
	out->task = t;
	out->duplicate = duplicate;
}

/* The oldest instance, on another worker than SKIP, that has run longer
 * than a straggler may and has no copy yet; 0 if none.  A straggler has
 * run more than dup_min, three times the mean service time, and twice
 * what SKIP's own last task took: the last tasks of a phase of long tasks
 * are not stragglers just because the phase's first one has ended.  A
 * task that has lost an instance already is not copied: a task that kills
 * its worker would kill every idle worker given a copy, and while a copy
 * lived it could never run out of attempts. */
static uint64_t
find_straggler(struct sched *s, int skip, double now)
{
	double limit = fmax(fmax(s->p.dup_min, 3 * s->mean_service),
			    2 * s->w[skip].last);
	double oldest = INFINITY;
	uint64_t best = 0;
	int k, i;

	for (k = 0; k < s->nw; k++) {
		struct sworker *w = &s->w[k];

		if (k == skip || !w->up)
			continue;
		for (i = 0; i < w->n; i++) {
			struct inflight *in = ring_at(w, i);

			const struct sched_task *t = task_of(s, in->tid);

			if (t->ninst == 1 && t->failures == 0 &&
			    now - in->start > limit && in->start < oldest) {
				oldest = in->start;
				best = in->tid;
			}
		}
	}
	return best;
}

int
sched_take(struct sched *s, int worker, double now, struct sched_pick *out,
	   int max)
{
	struct sworker *w = &s->w[worker];
	int count = 0;
	uint64_t tid;

	if (!w->up || w->paused)
		return 0;
	/* A wide window is topped up once half of it has run: fewer, larger
	 * messages where tasks are short. */
	if (w->window >= REFILL_WIDE && w->n > w->window / 2)
		return 0;
	while (count < max && w->n < w->window && (tid = queue_pop(s)) != 0)
		start_instance(s, worker, tid, now, &out[count++], 0);
	if (count == 0 && w->n == 0 && s->nqueued == 0 && max > 0 &&
	    (tid = find_straggler(s, worker, now)) != 0)
		start_instance(s, worker, tid, now, &out[count++], 1);
	return count;
}

/* Fold a measured service time into the worker's window. */
static void
learn(struct sched *s, struct sworker *w, double seconds)
{
	double target;

	if (seconds < 1e-7)
		seconds = 1e-7;
	w->last = seconds;
	w->ewma = w->ewma > 0 ? 0.8 * w->ewma + 0.2 * seconds : seconds;
	s->mean_service = s->mean_service > 0 ?
		0.95 * s->mean_service + 0.05 * seconds : seconds;
	target = s->p.window_target / w->ewma;
	w->window = target < 1 ? 1 :
		target > s->p.window_max ? s->p.window_max : (int)target;
	/* Short tasks keep one waiting on the worker, so that it starts the
	 * next at once instead of after a round trip to the master. */
	if (w->ewma < s->p.prefetch_below && w->window < 2)
		w->window = 2;
}

/* Cancel every live instance of TID. */
static void
cancel_others(struct sched *s, uint64_t tid)
{
	struct sched_task *t = task_of(s, tid);
	int k, i;

	for (k = 0; k < s->nw && t->ninst > 0; k++) {
		struct sworker *w = &s->w[k];

		for (i = 0; i < w->n; i++) {
			struct inflight *in = ring_at(w, i);

			if (in->tid != tid)
				continue;
			if (s->ops.cancel)
				s->ops.cancel(s->ops.ctx, k, tid, in->attempt);
			ring_remove(w, i);
			t->ninst--;
			break;
		}
	}
}

enum sched_verdict
sched_done(struct sched *s, int worker, uint64_t tid, uint32_t attempt,
	   double seconds, double now)
{
	struct sworker *w = &s->w[worker];
	struct sched_task *t;
	int i;

	(void)now;
	if (tid == 0 || tid > s->ntasks || attempt == 0)
		return SCHED_UNKNOWN;
	if (s->chunks[(tid - 1) >> CHUNK_SHIFT] == NULL)
		return SCHED_DUPLICATE;		/* ended long ago */
	t = task_of(s, tid);
	if (attempt > t->attempts)
		return SCHED_UNKNOWN;
	i = ring_find(w, tid, attempt);
	if (i >= 0) {
		if (ring_at(w, i)->seq > s->newest_done)
			s->newest_done = ring_at(w, i)->seq;
		ring_remove(w, i);
		t->ninst--;
		learn(s, w, seconds);
	}
	if (t->state == TASK_DONE || t->state == TASK_FAILED)
		return SCHED_DUPLICATE;
	task_end(s, tid, TASK_DONE);
	cancel_others(s, tid);
	return SCHED_ACCEPTED;
}

/* Instances of WORKER past their deadline are lost. */
static void
expire(struct sched *s, int worker, double now)
{
	struct sworker *w = &s->w[worker];
	int i = 0;

	while (i < w->n) {
		struct inflight in = *ring_at(w, i);

		if (now < in.deadline) {
			i++;
			continue;
		}
		ring_remove(w, i);
		if (s->ops.cancel)
			s->ops.cancel(s->ops.ctx, worker, in.tid, in.attempt);
		instance_lost(s, worker, in.tid, in.attempt, "deadline passed", 1);
	}
}

/* TOP-C: is WORKER's oldest instance lagging the newest completed one? */
static void
check_slow(struct sched *s, int worker, uint64_t lag_limit, double now)
{
	struct sworker *w = &s->w[worker];
	struct inflight *head;

	if (w->n == 0 || s->newest_done <= lag_limit ||
	    ring_at(w, 0)->seq >= s->newest_done - lag_limit) {
		w->slow = 0;
		return;
	}
	head = ring_at(w, 0);
	if (!w->slow || w->slow_seq != head->seq) {
		/* Reported when it becomes slow; a new lagging task restarts
		 * the clock quietly. */
		if (!w->slow && s->ops.slow)
			s->ops.slow(s->ops.ctx, worker, head->tid);
		w->slow = 1;
		w->slow_seq = head->seq;
		w->slow_since = now;
	} else if (now - w->slow_since > s->p.slow_timeout && s->ops.hung) {
		s->ops.hung(s->ops.ctx, worker, head->tid, now - head->start);
	}
}

void
sched_tick(struct sched *s, double now)
{
	uint64_t inflight = 0;
	int k;

	for (k = 0; k < s->nw; k++)
		if (s->w[k].up)
			expire(s, k, now);
	for (k = 0; k < s->nw; k++)
		if (s->w[k].up)
			inflight += (uint64_t)s->w[k].window;
	for (k = 0; k < s->nw; k++)
		if (s->w[k].up)
			check_slow(s, k, 3 * inflight, now);
}

void
sched_fail_open(struct sched *s, const char *reason)
{
	uint64_t tid;

	for (tid = 1; tid <= s->ntasks && s->nopen > 0; tid++) {
		const struct sched_task *t = sched_task(s, tid);

		if (t == NULL) {
			tid += CHUNK - 1;	/* a reclaimed chunk: all ended */
			continue;
		}
		if (t->state == TASK_DONE || t->state == TASK_FAILED)
			continue;
		task_end(s, tid, TASK_FAILED);
		if (s->ops.failed)
			s->ops.failed(s->ops.ctx, tid, reason);
	}
	s->qlen = 0;
}

void
sched_fail_batch(struct sched *s, uint32_t batch, const char *reason,
		 uint64_t *queued, uint64_t *running)
{
	uint64_t tid;

	*queued = *running = 0;
	for (tid = 1; tid <= s->ntasks; tid++) {
		struct sched_task *t;

		if (s->chunks[(tid - 1) >> CHUNK_SHIFT] == NULL) {
			tid += CHUNK - 1;	/* a reclaimed chunk: all ended */
			continue;
		}
		t = task_of(s, tid);
		if (t->batch != batch || t->state == TASK_DONE ||
		    t->state == TASK_FAILED)
			continue;
		if (t->state == TASK_QUEUED)
			(*queued)++;
		else
			(*running)++;
		task_end(s, tid, TASK_FAILED);
		cancel_others(s, tid);
		if (s->ops.failed)
			s->ops.failed(s->ops.ctx, tid, reason);
	}
}

size_t
sched_queued(const struct sched *s)
{
	return s->nqueued;
}

int
sched_inflight(const struct sched *s, int worker)
{
	return s->w[worker].n;
}

int
sched_window(const struct sched *s, int worker)
{
	return s->w[worker].window;
}

int
sched_is_slow(const struct sched *s, int worker)
{
	return s->w[worker].slow;
}

uint64_t
sched_ntasks(const struct sched *s)
{
	return s->ntasks;
}

uint64_t
sched_open(const struct sched *s)
{
	return s->nopen;
}

uint64_t
sched_oldest(const struct sched *s, int worker)
{
	const struct sworker *w = &s->w[worker];

	return w->n ? w->ring[w->head].tid : 0;
}
