/* sched: the master's task scheduler. */
#include "sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"
#include "util.h"

/* A batch of a million tasks holds a million records: keep them small
 * (what few tasks need, their memory, is kept beside their chunk). */
_Static_assert(sizeof(struct sched_task) == 32, "a task's record grew");

#define RTT_MAX 1.0		/* longest round trip sample, seconds */
#define PROBE_N 4		/* results of a new batch that size the
				 * windows of workers yet to run one */
#define REFILL_WIDE 16		/* fills this wide are topped up by halves */
/* A batch and kind that no worker's window is sized for yet goes first
 * to TRIAL_N workers of narrow windows, when it has more tasks than those
 * windows take; the others wait for the probe (PROBE_N results) for up
 * to TRIAL_HOLD seconds, then take their windows as before.  Short tasks
 * then reach a slot as one message of its whole share instead of one
 * task and, a round trip later, the rest: with 512 slots on two CPUs that
 * second message and its wake-ups were a tenth of a first batch of no-op
 * tasks.  Long tasks start TRIAL_HOLD later (batch IDs start at 1: the
 * first trial starts afresh). */
#define TRIAL_N 8
#define TRIAL_HOLD 0.02
#define TRIAL_WINDOW 2		/* windows this narrow wait */

void
sched_params_default(struct sched_params *p)
{
	p->max_attempts = 3;
	p->slow_timeout = 60;
	p->grace = 2;
	p->window_target = 0.002;
	p->window_max = 1024;
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
	for (i = 0; i < nworkers; i++) {
		s->w[i].window = 1;
		s->w[i].holder = -1;
	}
	sched_set_nodes(s, NULL, 1);
	return s;
}

void
sched_set_nodes(struct sched *s, const int *node_of, int nnodes)
{
	int k;

	for (k = 0; k < s->nnodes; k++)
		free(s->nodes[k].w);
	free(s->nodes);
	s->nnodes = nnodes;
	s->nodes = ft_calloc((size_t)nnodes, sizeof(*s->nodes));
	for (k = 0; k < nnodes; k++) {
		s->nodes[k].capw = s->nw + 1;
		s->nodes[k].w = ft_calloc((size_t)s->nw + 1, sizeof(int));
	}
	for (k = 0; k < s->nw; k++) {
		struct snode *n;

		s->w[k].node = node_of ? node_of[k] : 0;
		n = &s->nodes[s->w[k].node];
		n->w[n->nw++] = k;
	}
}

int
sched_add_node(struct sched *s)
{
	struct snode *n;

	s->nodes = ft_realloc(s->nodes, (size_t)(s->nnodes + 1) *
			      sizeof(*s->nodes));
	n = &s->nodes[s->nnodes];
	memset(n, 0, sizeof(*n));
	n->capw = 4;
	n->w = ft_calloc((size_t)n->capw, sizeof(int));
	return s->nnodes++;
}

int
sched_add_worker(struct sched *s, int node)
{
	struct snode *n = &s->nodes[node];
	struct sworker *w;

	s->w = ft_realloc(s->w, (size_t)(s->nw + 1) * sizeof(*s->w));
	w = &s->w[s->nw];
	memset(w, 0, sizeof(*w));
	w->window = 1;
	w->holder = -1;
	w->node = node;
	if (n->nw == n->capw) {
		n->capw *= 2;
		n->w = ft_realloc(n->w, (size_t)n->capw * sizeof(int));
	}
	n->w[n->nw++] = s->nw;
	return s->nw++;
}

void
sched_set_gpus(struct sched *s, int node, int n)
{
	s->nodes[node].ngpus = n > SCHED_GPUS_MAX ? SCHED_GPUS_MAX : n;
}

/* A side array of chunk C's tasks (their memory needs, their time
 * requests) at *A, made when the first one needs it. */
static uint32_t *
chunk_side(uint32_t **a)
{
	if (*a == NULL)
		*a = ft_calloc(CHUNK, sizeof(**a));
	return *a;
}

/* Free chunk C. */
static void
chunk_free(struct chunk *c)
{
	if (c) {
		free(c->mem);
		free(c->treq);
	}
	free(c);
}

void
sched_set_mem(struct sched *s, int node, uint64_t mib)
{
	s->nodes[node].mem = mib;
	s->wake = 1;
}

uint64_t
sched_mem_used(const struct sched *s, int node)
{
	return s->nodes[node].mem_used;
}

void
sched_set_end(struct sched *s, int node, double end)
{
	s->nodes[node].end = end;
	s->wake = 1;
}

void
sched_free(struct sched *s)
{
	size_t i;
	int k;

	if (s == NULL)
		return;
	for (i = 0; i < s->nchunks; i++)
		chunk_free(s->chunks[i]);
	for (k = 0; k < s->nw; k++)
		free(s->w[k].ring);
	free(s->chunks);
	free(s->done);
	sched_queues_free(s);
	for (k = 0; k < s->nnodes; k++)
		free(s->nodes[k].w);
	free(s->nodes);
	free(s->w);
	free(s);
}


/* ---- tasks ---- */

uint64_t
sched_add(struct sched *s, uint32_t batch, uint32_t index, const char *spec,
	  uint32_t len, double timeout)
{
	return sched_add_need(s, batch, index, spec, len, timeout, NULL);
}

uint64_t
sched_add_need(struct sched *s, uint32_t batch, uint32_t index,
	       const char *spec, uint32_t len, double timeout,
	       const struct sched_need *need)
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
		s->chunks[c]->mem = NULL;
		s->chunks[c]->treq = NULL;
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
	if (need) {
		t->cpus_m1 = (uint8_t)(need->cpus - 1);
		t->gpus = (uint8_t)need->gpus;
		t->prio = (int8_t)need->prio;
		t->nocopy = need->nocopy != 0 || need->treq != 0;
		if (need->mem)
			chunk_side(&s->chunks[c]->mem)[(s->ntasks - 1) &
						       (CHUNK - 1)] = need->mem;
		if (need->treq)
			chunk_side(&s->chunks[c]->treq)[(s->ntasks - 1) &
							(CHUNK - 1)] = need->treq;
	}
	s->nqueued++;
	s->nopen++;
	sched_queue_push(s, t, s->ntasks, 0);
	return s->ntasks;
}

void
sched_set_kind(struct sched *s, uint64_t tid, uint8_t kind)
{
	if (tid > 0 && tid <= s->ntasks &&
	    s->chunks[(tid - 1) >> CHUNK_SHIFT] != NULL)
		sched_task_of(s, tid)->kind = kind;
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
	return sched_task_of(s, tid);
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
	struct sched_task *t = sched_task_of(s, tid);

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
			chunk_free(s->chunks[c]);
			s->chunks[c] = NULL;
			freed++;
		}
	}
	s->ndone = 0;
	return freed;
}

/* TID, whose last instance ended unfinished, waits again: at the front
 * of its queue. */
static void
requeue(struct sched *s, struct sched_task *t, uint64_t tid)
{
	t->state = TASK_QUEUED;
	s->nqueued++;
	sched_queue_push(s, t, tid, 1);
}

/* Instance (TID, ATTEMPT) was lost for REASON.  STARTED: it may have
 * been running (it counts against max_attempts); an instance still
 * waiting in a worker's queue does not. */
static void
instance_lost(struct sched *s, int worker, uint64_t tid, uint32_t attempt,
	      const char *reason, int started)
{
	struct sched_task *t = sched_task_of(s, tid);
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
	requeue(s, t, tid);
	if (s->ops.reassigned)
		s->ops.reassigned(s->ops.ctx, tid, attempt, worker, reason);
}

/* WORKER's wide instance ended: its held workers and GPUs are free. */
static void
release_hold(struct sched *s, int worker)
{
	struct sworker *w = &s->w[worker];
	struct snode *n = &s->nodes[w->node];
	int i;

	if (!w->wide)
		return;
	w->wide = 0;
	n->gpus_busy &= ~w->gpus;
	w->gpus = 0;
	for (i = 0; i < n->nw; i++)
		if (s->w[n->w[i]].holder == worker)
			s->w[n->w[i]].holder = -1;
	s->wake = 1;
}

/* Remove instance I of WORKER (it ended one way or another). */
static void
drop_instance(struct sched *s, int worker, int i)
{
	uint32_t mem = sched_ring_at(&s->w[worker], i)->mem;

	sched_ring_remove(&s->w[worker], i);
	sched_charge_drop(s, &s->w[worker], mem);
	if (s->w[worker].n == 0 && s->w[worker].wide)
		release_hold(s, worker);
}

/* ---- workers ---- */

void
sched_worker_up(struct sched *s, int worker)
{
	struct sworker *w = &s->w[worker];

	s->nup += !w->up;
	w->up = 1;
	w->paused = 0;
	w->slow = 0;
	w->window = 1;
	w->fill = 0;
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
	s->nup -= w->up;
	w->up = 0;
	w->slow = 0;
	while (w->n > 0) {
		struct inflight in = *sched_ring_at(w, w->n - 1);

		w->n--;
		instance_lost(s, worker, in.tid, in.attempt, reason, 0);
	}
	sched_charge_recount(s, w);
	release_hold(s, worker);
	s->wake = 1;
}

void
sched_worker_down(struct sched *s, int worker, const char *reason, double now)
{
	struct sworker *w = &s->w[worker];

	(void)now;
	s->nup -= w->up;
	w->up = 0;
	w->slow = 0;
	/* Newest first: each goes to the front, so the oldest ends up first.
	 * Workers run their instances in order: only the oldest can have
	 * started. */
	while (w->n > 0) {
		struct inflight in = *sched_ring_at(w, w->n - 1);

		w->n--;
		instance_lost(s, worker, in.tid, in.attempt, reason, w->n == 0);
	}
	sched_charge_recount(s, w);
	release_hold(s, worker);
	s->wake = 1;
}

/* The oldest instance, on another worker than SKIP, that has run longer
 * than a straggler may and has no copy yet; 0 if none.  A straggler has
 * run more than dup_min, three times the mean service time, and twice
 * what SKIP's own last task took: the last tasks of a phase of long tasks
 * are not stragglers just because the phase's first one has ended; and
 * four round trips, as long as a loaded cluster takes to answer.  Its
 * worker has sent no result for as long: an instance queued behind
 * others on a worker that keeps reporting has not started, however long
 * ago it was sent (a batch spread over hundreds of slots in one pass
 * would otherwise be copied wholesale once the queue ran dry).  A
 * task that has lost an instance already is not copied: a task that kills
 * its worker would kill every idle worker given a copy, and while a copy
 * lived it could never run out of attempts. */
static uint64_t
find_straggler(struct sched *s, int skip, double now)
{
	double base = fmax(s->p.dup_min, 3 * s->mean_service);
	double limit = fmax(fmax(base, 2 * s->w[skip].last), 4 * s->rtt);
	double oldest = INFINITY, first = INFINITY;
	uint64_t best = 0;
	int k, i;

	/* Every idle worker asks, after every result: the scan is skipped
	 * until the oldest instance that could be copied may be a straggler
	 * (sched_start_instance pulls the time in for a new one). */
	if (now < s->straggle_at)
		return 0;
	for (k = 0; k < s->nw; k++) {
		struct sworker *w = &s->w[k];

		if (k == skip || !w->up || w->n == 0)
			continue;
		if (now - w->heard <= limit) {
			first = fmin(first, w->heard);
			continue;
		}
		for (i = 0; i < w->n; i++) {
			struct inflight *in = sched_ring_at(w, i);

			const struct sched_task *t = sched_task_of(s, in->tid);

			if (t->ninst != 1 || t->failures != 0 ||
			    t->cpus_m1 != 0 || t->gpus != 0 || t->nocopy ||
			    sched_mem_of(s, in->tid) != 0)
				continue;
			if (in->start < first)
				first = in->start;
			if (now - in->start > limit && in->start < oldest) {
				oldest = in->start;
				best = in->tid;
			}
		}
	}
	/* A rescan every dup_min at most: the mean service time may fall. */
	if (best == 0)
		s->straggle_at = fmin(first + base, now + s->p.dup_min);
	return best;
}

/* Only one-slot tasks of one priority wait (the usual case): no need to
 * look at any other queue. */
static int
simple_only(const struct sched *s)
{
	return s->nlv == 1 && s->lv[0].n == 1;
}

/* The window for tasks of SECONDS each. */
static int
window_of(const struct sched *s, double seconds)
{
	double target = fmax(s->p.window_target, 2 * s->rtt) / seconds;
	int window = target < 1 ? 1 :
		target > s->p.window_max ? s->p.window_max : (int)target;

	/* Short tasks keep one waiting on the worker, so that it starts the
	 * next at once instead of after a round trip to the master. */
	if (seconds < s->p.prefetch_below && window < 2)
		window = 2;
	return window;
}

/* A result of task T, which ran SECONDS: the first PROBE_N results of a
 * batch (and kind) in a row size the windows of the workers that have
 * not run one of its tasks yet, and call for a pass once they are in.
 * Without them each of hundreds of workers would open its window on its
 * own first result, one round trip after another. */
static void
probe(struct sched *s, const struct sched_task *t, double seconds)
{
	if (t->batch != s->probe_batch || t->kind != s->probe_kind) {
		s->probe_batch = t->batch;
		s->probe_kind = t->kind;
		s->probe_n = 0;
		s->probe_secs = 0;
	}
	if (s->probe_n >= PROBE_N)
		return;
	s->probe_secs = fmax(s->probe_secs, seconds);
	if (++s->probe_n == PROBE_N)
		s->wake = 1;
}

/* WORKER's window for the task at the head of the one-slot queue: its
 * own, or the probe's when it has not run a task of that batch and kind
 * and the probe has. */
static int
probe_window(const struct sched *s, const struct sworker *w, uint64_t head)
{
	const struct sched_task *t;

	if (head == 0 || s->probe_n < PROBE_N)
		return w->window;
	t = sched_task_of(s, head);
	if (t->batch != s->probe_batch || t->kind != s->probe_kind ||
	    (t->batch == w->last_batch && t->kind == w->last_kind))
		return w->window;
	return window_of(s, fmax(s->probe_secs, 1e-7));
}

/* Must W, whose window is narrow, wait for the probe of HEAD's batch
 * and kind (see TRIAL_N)?  Counts it among the trial's workers if not. */
static int
trial_holds(struct sched *s, struct sworker *w, uint64_t head, double now)
{
	const struct sched_task *t = sched_task_of(s, head);

	/* Wide windows, or few tasks (one message each either way). */
	if (w->window > TRIAL_WINDOW ||
	    s->nqueued <= (size_t)s->nup * (size_t)w->window ||
	    (t->batch == w->last_batch && t->kind == w->last_kind) ||
	    (t->batch == s->probe_batch && t->kind == s->probe_kind &&
	     s->probe_n >= PROBE_N))
		return 0;
	if (t->batch != s->trial_batch || t->kind != s->trial_kind) {
		s->trial_batch = t->batch;
		s->trial_kind = t->kind;
		s->trial_out = 0;
		s->trial_start = now;
		s->trial_gen++;
	}
	/* Asked again, by the next pass with its window still full, a
	 * worker of the trial is not counted twice. */
	if (w->trial == s->trial_gen)
		return 0;
	if (s->trial_out < TRIAL_N) {
		s->trial_out++;
		w->trial = s->trial_gen;
		return 0;
	}
	return now - s->trial_start < TRIAL_HOLD;
}

/* May W take tasks now?  (sched_takers counts these.) */
static int
can_take(const struct sworker *w)
{
	return w->up && !w->paused && w->holder < 0 && !w->wide;
}

int
sched_take(struct sched *s, int worker, double now, struct sched_pick *out,
	   int max)
{
	struct sworker *w = &s->w[worker];
	int pass, count = 0, k;
	uint64_t tid;

	s->now = now;
	if (!can_take(w))
		return 0;
	pass = s->pass_left > 0 ? s->pass_left-- : 0;
	/* A wide window is topped up once half of it has run: fewer, larger
	 * messages where tasks are short. */
	if (w->fill >= REFILL_WIDE && w->n > w->fill / 2)
		return 0;
	if (max > 0 && (k = sched_place_kept(s, worker, now, out)) != 0)
		return k > 0;
	if (simple_only(s)) {
		/* No worker takes more than its share of what is queued: wide
		 * windows of short tasks would otherwise hand a batch to the
		 * first workers asked while the others got nothing.  In a
		 * pass, the share is what is left over the workers left, so
		 * that the pass spreads the queue evenly in one go. */
		int share = pass > 0 ?
			(int)((s->nqueued + (size_t)pass - 1) / (size_t)pass) :
			(int)(s->nqueued / (size_t)(s->nup > 0 ? s->nup : 1)) + 1;
		uint64_t head = sched_fifo_head(s, &s->lv[0].v[0]);
		int window, limit;

		if (head != 0 && trial_holds(s, w, head, now))
			return 0;
		window = probe_window(s, w, head);
		limit = share < window ? w->n + share : window;

		if (limit > window)
			limit = window;
		while (count < max && w->n < limit &&
		       (tid = sched_fifo_head(s, &s->lv[0].v[0])) != 0) {
			if (sched_mem_of(s, tid) &&
			    !sched_mem_fits(s, worker, sched_mem_of(s, tid))) {
				s->mem_waits = 1;
				break;
			}
			sched_fifo_drop(&s->lv[0].v[0]);
			sched_start_instance(s, worker, tid, now, &out[count++], 0);
		}
	} else {
		while (count < max && w->n < w->window && !w->wide &&
		       sched_place_pick(s, worker, now, &out[count]) == PICK_ONE)
			count++;
	}
	if (count == 0 && w->n == 0 && s->nqueued == 0 && max > 0 &&
	    (tid = find_straggler(s, worker, now)) != 0)
		sched_start_instance(s, worker, tid, now, &out[count++], 1);
	if (count > 0)
		w->fill = w->n;
	return count;
}

void
sched_pass(struct sched *s, int takes)
{
	s->pass_left = takes > 0 ? takes : 0;
}

int
sched_takers(const struct sched *s, int from)
{
	int k, n = 0;

	for (k = from > 0 ? from : 0; k < s->nw; k++)
		n += can_take(&s->w[k]);
	return n;
}

int
sched_spreads(const struct sched *s)
{
	return simple_only(s);
}

/* Fold the round trip of an instance sent at START to a worker that held
 * nothing, and run for SECONDS, into the cluster's mean.  A sample is
 * taken as a second at most: longer is a stalled worker, which straggler
 * copies are for, not the cluster's latency. */
static void
learn_rtt(struct sched *s, double start, double seconds, double now)
{
	double rtt = fmin(fmax(now - start - seconds, 0), RTT_MAX);

	s->rtt = s->rtt > 0 ? 0.9 * s->rtt + 0.1 * rtt : rtt;
}

/* Fold a measured service time into the worker's window: the tasks that
 * keep it busy for window_target, or through two round trips when those
 * are longer (hundreds of slots on a few CPUs), so that its next tasks
 * come before it runs out. */
static void
learn(struct sched *s, struct sworker *w, double seconds)
{
	if (seconds < 1e-7)
		seconds = 1e-7;
	w->last = seconds;
	/* Longer tasks pull the mean up linearly: one long task narrows the
	 * window at once.  Shorter ones pull it down by ratios: service
	 * times span six orders of magnitude, and a worker that ran 1 s tasks
	 * would otherwise take some fifty no-ops, two per round trip, before
	 * its window opened. */
	if (w->ewma <= 0)
		w->ewma = seconds;
	else if (seconds >= w->ewma)
		w->ewma = 0.8 * w->ewma + 0.2 * seconds;
	else
		w->ewma *= sqrt(seconds / w->ewma);
	s->mean_service = s->mean_service > 0 ?
		0.95 * s->mean_service + 0.05 * seconds : seconds;
	w->window = window_of(s, w->ewma);
}

/* Cancel every live instance of TID. */
static void
cancel_others(struct sched *s, uint64_t tid)
{
	struct sched_task *t = sched_task_of(s, tid);
	int k, i;

	for (k = 0; k < s->nw && t->ninst > 0; k++) {
		struct sworker *w = &s->w[k];

		for (i = 0; i < w->n; i++) {
			struct inflight *in = sched_ring_at(w, i);

			if (in->tid != tid)
				continue;
			if (s->ops.cancel)
				s->ops.cancel(s->ops.ctx, k, tid, in->attempt);
			drop_instance(s, k, i);
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

	if (tid == 0 || tid > s->ntasks || attempt == 0)
		return SCHED_UNKNOWN;
	if (s->chunks[(tid - 1) >> CHUNK_SHIFT] == NULL)
		return SCHED_DUPLICATE;		/* ended long ago */
	t = sched_task_of(s, tid);
	if (attempt > t->attempts)
		return SCHED_UNKNOWN;
	i = sched_ring_find(w, tid, attempt);
	if (i >= 0) {
		if (sched_ring_at(w, i)->seq > s->newest_done)
			s->newest_done = sched_ring_at(w, i)->seq;
		if (sched_ring_at(w, i)->lead)
			learn_rtt(s, sched_ring_at(w, i)->start, seconds, now);
		drop_instance(s, worker, i);
		t->ninst--;
		/* Another batch's (or task type's) time says little about
		 * this one's: its first result is the worker's mean. */
		if (t->batch != w->last_batch || t->kind != w->last_kind) {
			w->ewma = 0;
			w->last_batch = t->batch;
			w->last_kind = t->kind;
		}
		learn(s, w, seconds);
		probe(s, t, seconds);
		w->heard = now;
	}
	if (t->state == TASK_DONE || t->state == TASK_FAILED)
		return SCHED_DUPLICATE;
	task_end(s, tid, TASK_DONE);
	cancel_others(s, tid);
	return SCHED_ACCEPTED;
}

int
sched_interrupt(struct sched *s, int worker, uint64_t tid, uint32_t attempt)
{
	struct sched_task *t;
	int i;

	if (worker < 0 || worker >= s->nw)
		return 0;
	i = sched_ring_find(&s->w[worker], tid, attempt);
	if (i < 0)
		return 0;	/* it ended, or was lost, meanwhile */
	t = sched_task_of(s, tid);
	drop_instance(s, worker, i);
	t->ninst--;
	if (t->state == TASK_RUNNING && t->ninst == 0)
		requeue(s, t, tid);
	s->wake = 1;
	return 1;
}

/* Instances of WORKER past their deadline are lost. */
static void
expire(struct sched *s, int worker, double now)
{
	struct sworker *w = &s->w[worker];
	int i = 0;

	while (i < w->n) {
		struct inflight in = *sched_ring_at(w, i);

		if (now < in.deadline) {
			i++;
			continue;
		}
		drop_instance(s, worker, i);
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
	    sched_ring_at(w, 0)->seq >= s->newest_done - lag_limit) {
		w->slow = 0;
		return;
	}
	head = sched_ring_at(w, 0);
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

	s->now = now;
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
	int k;

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
	sched_queues_free(s);
	for (k = 0; k < s->nnodes; k++)
		s->nodes[k].resv = 0;
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
		t = sched_task_of(s, tid);
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

int
sched_first(const struct sched *s, int worker, uint64_t *tid,
	    uint32_t *attempt)
{
	const struct sworker *w = &s->w[worker];

	if (w->n == 0)
		return 0;
	*tid = w->ring[w->head].tid;
	*attempt = w->ring[w->head].attempt;
	return 1;
}
