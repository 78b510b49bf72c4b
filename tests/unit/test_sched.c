/* Unit tests of master/sched.c: dispatch order, windows, verdicts, loss and
 * reassignment, deadlines, straggler copies, the TOP-C slow rule, and a
 * randomized property test of "every task ends exactly once". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sched.h"
#include "util.h"

/* ---- a recorder of the scheduler's callbacks ---- */

enum ev_kind { EV_REASSIGNED = 1, EV_FAILED, EV_CANCEL, EV_SLOW, EV_HUNG };

struct ev {
	int kind;
	int worker;
	uint64_t tid;
	uint32_t attempt;
	double seconds;
	char reason[160];
};

#define MAXEV 512

struct rec {
	struct ev ev[MAXEV];
	int n;
};

static struct ev *
rec_push(struct rec *r, int kind, int worker, uint64_t tid, uint32_t attempt)
{
	struct ev *e;

	if (r->n == MAXEV)
		fail_msg("too many scheduler callbacks");
	e = &r->ev[r->n++];
	memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->worker = worker;
	e->tid = tid;
	e->attempt = attempt;
	return e;
}

static void
on_reassigned(void *ctx, uint64_t tid, uint32_t attempt, int worker,
	      const char *reason)
{
	struct ev *e = rec_push(ctx, EV_REASSIGNED, worker, tid, attempt);

	snprintf(e->reason, sizeof(e->reason), "%s", reason);
}

static void
on_failed(void *ctx, uint64_t tid, const char *reason)
{
	struct ev *e = rec_push(ctx, EV_FAILED, -1, tid, 0);

	snprintf(e->reason, sizeof(e->reason), "%s", reason);
}

static void
on_cancel(void *ctx, int worker, uint64_t tid, uint32_t attempt)
{
	rec_push(ctx, EV_CANCEL, worker, tid, attempt);
}

static void
on_slow(void *ctx, int worker, uint64_t tid)
{
	rec_push(ctx, EV_SLOW, worker, tid, 0);
}

static void
on_hung(void *ctx, int worker, uint64_t tid, double seconds)
{
	rec_push(ctx, EV_HUNG, worker, tid, 0)->seconds = seconds;
}

/* Events of KIND matching WORKER, TID and ATTEMPT (-1 / 0 = any). */
static int
nev(const struct rec *r, int kind, int worker, uint64_t tid, uint32_t attempt)
{
	int i, c = 0;

	for (i = 0; i < r->n; i++) {
		const struct ev *e = &r->ev[i];

		if (e->kind == kind && (worker < 0 || e->worker == worker) &&
		    (tid == 0 || e->tid == tid) &&
		    (attempt == 0 || e->attempt == attempt))
			c++;
	}
	return c;
}

static int
nkind(const struct rec *r, int kind)
{
	return nev(r, kind, -1, 0, 0);
}

/* ---- fixtures ---- */

static struct rec R;

static struct sched *
mk(int nworkers, const struct sched_params *p)
{
	struct sched_params d;
	struct sched_ops ops = {
		.ctx = &R,
		.reassigned = on_reassigned,
		.failed = on_failed,
		.cancel = on_cancel,
		.slow = on_slow,
		.hung = on_hung,
	};

	memset(&R, 0, sizeof(R));
	if (p == NULL) {
		sched_params_default(&d);
		p = &d;
	}
	return sched_new(nworkers, p, &ops);
}

/* Add N tasks with TIMEOUT to batch 7; returns the first ID. */
static uint64_t
add_n(struct sched *s, int n, double timeout)
{
	uint64_t first = 0;
	int i;

	for (i = 0; i < n; i++) {
		/* Specs stay the caller's: one for all. */
		static const char spec[] = "{\"n\": 0}";
		uint64_t tid = sched_add(s, 7, (uint32_t)i, spec,
					 (uint32_t)strlen(spec), timeout);

		if (i == 0)
			first = tid;
	}
	return first;
}

/* Take exactly one task for WORKER at NOW; return its pick. */
static struct sched_pick
take1(struct sched *s, int worker, double now)
{
	struct sched_pick p[4];
	int n;

	memset(p, 0, sizeof(p));
	n = sched_take(s, worker, now, p, 1);
	if (n != 1)
		fail_msg("worker %d: sched_take gave %d tasks, want 1", worker, n);
	return p[0];
}

static void
take_none(struct sched *s, int worker, double now)
{
	struct sched_pick p[8];
	int n = sched_take(s, worker, now, p, 8);

	if (n != 0)
		fail_msg("worker %d: sched_take gave %d tasks (first %llu), want 0",
			 worker, n, (unsigned long long)p[0].tid);
}

static int
state(struct sched *s, uint64_t tid)
{
	const struct sched_task *t = sched_task(s, tid);

	assert_non_null(t);
	return t->state;
}

/* Grow WORKER's window: complete one task quickly (SECONDS of service). */
static void
learn_fast(struct sched *s, int worker, double now)
{
	struct sched_pick p = take1(s, worker, now);

	assert_int_equal(sched_done(s, worker, p.tid, p.attempt, 1e-5, now),
			 SCHED_ACCEPTED);
}

/* ---- dispatch order, IDs, attempts ---- */

static void
test_fifo_order_and_ids(void **st)
{
	struct sched *s = mk(2, NULL);
	uint64_t i;

	(void)st;
	assert_int_equal(add_n(s, 6, 10), 1);
	assert_int_equal(sched_ntasks(s), 6);
	assert_int_equal(sched_open(s), 6);
	assert_int_equal(sched_queued(s), 6);
	assert_null(sched_task(s, 0));
	assert_null(sched_task(s, 7));

	/* A worker that is not up gets nothing. */
	take_none(s, 0, 0);
	sched_worker_up(s, 0);
	sched_worker_up(s, 1);
	for (i = 1; i <= 6; i++) {
		int w = (int)(i % 2);
		struct sched_pick p = take1(s, w, 0);
		const struct sched_task *t;

		assert_int_equal(p.tid, i);
		assert_int_equal(p.attempt, 1);
		assert_int_equal(p.duplicate, 0);
		t = p.task;
		assert_ptr_equal(t, sched_task(s, i));
		assert_int_equal(t->batch, 7);
		assert_int_equal(t->index, i - 1);
		assert_int_equal(t->state, TASK_RUNNING);
		assert_int_equal(t->attempts, 1);
		assert_non_null(t->spec);
		assert_int_equal(t->spec_len, strlen(t->spec));
		assert_int_equal(sched_queued(s), 6 - i);
		assert_int_equal(sched_oldest(s, w), i);
		/* Window 1: nothing more until it reports. */
		take_none(s, w, 0);
		assert_int_equal(sched_done(s, w, p.tid, 1, 1.0, 1.0),
				 SCHED_ACCEPTED);
		assert_int_equal(state(s, i), TASK_DONE);
		assert_null(sched_task(s, i)->spec);
		assert_int_equal(sched_open(s), 6 - i);
		assert_int_equal(sched_oldest(s, w), 0);
	}
	take_none(s, 0, 2);
	assert_int_equal(R.n, 0);
	sched_free(s);
}

static void
test_take_respects_max(void **st)
{
	struct sched *s = mk(1, NULL);
	struct sched_pick p[16];
	int i;

	(void)st;
	add_n(s, 20, 10);
	sched_worker_up(s, 0);
	learn_fast(s, 0, 0);
	assert_true(sched_window(s, 0) > 4);
	assert_int_equal(sched_take(s, 0, 0, p, 3), 3);
	for (i = 0; i < 3; i++)
		assert_int_equal(p[i].tid, 2 + i);
	assert_int_equal(sched_take(s, 0, 0, p, 0), 0);
	assert_int_equal(sched_inflight(s, 0), 3);
	assert_int_equal(sched_oldest(s, 0), 2);
	sched_free(s);
}

/* ---- windows ---- */

static void
test_window_grows_with_tiny_tasks(void **st)
{
	struct sched_params prm;
	struct sched *s;
	struct sched_pick *p = ft_calloc(4000, sizeof(*p));
	int n, i, w;

	(void)st;
	sched_params_default(&prm);
	s = mk(1, &prm);
	add_n(s, 4000, 10);
	sched_worker_up(s, 0);
	assert_int_equal(sched_window(s, 0), 1);
	assert_int_equal(sched_take(s, 0, 0, p, 1000), 1);
	assert_int_equal(sched_done(s, 0, p[0].tid, 1, 1e-5, 0), SCHED_ACCEPTED);
	w = sched_window(s, 0);
	/* 0.002 s target / 10 us = 200 */
	assert_true(w > 100);
	assert_true(w <= prm.window_max);
	n = sched_take(s, 0, 0, p, 4000);
	assert_int_equal(n, w);
	assert_int_equal(sched_inflight(s, 0), w);
	for (i = 0; i < n; i++)
		assert_int_equal(p[i].tid, 2 + (uint64_t)i);
	/* Even faster tasks: capped by window_max. */
	for (i = 0; i < n; i++)
		assert_int_equal(sched_done(s, 0, p[i].tid, 1, 1e-9, 0),
				 SCHED_ACCEPTED);
	assert_int_equal(sched_window(s, 0), prm.window_max);
	assert_int_equal(sched_take(s, 0, 0, p, 4000), prm.window_max);
	free(p);
	sched_free(s);
}

/* A wide window is topped up only once half of it has run: short tasks
 * go out in fewer, larger messages. */
static void
test_wide_window_refilled_by_halves(void **st)
{
	struct sched *s = mk(1, NULL);
	struct sched_pick *p = ft_calloc(1000, sizeof(*p));
	int w, i, left;

	(void)st;
	add_n(s, 2000, 10);
	sched_worker_up(s, 0);
	learn_fast(s, 0, 0);
	w = sched_window(s, 0);
	assert_true(w >= 16);
	assert_int_equal(sched_take(s, 0, 0, p, 1000), w);
	/* Half of what it was given (the window may widen meanwhile). */
	for (i = 0; sched_inflight(s, 0) > w / 2; i++) {
		take_none(s, 0, 0);	/* more than half still in flight */
		assert_int_equal(sched_done(s, 0, p[i].tid, p[i].attempt, 1e-5,
					    0), SCHED_ACCEPTED);
	}
	assert_true(i >= w / 2 - 2);	/* about half had to run first */
	left = sched_inflight(s, 0);
	w = sched_window(s, 0);
	/* Then topped up in one go. */
	assert_int_equal(sched_take(s, 0, 0, p, 1000), w - left);
	assert_int_equal(sched_inflight(s, 0), w);
	free(p);
	sched_free(s);
}

/* A worker that ran 1 s tasks and is then given tiny ones opens its
 * window within a few round trips, not after dozens of tasks; one long
 * task after tiny ones closes it at once. */
static void
test_window_opens_fast_after_long_tasks(void **st)
{
	struct sched *s = mk(1, NULL);
	struct sched_pick p[1024];
	int rounds, n, i;

	(void)st;
	add_n(s, 3000, 10);
	sched_worker_up(s, 0);
	for (i = 0; i < 5; i++) {
		struct sched_pick one = take1(s, 0, 0);

		assert_int_equal(sched_done(s, 0, one.tid, one.attempt, 1.0, 0),
				 SCHED_ACCEPTED);
	}
	assert_true(sched_window(s, 0) <= 2);
	for (rounds = 0; sched_window(s, 0) < 100; rounds++) {
		assert_true(rounds < 4);
		n = sched_take(s, 0, 0, p, 1024);
		assert_true(n > 0);
		for (i = 0; i < n; i++)
			assert_int_equal(sched_done(s, 0, p[i].tid, p[i].attempt,
						    1e-6, 0), SCHED_ACCEPTED);
	}
	n = sched_take(s, 0, 0, p, 1);
	assert_int_equal(n, 1);
	assert_int_equal(sched_done(s, 0, p[0].tid, p[0].attempt, 1.0, 0),
			 SCHED_ACCEPTED);
	assert_true(sched_window(s, 0) <= 2);
	sched_free(s);
}

/* A pass spreads the queue evenly: each take gets what is left over the
 * takes left, not a share of the whole that leaves the last workers with
 * nothing. */
static void
test_pass_spreads_evenly(void **st)
{
	struct sched *s = mk(4, NULL);
	struct sched_pick p[64];
	int want[4] = { 3, 3, 2, 2 };
	int k;

	(void)st;
	add_n(s, 14, 10);
	for (k = 0; k < 4; k++)
		sched_worker_up(s, k);
	assert_true(sched_spreads(s));
	/* Wide windows: short tasks measured on every worker. */
	for (k = 0; k < 4; k++) {
		struct sched_pick one = take1(s, k, 0);

		assert_int_equal(sched_done(s, k, one.tid, one.attempt, 1e-6, 0),
				 SCHED_ACCEPTED);
	}
	assert_true(sched_window(s, 0) >= 6);
	sched_pass(s, 4);
	for (k = 0; k < 4; k++)
		assert_int_equal(sched_take(s, k, 0, p, 64), want[k]);
	assert_int_equal(sched_queued(s), 0);
	sched_free(s);
}

/* A pass counts only the workers that can take: with one worker down,
 * the three up ones share the queue between them in one go, instead of
 * leaving a quarter of it for the next pass. */
static void
test_pass_skips_down_workers(void **st)
{
	struct sched *s = mk(4, NULL);
	struct sched_pick p[64];
	int k;

	(void)st;
	add_n(s, 15, 10);
	for (k = 0; k < 4; k++)
		if (k != 1)
			sched_worker_up(s, k);
	for (k = 0; k < 4; k++) {
		struct sched_pick one;

		if (k == 1)
			continue;
		one = take1(s, k, 0);
		assert_int_equal(sched_done(s, k, one.tid, one.attempt, 1e-6, 0),
				 SCHED_ACCEPTED);
	}
	assert_int_equal(sched_takers(s, 0), 3);
	assert_int_equal(sched_takers(s, 2), 2);
	sched_pass(s, sched_takers(s, 0));
	for (k = 0; k < 4; k++)
		if (k != 1)
			assert_int_equal(sched_take(s, k, 0, p, 64), 4);
	assert_int_equal(sched_queued(s), 0);
	sched_free(s);
}

/* A long round trip (a loaded cluster) widens the window of short tasks
 * to cover two of them, and delays straggler copies. */
static void
test_round_trip_widens_window(void **st)
{
	struct sched *s = mk(2, NULL);
	struct sched_pick one;
	int quick;

	(void)st;
	add_n(s, 100, 10);
	sched_worker_up(s, 0);
	sched_worker_up(s, 1);
	one = take1(s, 0, 0);
	assert_int_equal(sched_done(s, 0, one.tid, one.attempt, 1e-3, 0.0011),
			 SCHED_ACCEPTED);
	quick = sched_window(s, 0);
	assert_true(quick <= 3);
	/* Sent at 1, answered 0.2 s later for a task of 1 ms. */
	one = take1(s, 1, 1.0);
	assert_int_equal(sched_done(s, 1, one.tid, one.attempt, 1e-3, 1.2),
			 SCHED_ACCEPTED);
	assert_true(sched_window(s, 1) >= 30);
	sched_free(s);
}

/* After a batch of long tasks, the first results of a batch of short ones
 * open the windows of the workers that have run none of them yet, and
 * call for a pass: hundreds of workers need not each wait for a result
 * of their own. */
/* NWORKERS workers whose windows are 1 (each ran a 1 s task of batch 7),
 * and NTASKS no-op tasks of batch 8 queued. */
static struct sched *
mk_after_long_tasks(int nworkers, int ntasks)
{
	struct sched *s = mk(nworkers, NULL);
	static const char spec[] = "{\"n\": 1}";
	struct sched_pick one;
	int k, i;

	add_n(s, nworkers, 100);
	for (k = 0; k < nworkers; k++)
		sched_worker_up(s, k);
	for (k = 0; k < nworkers; k++) {
		one = take1(s, k, 0);
		assert_int_equal(sched_done(s, k, one.tid, one.attempt, 1.0, 1),
				 SCHED_ACCEPTED);
		assert_int_equal(sched_window(s, k), 1);
	}
	sched_wake(s);
	for (i = 0; i < ntasks; i++)
		sched_add(s, 8, (uint32_t)i, spec, (uint32_t)strlen(spec), 10);
	return s;
}

/* Workers FROM..TO-1 take one task each at NOW. */
static void
take_one_each(struct sched *s, int from, int to, double now)
{
	struct sched_pick p[4];
	int k;

	for (k = from; k < to; k++)
		assert_int_equal(sched_take(s, k, now, p, 4), 1);
}

static void
test_new_batch_probe_opens_windows(void **st)
{
	struct sched *s = mk_after_long_tasks(6, 120);
	struct sched_pick p[64];
	int k;

	(void)st;
	for (k = 0; k < 6; k++)
		assert_int_equal(sched_take(s, k, 1, &p[k], 1), 1);
	/* A new batch's first result is the worker's mean at once. */
	assert_int_equal(sched_done(s, 0, p[0].tid, p[0].attempt, 1e-6, 1),
			 SCHED_ACCEPTED);
	assert_true(sched_window(s, 0) > 100);
	assert_int_equal(sched_wake(s), 0);
	/* Worker 4 has run none of batch 8: its window is still 1. */
	assert_int_equal(sched_window(s, 4), 1);
	take_none(s, 4, 1);
	/* Three more results (four in all) of the batch: a pass is called
	 * for, and worker 4 takes more than its window of long tasks. */
	for (k = 1; k < 4; k++)
		assert_int_equal(sched_done(s, k, p[k].tid, p[k].attempt, 1e-6,
					    1), SCHED_ACCEPTED);
	assert_int_equal(sched_wake(s), 1);
	assert_true(sched_take(s, 4, 1, p, 64) > 2);
	sched_free(s);
}

static void
test_new_batch_trial_before_windows_open(void **st)
{
	struct sched *s = mk_after_long_tasks(12, 1200);
	struct sched_pick p[8][4], big[256];
	int k;

	(void)st;
	/* Eight workers try the new batch, one task each; the rest wait
	 * for what those show. */
	for (k = 0; k < 8; k++)
		assert_int_equal(sched_take(s, k, 2, p[k], 4), 1);
	for (k = 8; k < 12; k++)
		take_none(s, k, 2.001);
	/* Four quick results: a pass is called for, and a waiting worker
	 * takes its share in one go (1,192 queued over 12: about 100). */
	for (k = 0; k < 4; k++)
		assert_int_equal(sched_done(s, k, p[k][0].tid, p[k][0].attempt,
					    1e-6, 2.002), SCHED_ACCEPTED);
	assert_int_equal(sched_wake(s), 1);
	assert_true(sched_take(s, 8, 2.002, big, 256) >= 90);
	sched_free(s);
}

static void
test_new_batch_trial_waits_no_longer_than_the_hold(void **st)
{
	struct sched *s = mk_after_long_tasks(12, 1200);

	(void)st;
	take_one_each(s, 0, 8, 2);
	take_none(s, 8, 2.01);
	/* No result within the hold (long tasks, say): the others take one
	 * each, as their windows say. */
	take_one_each(s, 8, 12, 2.03);
	sched_free(s);
}

static void
test_new_batch_trial_counts_each_worker_once(void **st)
{
	struct sched *s = mk_after_long_tasks(12, 1200);

	(void)st;
	take_one_each(s, 0, 7, 2);
	/* The next pass asks worker 0 again: its window is full. */
	take_none(s, 0, 2.001);
	/* Seven workers are on trial, not eight: one more may try. */
	take_one_each(s, 7, 8, 2.002);
	take_none(s, 8, 2.003);
	sched_free(s);
}

static void
test_new_batch_no_trial_for_a_task_each(void **st)
{
	struct sched *s = mk_after_long_tasks(12, 12);

	(void)st;
	/* As many tasks as windows take: no worker waits. */
	take_one_each(s, 0, 12, 2);
	sched_free(s);
}

static void
test_window_stays_one_for_long_tasks(void **st)
{
	struct sched *s = mk(1, NULL);
	struct sched_pick p[8];
	int i;

	(void)st;
	add_n(s, 10, 100);
	sched_worker_up(s, 0);
	for (i = 0; i < 5; i++) {
		assert_int_equal(sched_take(s, 0, i, p, 8), 1);
		assert_int_equal(sched_done(s, 0, p[0].tid, 1, 0.5, i),
				 SCHED_ACCEPTED);
		assert_int_equal(sched_window(s, 0), 1);
	}
	assert_int_equal(sched_take(s, 0, 5, p, 8), 1);
	assert_int_equal(sched_inflight(s, 0), 1);
	sched_free(s);
}

static void
test_window_reset_on_worker_up(void **st)
{
	struct sched *s = mk(1, NULL);

	(void)st;
	add_n(s, 10, 100);
	sched_worker_up(s, 0);
	learn_fast(s, 0, 0);
	assert_true(sched_window(s, 0) > 1);
	sched_worker_down(s, 0, "test", 1);
	sched_worker_up(s, 0);
	assert_int_equal(sched_window(s, 0), 1);
	sched_free(s);
}

/* ---- verdicts ---- */

static void
test_done_once_then_duplicate(void **st)
{
	struct sched *s = mk(2, NULL);
	struct sched_pick p;

	(void)st;
	add_n(s, 2, 10);
	sched_worker_up(s, 0);
	sched_worker_up(s, 1);
	p = take1(s, 0, 0);
	assert_int_equal(sched_done(s, 0, p.tid, 1, 0.1, 0.1), SCHED_ACCEPTED);
	assert_int_equal(sched_done(s, 0, p.tid, 1, 0.1, 0.2),
			 SCHED_DUPLICATE);
	/* The same report arriving through another worker. */
	assert_int_equal(sched_done(s, 1, p.tid, 1, 0.1, 0.3),
			 SCHED_DUPLICATE);
	assert_int_equal(sched_open(s), 1);
	assert_int_equal(nkind(&R, EV_CANCEL), 0);
	sched_free(s);
}

static void
test_duplicate_from_other_attempt(void **st)
{
	struct sched *s = mk(2, NULL);
	struct sched_pick a, b;

	(void)st;
	add_n(s, 1, 10);
	sched_worker_up(s, 0);
	sched_worker_up(s, 1);
	a = take1(s, 0, 0);
	sched_tick(s, 100);		/* attempt 1 expires */
	assert_int_equal(nev(&R, EV_CANCEL, 0, 1, 1), 1);
	b = take1(s, 1, 100);
	assert_int_equal(b.tid, a.tid);
	assert_int_equal(b.attempt, 2);
	assert_int_equal(sched_done(s, 1, 1, 2, 0.1, 101), SCHED_ACCEPTED);
	/* The lost attempt reports late, from its own worker. */
	assert_int_equal(sched_done(s, 0, 1, 1, 0.1, 102), SCHED_DUPLICATE);
	assert_int_equal(sched_done(s, 1, 1, 2, 0.1, 103), SCHED_DUPLICATE);
	assert_int_equal(sched_open(s), 0);
	assert_int_equal(nkind(&R, EV_FAILED), 0);
	sched_free(s);
}

static void
test_unknown_reports(void **st)
{
	struct sched *s = mk(2, NULL);
	struct sched_pick p;

	(void)st;
	add_n(s, 3, 10);
	sched_worker_up(s, 0);
	p = take1(s, 0, 0);
	assert_int_equal(p.tid, 1);
	assert_int_equal(sched_done(s, 0, 0, 1, 0.1, 1), SCHED_UNKNOWN);
	assert_int_equal(sched_done(s, 0, 4, 1, 0.1, 1), SCHED_UNKNOWN);
	assert_int_equal(sched_done(s, 0, UINT64_MAX, 1, 0.1, 1),
			 SCHED_UNKNOWN);
	assert_int_equal(sched_done(s, 0, 1, 0, 0.1, 1), SCHED_UNKNOWN);
	assert_int_equal(sched_done(s, 0, 1, 2, 0.1, 1), SCHED_UNKNOWN);
	/* Task 2 exists but was never handed out. */
	assert_int_equal(sched_done(s, 0, 2, 1, 0.1, 1), SCHED_UNKNOWN);
	assert_int_equal(sched_done(s, 1, 2, 1, 0.1, 1), SCHED_UNKNOWN);
	/* None of that changed anything. */
	assert_int_equal(state(s, 1), TASK_RUNNING);
	assert_int_equal(state(s, 2), TASK_QUEUED);
	assert_int_equal(sched_open(s), 3);
	assert_int_equal(sched_queued(s), 2);
	assert_int_equal(sched_inflight(s, 0), 1);
	/* After acceptance, an attempt never issued is still unknown. */
	assert_int_equal(sched_done(s, 0, 1, 1, 0.1, 1), SCHED_ACCEPTED);
	assert_int_equal(sched_done(s, 0, 1, 2, 0.1, 1), SCHED_UNKNOWN);
	assert_int_equal(R.n, 0);
	sched_free(s);
}

/* ---- losing workers ---- */

static int
in_set(uint64_t tid, const uint64_t *set, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (set[i] == tid)
			return 1;
	return 0;
}

static void
test_worker_down_requeues_at_front(void **st)
{
	struct sched *s = mk(2, NULL);
	struct sched_pick p[8];
	uint64_t lost[3] = { 2, 3, 4 }, seen[3];
	int i, n;

	(void)st;
	add_n(s, 10, 100);
	sched_worker_up(s, 0);
	learn_fast(s, 0, 0);		/* task 1 */
	assert_int_equal(sched_take(s, 0, 1, p, 3), 3);
	for (i = 0; i < 3; i++)
		assert_int_equal(p[i].tid, lost[i]);
	assert_int_equal(sched_queued(s), 6);

	sched_worker_up(s, 1);
	sched_worker_down(s, 0, "killed", 2);
	assert_int_equal(sched_inflight(s, 0), 0);
	assert_int_equal(sched_oldest(s, 0), 0);
	assert_int_equal(sched_queued(s), 9);
	assert_int_equal(sched_open(s), 9);
	assert_int_equal(nkind(&R, EV_REASSIGNED), 3);
	for (i = 0; i < 3; i++) {
		const struct sched_task *t = sched_task(s, lost[i]);

		assert_int_equal(nev(&R, EV_REASSIGNED, 0, lost[i], 1), 1);
		assert_int_equal(t->state, TASK_QUEUED);
		assert_int_equal(t->failures, i == 0 ? 1 : 0); /* only the oldest had started */
		assert_int_equal(t->ninst, 0);
		assert_non_null(t->spec);
	}
	for (i = 0; i < R.n; i++)
		assert_string_equal(R.ev[i].reason, "killed");
	assert_int_equal(nkind(&R, EV_CANCEL), 0);
	assert_int_equal(nkind(&R, EV_FAILED), 0);
	/* A down worker gets nothing. */
	take_none(s, 0, 2);

	/* Worker 1 gets the lost ones before tasks 5.. */
	n = 0;
	while (n < 3) {
		struct sched_pick q = take1(s, 1, 3);

		if (!in_set(q.tid, lost, 3) || in_set(q.tid, seen, n))
			fail_msg("pick %d: got task %llu, want a lost one", n,
				 (unsigned long long)q.tid);
		assert_int_equal(q.attempt, 2);
		assert_int_equal(q.duplicate, 0);
		seen[n++] = q.tid;
		assert_int_equal(sched_done(s, 1, q.tid, 2, 1.0, 3),
				 SCHED_ACCEPTED);
	}
	assert_int_equal(take1(s, 1, 4).tid, 5);
	sched_free(s);
}

/* The job's end: interrupted instances go back to the front of the
 * queue, silently and without counting against max_attempts, however
 * often; an instance that already ended is not the worker's any more. */
static void
test_interrupt_charges_nobody(void **st)
{
	struct sched_params prm;
	struct sched *s;
	struct sched_pick p, q;
	uint64_t tid;
	uint32_t attempt;
	int round;

	(void)st;
	sched_params_default(&prm);
	prm.max_attempts = 1;
	s = mk(2, &prm);
	add_n(s, 2, 100);
	sched_worker_up(s, 0);
	sched_worker_up(s, 1);
	for (round = 1; round <= 5; round++) {
		p = take1(s, 0, round);
		assert_int_equal(p.tid, 1);	/* first again: the front */
		assert_int_equal(p.attempt, round);
		assert_int_equal(sched_first(s, 0, &tid, &attempt), 1);
		assert_int_equal(tid, 1);
		assert_int_equal(attempt, round);
		assert_int_equal(sched_interrupt(s, 0, p.tid, p.attempt), 1);
		assert_int_equal(sched_first(s, 0, &tid, &attempt), 0);
		assert_int_equal(state(s, 1), TASK_QUEUED);
		assert_int_equal(sched_task(s, 1)->failures, 0);
		/* Twice, or by another worker: not its instance. */
		assert_int_equal(sched_interrupt(s, 0, p.tid, p.attempt), 0);
		assert_int_equal(sched_interrupt(s, 1, p.tid, p.attempt), 0);
	}
	assert_int_equal(R.n, 0);	/* no callback: the caller says it */
	p = take1(s, 0, 10);
	q = take1(s, 1, 10);
	assert_int_equal(q.tid, 2);
	assert_int_equal(sched_done(s, 0, p.tid, p.attempt, 1, 11),
			 SCHED_ACCEPTED);
	assert_int_equal(sched_interrupt(s, 0, p.tid, p.attempt), 0);
	assert_int_equal(state(s, 1), TASK_DONE);
	/* Another task's instance, on the other worker: back in the queue. */
	assert_int_equal(sched_interrupt(s, 1, q.tid, q.attempt), 1);
	assert_int_equal(state(s, 2), TASK_QUEUED);
	assert_int_equal(sched_open(s), 1);
	assert_int_equal(nkind(&R, EV_FAILED), 0);
	sched_free(s);
}

static void
test_max_attempts_fails_once(void **st)
{
	struct sched_params prm;
	struct sched *s;
	struct sched_pick p;
	int round;

	(void)st;
	sched_params_default(&prm);
	prm.max_attempts = 3;
	s = mk(2, &prm);
	add_n(s, 2, 100);
	sched_worker_up(s, 0);
	sched_worker_up(s, 1);
	for (round = 1; round <= 3; round++) {
		int w = round % 2;

		p = take1(s, w, round);
		assert_int_equal(p.tid, 1);
		assert_int_equal(p.attempt, round);
		sched_worker_down(s, w, "crash", round);
		sched_worker_up(s, w);
		assert_int_equal(sched_task(s, 1)->failures, round);
		if (round < 3) {
			assert_int_equal(state(s, 1), TASK_QUEUED);
			assert_int_equal(sched_open(s), 2);
			assert_int_equal(nkind(&R, EV_FAILED), 0);
		}
	}
	assert_int_equal(nkind(&R, EV_REASSIGNED), 2);
	assert_int_equal(nev(&R, EV_FAILED, -1, 1, 0), 1);
	assert_non_null(strstr(R.ev[R.n - 1].reason, "crash"));
	assert_int_equal(state(s, 1), TASK_FAILED);
	assert_null(sched_task(s, 1)->spec);
	assert_int_equal(sched_open(s), 1);
	/* The failed task is never handed out again. */
	p = take1(s, 0, 10);
	assert_int_equal(p.tid, 2);
	take_none(s, 1, 10);
	/* A late report of a failed task is a duplicate; no second failure. */
	assert_int_equal(sched_done(s, 0, 1, 3, 0.1, 11), SCHED_DUPLICATE);
	assert_int_equal(sched_done(s, 1, 1, 2, 0.1, 11), SCHED_DUPLICATE);
	sched_worker_down(s, 0, "crash", 12);
	sched_worker_down(s, 1, "crash", 12);
	assert_int_equal(nev(&R, EV_FAILED, -1, 1, 0), 1);
	assert_int_equal(sched_open(s), 1);
	sched_free(s);
}

/* ---- deadlines ---- */

static void
test_deadline_expiry_requeues(void **st)
{
	struct sched_params prm;
	struct sched *s;
	struct sched_pick p;

	(void)st;
	sched_params_default(&prm);
	prm.grace = 2;
	s = mk(2, &prm);
	add_n(s, 2, 10);
	sched_worker_up(s, 0);
	sched_worker_up(s, 1);
	p = take1(s, 0, 100);
	assert_int_equal(p.tid, 1);
	sched_tick(s, 111.9);		/* deadline is 100 + 10 + 2 */
	assert_int_equal(R.n, 0);
	assert_int_equal(state(s, 1), TASK_RUNNING);
	assert_int_equal(sched_inflight(s, 0), 1);
	sched_tick(s, 112.01);
	assert_int_equal(nev(&R, EV_CANCEL, 0, 1, 1), 1);
	assert_int_equal(nev(&R, EV_REASSIGNED, 0, 1, 1), 1);
	assert_int_equal(nkind(&R, EV_CANCEL), 1);
	assert_int_equal(nkind(&R, EV_REASSIGNED), 1);
	assert_int_equal(state(s, 1), TASK_QUEUED);
	assert_int_equal(sched_task(s, 1)->failures, 1);
	assert_int_equal(sched_inflight(s, 0), 0);
	assert_int_equal(sched_queued(s), 2);
	/* Ticking again changes nothing. */
	sched_tick(s, 113);
	assert_int_equal(R.n, 2);
	/* Requeued at the front: worker 1 gets task 1 before task 2. */
	p = take1(s, 1, 113);
	assert_int_equal(p.tid, 1);
	assert_int_equal(p.attempt, 2);
	sched_free(s);
}

static void
test_deadline_fail_after_max_attempts(void **st)
{
	struct sched_params prm;
	struct sched *s;
	int a;

	(void)st;
	sched_params_default(&prm);
	prm.max_attempts = 2;
	prm.grace = 0;
	s = mk(1, &prm);
	add_n(s, 1, 1);
	sched_worker_up(s, 0);
	for (a = 1; a <= 2; a++) {
		struct sched_pick p = take1(s, 0, 10 * a);

		assert_int_equal(p.attempt, a);
		sched_tick(s, 10 * a + 1.5);
	}
	assert_int_equal(nkind(&R, EV_CANCEL), 2);
	assert_int_equal(nkind(&R, EV_REASSIGNED), 1);
	assert_int_equal(nev(&R, EV_FAILED, -1, 1, 0), 1);
	assert_int_equal(state(s, 1), TASK_FAILED);
	assert_int_equal(sched_open(s), 0);
	assert_int_equal(sched_queued(s), 0);
	take_none(s, 0, 100);
	sched_free(s);
}

static void
test_late_result_for_queued_task(void **st)
{
	struct sched *s = mk(2, NULL);

	(void)st;
	add_n(s, 1, 10);
	sched_worker_up(s, 0);
	sched_worker_up(s, 1);
	take1(s, 0, 0);
	sched_tick(s, 50);
	assert_int_equal(state(s, 1), TASK_QUEUED);
	assert_int_equal(sched_queued(s), 1);
	/* The lost instance reports after all. */
	assert_int_equal(sched_done(s, 0, 1, 1, 12, 51), SCHED_ACCEPTED);
	assert_int_equal(state(s, 1), TASK_DONE);
	assert_int_equal(sched_queued(s), 0);
	assert_int_equal(sched_open(s), 0);
	/* It is not dispatched again, not even as a straggler copy. */
	take_none(s, 1, 52);
	take_none(s, 0, 52);
	add_n(s, 1, 10);
	assert_int_equal(take1(s, 1, 53).tid, 2);
	take_none(s, 0, 53);
	assert_int_equal(sched_done(s, 1, 1, 1, 12, 54), SCHED_DUPLICATE);
	sched_free(s);
}

static void
test_late_result_cancels_new_instance(void **st)
{
	struct sched *s = mk(2, NULL);
	struct sched_pick p;

	(void)st;
	add_n(s, 1, 10);
	sched_worker_up(s, 0);
	sched_worker_up(s, 1);
	take1(s, 0, 0);
	sched_tick(s, 50);
	p = take1(s, 1, 50);
	assert_int_equal(p.attempt, 2);
	R.n = 0;
	assert_int_equal(sched_done(s, 0, 1, 1, 12, 51), SCHED_ACCEPTED);
	assert_int_equal(nev(&R, EV_CANCEL, 1, 1, 2), 1);
	assert_int_equal(R.n, 1);
	assert_int_equal(sched_inflight(s, 1), 0);
	assert_int_equal(sched_done(s, 1, 1, 2, 1, 52), SCHED_DUPLICATE);
	/* Cancelled instance does not expire later either. */
	sched_tick(s, 1000);
	assert_int_equal(R.n, 1);
	sched_free(s);
}

/* ---- straggler copies ---- */

/* NW workers, all up, one task of 100 s, and copies of instances older
 * than 0.5 s. */
static struct sched *
straggler_sched(int nw)
{
	struct sched_params prm;
	struct sched *s;
	int k;

	sched_params_default(&prm);
	prm.dup_min = 0.5;
	s = mk(nw, &prm);
	add_n(s, 1, 100);
	for (k = 0; k < nw; k++)
		sched_worker_up(s, k);
	return s;
}

/* Instances queued behind others on a worker that keeps reporting are
 * not stragglers, however long ago they were sent; once the worker goes
 * quiet, its oldest one is. */
static void
test_no_copy_behind_a_reporting_worker(void **st)
{
	struct sched *s = straggler_sched(2);
	struct sched_pick p[8];
	int n, i;

	(void)st;
	add_n(s, 5, 100);			/* six tasks in all */
	/* Worker 0 learns the tasks are short and takes the rest (a pass
	 * of one take). */
	p[0] = take1(s, 0, 0);
	assert_int_equal(sched_done(s, 0, p[0].tid, p[0].attempt, 1e-4, 0),
			 SCHED_ACCEPTED);
	sched_pass(s, 1);
	n = sched_take(s, 0, 0, p, 8);
	assert_int_equal(n, 5);
	/* It reports a result every 0.6 s: its queue is older than
	 * dup_min, it is not. */
	for (i = 0; i < 3; i++) {
		assert_int_equal(sched_done(s, 0, p[i].tid, p[i].attempt, 1e-4,
					    0.1 + 0.6 * i), SCHED_ACCEPTED);
		take_none(s, 1, 0.5 + 0.6 * i);
	}
	/* Quiet for longer than dup_min: its oldest instance is copied. */
	p[7] = take1(s, 1, 1.9);
	assert_int_equal(p[7].tid, p[3].tid);
	assert_int_equal(p[7].duplicate, 1);
	sched_free(s);
}

static void
test_straggler_duplicate(void **st)
{
	struct sched *s = straggler_sched(3);
	struct sched_pick p;

	(void)st;
	p = take1(s, 0, 0);
	assert_int_equal(p.duplicate, 0);
	/* Not running long enough yet. */
	take_none(s, 1, 0.4);
	p = take1(s, 1, 1.0);
	assert_int_equal(p.tid, 1);
	assert_int_equal(p.attempt, 2);
	assert_int_equal(p.duplicate, 1);
	assert_int_equal(sched_task(s, 1)->ninst, 2);
	assert_int_equal(sched_inflight(s, 1), 1);
	/* Two instances already: no third copy. */
	take_none(s, 2, 5);
	/* The copy wins; the original holder is told to drop it. */
	assert_int_equal(sched_done(s, 1, 1, 2, 1.0, 2), SCHED_ACCEPTED);
	assert_int_equal(nev(&R, EV_CANCEL, 0, 1, 1), 1);
	assert_int_equal(nkind(&R, EV_CANCEL), 1);
	assert_int_equal(sched_inflight(s, 0), 0);
	assert_int_equal(sched_task(s, 1)->ninst, 0);
	assert_int_equal(sched_done(s, 0, 1, 1, 2.0, 3), SCHED_DUPLICATE);
	assert_int_equal(sched_open(s), 0);
	assert_int_equal(nkind(&R, EV_REASSIGNED), 0);
	sched_free(s);
}

static void
test_straggler_original_wins(void **st)
{
	struct sched *s = straggler_sched(2);

	(void)st;
	take1(s, 0, 0);
	assert_int_equal(take1(s, 1, 1).duplicate, 1);
	assert_int_equal(sched_done(s, 0, 1, 1, 1.5, 1.5), SCHED_ACCEPTED);
	assert_int_equal(nev(&R, EV_CANCEL, 1, 1, 2), 1);
	assert_int_equal(nkind(&R, EV_CANCEL), 1);
	assert_int_equal(sched_inflight(s, 1), 0);
	assert_int_equal(sched_done(s, 1, 1, 2, 0.5, 1.6), SCHED_DUPLICATE);
	sched_free(s);
}

static void
test_no_duplicate_while_queue_or_busy(void **st)
{
	struct sched_params prm;
	struct sched *s;
	struct sched_pick p;

	(void)st;
	sched_params_default(&prm);
	prm.dup_min = 0.5;
	s = mk(3, &prm);
	add_n(s, 2, 100);
	sched_worker_up(s, 0);
	sched_worker_up(s, 1);
	take1(s, 0, 0);
	/* The queue is not empty: a queued task, not a copy. */
	p = take1(s, 1, 10);
	assert_int_equal(p.tid, 2);
	assert_int_equal(p.duplicate, 0);
	/* Worker 1 is busy: it gets no copy of task 1. */
	take_none(s, 1, 20);
	/* Worker 2 is idle: it gets a copy of the oldest straggler. */
	sched_worker_up(s, 2);
	p = take1(s, 2, 20);
	assert_int_equal(p.tid, 1);
	assert_int_equal(p.duplicate, 1);
	sched_free(s);
}

static void
test_duplicate_survives_loss_of_original(void **st)
{
	struct sched *s = straggler_sched(2);

	(void)st;
	take1(s, 0, 0);
	assert_int_equal(take1(s, 1, 1).duplicate, 1);
	sched_worker_down(s, 0, "killed", 2);
	/* Still running on worker 1: not requeued. */
	assert_int_equal(state(s, 1), TASK_RUNNING);
	assert_int_equal(sched_queued(s), 0);
	assert_int_equal(nkind(&R, EV_REASSIGNED), 0);
	assert_int_equal(nkind(&R, EV_FAILED), 0);
	assert_int_equal(sched_done(s, 1, 1, 2, 2, 3), SCHED_ACCEPTED);
	assert_int_equal(sched_open(s), 0);
	assert_int_equal(nkind(&R, EV_CANCEL), 0);
	sched_free(s);
}

/* A task whose instance was lost (its worker died running it) gets no
 * copy: copies of a task that kills its worker killed every idle worker
 * in turn, and with a copy always alive the task never failed. */
static void
test_no_copy_of_a_task_that_lost_an_instance(void **st)
{
	struct sched *s = straggler_sched(3);	/* 3 attempts, the default */
	struct sched_pick p;

	(void)st;
	take1(s, 0, 0);
	sched_worker_down(s, 0, "killed", 1);
	assert_int_equal(nkind(&R, EV_REASSIGNED), 1);
	p = take1(s, 1, 1);
	assert_int_equal(p.tid, 1);
	assert_int_equal(p.duplicate, 0);
	/* Long past a straggler's time, worker 2 is idle: no copy. */
	take_none(s, 2, 30);
	sched_worker_down(s, 1, "killed", 31);
	sched_worker_up(s, 0);
	p = take1(s, 0, 32);
	assert_int_equal(p.attempt, 3);
	take_none(s, 2, 60);
	sched_worker_down(s, 0, "killed", 61);
	assert_int_equal(nkind(&R, EV_FAILED), 1);
	assert_int_equal(sched_open(s), 0);
	sched_free(s);
}

/* ---- the TOP-C slow rule ---- */

/* Worker 0 holds task 1 (seq 1); worker 1 runs tasks one at a time with
 * 1 s service times (window 1), so the total window is 2 and a lag of more
 * than 6 sequence numbers makes worker 0 slow. */
static struct sched *
slow_setup(double slow_timeout)
{
	struct sched_params prm;
	struct sched *s;

	sched_params_default(&prm);
	prm.slow_timeout = slow_timeout;
	s = mk(2, &prm);
	add_n(s, 40, 1000);
	sched_worker_up(s, 0);
	sched_worker_up(s, 1);
	assert_int_equal(take1(s, 0, 0).tid, 1);
	return s;
}

static void
run_one(struct sched *s, int w, double now)
{
	struct sched_pick p = take1(s, w, now);

	assert_int_equal(sched_done(s, w, p.tid, p.attempt, 1.0, now),
			 SCHED_ACCEPTED);
}

static void
test_slow_then_hung(void **st)
{
	struct sched *s = slow_setup(60);
	int i;

	(void)st;
	for (i = 2; i <= 7; i++)
		run_one(s, 1, i);
	assert_int_equal(sched_window(s, 0), 1);
	assert_int_equal(sched_window(s, 1), 1);
	sched_tick(s, 7);		/* lag 6: not yet */
	assert_int_equal(nkind(&R, EV_SLOW), 0);
	assert_false(sched_is_slow(s, 0));
	run_one(s, 1, 8);
	sched_tick(s, 8);		/* lag 7 > 6 */
	assert_int_equal(nev(&R, EV_SLOW, 0, 1, 0), 1);
	assert_int_equal(nkind(&R, EV_SLOW), 1);
	assert_true(sched_is_slow(s, 0));
	assert_false(sched_is_slow(s, 1));
	/* Reported once, not at every tick. */
	run_one(s, 1, 9);
	sched_tick(s, 9);
	sched_tick(s, 30);
	sched_tick(s, 68);		/* 60 s after it became slow */
	assert_int_equal(nkind(&R, EV_SLOW), 1);
	assert_int_equal(nkind(&R, EV_HUNG), 0);
	sched_tick(s, 68.5);
	assert_true(nkind(&R, EV_HUNG) >= 1);
	assert_int_equal(nev(&R, EV_HUNG, 0, 1, 0), nkind(&R, EV_HUNG));
	assert_true(R.ev[R.n - 1].seconds >= 68.5 - 1e-9);
	assert_int_equal(nkind(&R, EV_SLOW), 1);
	/* Slowness alone loses nothing. */
	assert_int_equal(nkind(&R, EV_REASSIGNED), 0);
	assert_int_equal(nkind(&R, EV_CANCEL), 0);
	assert_int_equal(sched_inflight(s, 0), 1);
	sched_free(s);
}

static void
test_slow_worker_catches_up(void **st)
{
	struct sched *s = slow_setup(60);
	int i;

	(void)st;
	for (i = 2; i <= 10; i++)
		run_one(s, 1, i);
	sched_tick(s, 10);
	assert_true(sched_is_slow(s, 0));
	assert_int_equal(nkind(&R, EV_SLOW), 1);
	/* Task 1 finally reports; worker 0 takes the next one. */
	assert_int_equal(sched_done(s, 0, 1, 1, 10, 11), SCHED_ACCEPTED);
	sched_tick(s, 11);
	assert_false(sched_is_slow(s, 0));
	run_one(s, 0, 12);
	take1(s, 0, 12);
	sched_tick(s, 12);
	assert_false(sched_is_slow(s, 0));
	/* Long after: no hung report for a worker that is not slow. */
	sched_tick(s, 200);
	assert_int_equal(nkind(&R, EV_HUNG), 0);
	assert_int_equal(nkind(&R, EV_SLOW), 1);
	sched_free(s);
}

static void
test_slow_cleared_by_worker_down(void **st)
{
	struct sched *s = slow_setup(60);
	int i;

	(void)st;
	for (i = 2; i <= 10; i++)
		run_one(s, 1, i);
	sched_tick(s, 10);
	assert_true(sched_is_slow(s, 0));
	sched_worker_down(s, 0, "hung", 11);
	assert_false(sched_is_slow(s, 0));
	assert_int_equal(nev(&R, EV_REASSIGNED, 0, 1, 1), 1);
	sched_worker_up(s, 0);
	assert_false(sched_is_slow(s, 0));
	sched_free(s);
}

/* ---- pause ---- */

static void
test_pause_keeps_inflight(void **st)
{
	struct sched_params prm;
	struct sched *s;
	struct sched_pick p[4];

	(void)st;
	sched_params_default(&prm);
	prm.dup_min = 0.01;
	s = mk(2, &prm);
	add_n(s, 6, 100);
	sched_worker_up(s, 0);
	learn_fast(s, 0, 0);
	assert_int_equal(sched_take(s, 0, 0, p, 2), 2);
	sched_worker_pause(s, 0);
	take_none(s, 0, 1);
	assert_int_equal(sched_inflight(s, 0), 2);
	assert_int_equal(sched_queued(s), 3);
	assert_int_equal(sched_done(s, 0, p[0].tid, 1, 1e-5, 1),
			 SCHED_ACCEPTED);
	take_none(s, 0, 1);
	assert_int_equal(sched_inflight(s, 0), 1);
	/* Its tasks may still be copied to an idle worker. */
	sched_worker_up(s, 1);
	run_one(s, 1, 2);
	run_one(s, 1, 2);
	run_one(s, 1, 2);
	assert_int_equal(sched_queued(s), 0);
	p[2] = take1(s, 1, 5);
	assert_int_equal(p[2].tid, p[1].tid);
	assert_int_equal(p[2].duplicate, 1);
	/* A paused worker that goes idle gets no copies either. */
	assert_int_equal(sched_done(s, 0, p[1].tid, 1, 1, 6), SCHED_ACCEPTED);
	assert_int_equal(nev(&R, EV_CANCEL, 1, p[1].tid, 2), 1);
	add_n(s, 1, 100);
	take_none(s, 0, 7);
	/* worker_up resumes dispatch. */
	sched_worker_up(s, 0);
	assert_int_equal(take1(s, 0, 8).tid, 7);
	sched_free(s);
}

/* ---- randomized property test ---- */

#define PW 3
#define PT 5000

static uint64_t rng_state;

static uint64_t
rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double
urand(void)
{
	return (double)(rng() >> 11) / 9007199254740992.0;
}

static int
irand(int n)
{
	return (int)(rng() % (uint64_t)n);
}

struct inst {
	int worker;
	uint64_t tid;
	uint32_t attempt;
};

struct ilist {
	struct inst *v;
	int n, cap;
};

static void
il_push(struct ilist *l, int worker, uint64_t tid, uint32_t attempt)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->v = ft_realloc(l->v, (size_t)l->cap * sizeof(*l->v));
	}
	l->v[l->n].worker = worker;
	l->v[l->n].tid = tid;
	l->v[l->n].attempt = attempt;
	l->n++;
}

static struct inst
il_take(struct ilist *l, int i)
{
	struct inst x = l->v[i];

	l->v[i] = l->v[--l->n];
	return x;
}

static int
il_find(const struct ilist *l, uint64_t tid, uint32_t attempt)
{
	int i;

	for (i = 0; i < l->n; i++)
		if (l->v[i].tid == tid && l->v[i].attempt == attempt)
			return i;
	return -1;
}

static int
il_has_tid(const struct ilist *l, uint64_t tid)
{
	int i;

	for (i = 0; i < l->n; i++)
		if (l->v[i].tid == tid)
			return 1;
	return 0;
}

struct model {
	struct sched *s;
	struct ilist held[PW];		/* what each worker holds */
	struct ilist late;		/* lost instances that may still report */
	int up[PW], paused[PW], hung[PW];
	uint32_t issued[PT + 1];	/* attempts handed out per task */
	int accepted[PT + 1];
	int failed[PT + 1];
	int ended[PT + 1];
	uint64_t nended;
	long ncancel, nreassigned, ndup, nlate_acc;
};

static struct model *M;

static void
m_reassigned(void *ctx, uint64_t tid, uint32_t attempt, int worker,
	     const char *reason)
{
	struct model *m = ctx;

	(void)worker;
	(void)reason;
	if (tid == 0 || tid > PT || m->ended[tid])
		fail_msg("reassigned task %llu that ended",
			 (unsigned long long)tid);
	if (attempt == 0 || attempt > m->issued[tid])
		fail_msg("reassigned unknown attempt %u of task %llu", attempt,
			 (unsigned long long)tid);
	m->nreassigned++;
}

static void
m_failed(void *ctx, uint64_t tid, const char *reason)
{
	struct model *m = ctx;

	(void)reason;
	if (tid == 0 || tid > PT)
		fail_msg("failed: bad task %llu", (unsigned long long)tid);
	m->failed[tid]++;
	if (m->ended[tid])
		fail_msg("task %llu failed after it ended",
			 (unsigned long long)tid);
	m->ended[tid] = 1;
	m->nended++;
}

static void
m_cancel(void *ctx, int worker, uint64_t tid, uint32_t attempt)
{
	struct model *m = ctx;
	int i;

	if (worker < 0 || worker >= PW)
		fail_msg("cancel for bad worker %d", worker);
	i = il_find(&m->held[worker], tid, attempt);
	if (i < 0)
		fail_msg("cancel of (%llu, %u) that worker %d does not hold",
			 (unsigned long long)tid, attempt, worker);
	il_take(&m->held[worker], i);
	il_push(&m->late, worker, tid, attempt);
	m->ncancel++;
}

static void
m_hung(void *ctx, int worker, uint64_t tid, double seconds)
{
	struct model *m = ctx;

	(void)tid;
	(void)seconds;
	m->hung[worker] = 1;
}

static void
m_check(struct model *m)
{
	uint64_t tid, nq = 0;
	int w;

	assert_int_equal(sched_open(m->s), PT - m->nended);
	for (w = 0; w < PW; w++)
		assert_int_equal(sched_inflight(m->s, w), m->held[w].n);
	for (tid = 1; tid <= PT; tid++) {
		const struct sched_task *t = sched_task(m->s, tid);

		if (t->state == TASK_QUEUED)
			nq++;
		if (m->accepted[tid] && t->state != TASK_DONE)
			fail_msg("task %llu accepted but in state %d",
				 (unsigned long long)tid, t->state);
		if (m->failed[tid] && t->state != TASK_FAILED)
			fail_msg("task %llu failed but in state %d",
				 (unsigned long long)tid, t->state);
		if (!m->ended[tid] && (t->state == TASK_DONE ||
				       t->state == TASK_FAILED))
			fail_msg("task %llu ended without a verdict",
				 (unsigned long long)tid);
	}
	assert_int_equal(sched_queued(m->s), nq);
}

static void
m_take(struct model *m, int w, double now, int max)
{
	struct sched_pick p[16];
	int n, i;

	n = sched_take(m->s, w, now, p, max);
	if (!m->up[w] || m->paused[w])
		assert_int_equal(n, 0);
	assert_true(n >= 0 && n <= max);
	for (i = 0; i < n; i++) {
		uint64_t tid = p[i].tid;

		if (tid == 0 || tid > PT)
			fail_msg("took bad task %llu", (unsigned long long)tid);
		if (m->ended[tid])
			fail_msg("task %llu handed out after it ended",
				 (unsigned long long)tid);
		if (p[i].attempt != m->issued[tid] + 1)
			fail_msg("task %llu: attempt %u, want %u",
				 (unsigned long long)tid, p[i].attempt,
				 m->issued[tid] + 1);
		if (il_has_tid(&m->held[w], tid))
			fail_msg("worker %d got task %llu twice", w,
				 (unsigned long long)tid);
		assert_non_null(p[i].task);
		assert_non_null(p[i].task->spec);
		m->issued[tid] = p[i].attempt;
		m->ndup += p[i].duplicate;
		il_push(&m->held[w], w, tid, p[i].attempt);
	}
}

/* Deliver instance X's result from worker W. */
static void
m_done(struct model *m, int w, struct inst x, double secs, double now)
{
	enum sched_verdict v;

	v = sched_done(m->s, w, x.tid, x.attempt, secs, now);
	if (v == SCHED_ACCEPTED) {
		if (m->ended[x.tid])
			fail_msg("task %llu accepted twice",
				 (unsigned long long)x.tid);
		m->accepted[x.tid]++;
		m->ended[x.tid] = 1;
		m->nended++;
	} else if (v == SCHED_DUPLICATE) {
		if (!m->ended[x.tid])
			fail_msg("task %llu: duplicate verdict while open",
				 (unsigned long long)x.tid);
	} else {
		fail_msg("task %llu attempt %u: verdict %d",
			 (unsigned long long)x.tid, x.attempt, v);
	}
}

static void
m_down(struct model *m, int w, double now)
{
	while (m->held[w].n > 0) {
		struct inst x = il_take(&m->held[w], 0);

		il_push(&m->late, x.worker, x.tid, x.attempt);
	}
	m->up[w] = 0;
	m->paused[w] = 0;
	m->hung[w] = 0;
	sched_worker_down(m->s, w, "random", now);
	assert_int_equal(sched_inflight(m->s, w), 0);
}

static double
service(void)
{
	double u = urand();

	return u < 0.7 ? 1e-5 * (1 + u) : u < 0.95 ? 0.01 * u : 0.3 * u;
}

static void
property_run(uint64_t seed)
{
	struct sched_params prm;
	struct sched_ops ops;
	struct model *m = ft_calloc(1, sizeof(*m));
	double now = 0;
	long step, rounds;
	int w, i;
	uint64_t tid;

	M = m;
	rng_state = seed;
	sched_params_default(&prm);
	prm.max_attempts = 3;
	prm.grace = 0.05;
	prm.slow_timeout = 0.5;
	prm.dup_min = 0.05;
	memset(&ops, 0, sizeof(ops));
	ops.ctx = m;
	ops.reassigned = m_reassigned;
	ops.failed = m_failed;
	ops.cancel = m_cancel;
	ops.hung = m_hung;
	m->s = sched_new(PW, &prm, &ops);
	for (i = 0; i < PT; i++) {
		static const char spec[] = "{\"i\": 0}";

		tid = sched_add(m->s, 1, (uint32_t)i, spec,
				(uint32_t)strlen(spec), 0.02 + urand() * 0.5);
		assert_int_equal(tid, (uint64_t)i + 1);
	}
	for (w = 0; w < PW; w++) {
		sched_worker_up(m->s, w);
		m->up[w] = 1;
	}

	for (step = 0; step < 60000 && sched_open(m->s) > 0; step++) {
		int op = irand(100);

		now += urand() * 0.002;
		w = irand(PW);
		if (op < 40) {
			m_take(m, w, now, 1 + irand(16));
		} else if (op < 78) {
			if (m->held[w].n > 0) {
				int k = urand() < 0.7 ? 0 : irand(m->held[w].n);

				m_done(m, w, il_take(&m->held[w], k), service(),
				       now);
			}
		} else if (op < 84) {
			if (m->late.n > 0) {
				struct inst x = il_take(&m->late,
							irand(m->late.n));
				int before = m->accepted[x.tid];

				/* Usually from its worker, sometimes not. */
				m_done(m, urand() < 0.8 ? x.worker : irand(PW),
				       x, service(), now);
				m->nlate_acc += m->accepted[x.tid] - before;
			}
		} else if (op < 86) {
			if (m->up[w])
				m_down(m, w, now);
		} else if (op < 91) {
			if (!m->up[w] || m->paused[w]) {
				sched_worker_up(m->s, w);
				m->up[w] = 1;
				m->paused[w] = 0;
			}
		} else if (op < 92) {
			if (m->up[w]) {
				sched_worker_pause(m->s, w);
				m->paused[w] = 1;
			}
		} else {
			now += urand() * 0.05;
			sched_tick(m->s, now);
			for (i = 0; i < PW; i++)
				if (m->hung[i] && m->up[i])
					m_down(m, i, now);
		}
		if (step % 2000 == 0)
			m_check(m);
	}
	m_check(m);

	/* Drain: every worker live, every result delivered. */
	for (rounds = 0; rounds < 200000 && sched_open(m->s) > 0; rounds++) {
		for (w = 0; w < PW; w++) {
			if (!m->up[w] || m->paused[w]) {
				sched_worker_up(m->s, w);
				m->up[w] = 1;
				m->paused[w] = 0;
			}
			m_take(m, w, now, 16);
		}
		now += 0.001;
		for (w = 0; w < PW; w++)
			while (m->held[w].n > 0)
				m_done(m, w, il_take(&m->held[w], 0), 1e-5,
				       now);
		sched_tick(m->s, now);
	}
	m_check(m);
	/* Late results after the end are all duplicates. */
	while (m->late.n > 0) {
		struct inst x = il_take(&m->late, 0);

		assert_int_equal(sched_done(m->s, x.worker, x.tid, x.attempt,
					    1, now),
				 SCHED_DUPLICATE);
	}

	assert_int_equal(sched_open(m->s), 0);
	assert_int_equal(sched_queued(m->s), 0);
	for (w = 0; w < PW; w++)
		assert_int_equal(sched_inflight(m->s, w), 0);
	for (tid = 1; tid <= PT; tid++)
		if (m->accepted[tid] + m->failed[tid] != 1)
			fail_msg("seed %llu: task %llu accepted %d, failed %d",
				 (unsigned long long)seed,
				 (unsigned long long)tid, m->accepted[tid],
				 m->failed[tid]);
	/* The run exercised what it is meant to. */
	assert_true(m->nreassigned > 0);
	assert_true(m->ncancel > 0);
	for (tid = 1, i = 0; tid <= PT; tid++)
		i += m->failed[tid];
	print_message("seed %llu: %ld steps, %d failed, reassigned %ld, "
		      "cancelled %ld, copies %ld, late accepted %ld\n",
		      (unsigned long long)seed, step, i, m->nreassigned,
		      m->ncancel, m->ndup, m->nlate_acc);
	sched_free(m->s);
	for (w = 0; w < PW; w++)
		free(m->held[w].v);
	free(m->late.v);
	free(m);
	M = NULL;
}

static void
test_property_exactly_once(void **st)
{
	static const uint64_t seeds[] = { 1, 2, 3, 42, 1234567, 0xdeadbeef };
	size_t i;

	(void)st;
	for (i = 0; i < FT_ARRAY_LEN(seeds); i++)
		property_run(seeds[i]);
}

/* The last long tasks of a phase are not stragglers because the
 * phase's first one has ended: a copy needs twice the idle worker's own
 * last service time. */
static void
test_no_copy_of_equal_peer(void **st)
{
	struct sched_params prm;
	struct sched *s;
	struct sched_pick a, b;
	int i;

	(void)st;
	sched_params_default(&prm);
	prm.dup_min = 0.05;
	s = mk(2, &prm);
	add_n(s, 42, 100);
	sched_worker_up(s, 0);
	sched_worker_up(s, 1);
	/* Short tasks first: the mean service time is small. */
	for (i = 0; i < 40; i++) {
		a = take1(s, i % 2, 0);
		assert_int_equal(sched_done(s, i % 2, a.tid, a.attempt, 0.01, 0),
				 SCHED_ACCEPTED);
	}
	a = take1(s, 0, 10);
	b = take1(s, 1, 10);
	assert_int_equal(sched_done(s, 0, a.tid, a.attempt, 3.0, 13.0),
			 SCHED_ACCEPTED);
	take_none(s, 0, 13.1);		/* 3.1 s: a peer, not a straggler */
	b = take1(s, 0, 16.5);		/* 6.5 s: more than twice */
	assert_int_equal(b.duplicate, 1);
	sched_free(s);
}

/* ---- memory: chunks of ended tasks ---- */

static void
test_reclaim_ended_chunks(void **st)
{
	struct sched_params prm;
	struct sched *s;
	struct sched_pick p[256];
	uint64_t n = 3 * 4096 + 10, done = 0;
	int got;

	(void)st;
	sched_params_default(&prm);
	prm.window_max = 256;
	s = sched_new(1, &prm, NULL);
	add_n(s, (int)n, 10);
	sched_worker_up(s, 0);
	/* Finish the first two chunks' worth and a bit. */
	while (done < 2 * 4096 + 5) {
		got = sched_take(s, 0, 0, p, 1);
		assert_int_equal(got, 1);
		assert_int_equal(sched_done(s, 0, p[0].tid, p[0].attempt, 1e-6,
					    0), SCHED_ACCEPTED);
		done++;
	}
	/* Records stay readable until the owner reclaims. */
	assert_non_null(sched_task(s, 1));
	assert_int_equal(sched_reclaim(s), 2);
	assert_null(sched_task(s, 1));
	assert_null(sched_task(s, 4096));
	assert_non_null(sched_task(s, 2 * 4096 + 1));
	assert_int_equal(sched_reclaim(s), 0);
	/* A late report of a reclaimed task is a duplicate. */
	assert_int_equal(sched_done(s, 0, 1, 1, 0, 0), SCHED_DUPLICATE);
	assert_int_equal(sched_open(s), n - done);
	/* The rest fail: reclaimed chunks are passed over, the last (not
	 * full) chunk stays however its tasks end. */
	sched_fail_open(s, "gone");
	assert_int_equal(sched_open(s), 0);
	assert_int_equal(sched_reclaim(s), 1);
	assert_non_null(sched_task(s, n));
	sched_free(s);
}

/* ---- resources: nodes, wide tasks, reservations, priorities ---- */

/* Two nodes of 4 workers (0-3, 4-7) with GPUS GPUs each, all up. */
static struct sched *
mk_nodes(int gpus)
{
	static const int node_of[8] = { 0, 0, 0, 0, 1, 1, 1, 1 };
	struct sched *s = mk(8, NULL);
	int w;

	sched_set_nodes(s, node_of, 2);
	sched_set_gpus(s, 0, gpus);
	sched_set_gpus(s, 1, gpus);
	for (w = 0; w < 8; w++)
		sched_worker_up(s, w);
	return s;
}

/* Add a task needing CPUS and GPUS at priority PRIO; its ID. */
static uint64_t
add_need(struct sched *s, uint32_t batch, int cpus, int gpus, int prio)
{
	static const char spec[] = "{}";
	struct sched_need need = { .cpus = cpus, .gpus = gpus, .prio = prio };

	return sched_add_need(s, batch, 0, spec, 2, 10, &need);
}

static void
test_wide_task_holds_slots_of_its_node(void **st)
{
	struct sched *s = mk_nodes(0);
	uint64_t wide = add_need(s, 1, 3, 0, 0);
	struct sched_pick p;
	int w, held = 0;

	(void)st;
	add_n(s, 4, 10);
	p = take1(s, 1, 0);
	assert_int_equal(p.tid, wide);
	assert_int_equal(p.cpus, 3);
	for (w = 0; w < 8; w++)
		held += sched_holder(s, w) == 1;
	assert_int_equal(held, 2);		/* two others of node 0 */
	for (w = 0; w < 4; w++)
		if (sched_holder(s, w) == 1 || w == 1)
			take_none(s, w, 0);
	/* The one free worker of node 0 and those of node 1 go on. */
	for (w = 0; w < 4; w++)
		if (sched_holder(s, w) < 0 && w != 1)
			take1(s, w, 0);
	take1(s, 4, 0);
	(void)sched_wake(s);
	assert_int_equal(sched_done(s, 1, p.tid, p.attempt, 1, 1),
			 SCHED_ACCEPTED);
	assert_true(sched_wake(s));
	for (w = 0; w < 8; w++)
		assert_int_equal(sched_holder(s, w), -1);
	sched_free(s);
}

static void
test_gpus_are_never_shared(void **st)
{
	struct sched *s = mk_nodes(2);
	struct sched_pick a, b;

	(void)st;
	add_need(s, 1, 1, 1, 0);
	add_need(s, 1, 1, 1, 0);
	add_need(s, 1, 1, 1, 0);
	a = take1(s, 0, 0);
	b = take1(s, 1, 0);
	assert_int_equal(__builtin_popcountll(a.gpus), 1);
	assert_int_equal(__builtin_popcountll(b.gpus), 1);
	assert_int_equal(a.gpus & b.gpus, 0);
	/* Node 0 has no GPU left: its third worker waits, node 1 runs it. */
	take_none(s, 2, 0);
	assert_int_equal(__builtin_popcountll(take1(s, 4, 0).gpus), 1);
	assert_int_equal(sched_done(s, 0, a.tid, a.attempt, 1, 1),
			 SCHED_ACCEPTED);
	add_need(s, 1, 1, 1, 0);
	assert_int_equal(take1(s, 2, 1).gpus, a.gpus);	/* freed, given again */
	sched_free(s);
}

/* Add a one-slot task of batch 1 needing MEM MiB; its ID. */
static uint64_t
add_mem(struct sched *s, uint32_t mem)
{
	static const char spec[] = "{}";
	struct sched_need need = { .cpus = 1, .mem = mem };

	return sched_add_need(s, 1, 0, spec, 2, 10, &need);
}

/* A node of 1000 MiB runs two tasks of 400 at once, never three; the
 * third starts once one of them ends. */
static void
test_memory_of_a_node(void **st)
{
	struct sched *s = mk_nodes(0);
	struct sched_pick a, b, c;
	int i;

	(void)st;
	sched_set_mem(s, 0, 1000);
	sched_set_mem(s, 1, 0);		/* node 1 counts none */
	for (i = 0; i < 3; i++)
		add_mem(s, 400);
	a = take1(s, 0, 0);
	b = take1(s, 1, 0);
	assert_true(sched_mem_used(s, 0) == 800);
	take_none(s, 2, 0);
	take_none(s, 3, 0);
	(void)sched_wake(s);
	assert_int_equal(sched_done(s, 0, a.tid, a.attempt, 1, 1),
			 SCHED_ACCEPTED);
	assert_true(sched_wake(s));	/* the head may fit now */
	assert_true(sched_mem_used(s, 0) == 400);
	c = take1(s, 2, 1);
	assert_true(sched_mem_used(s, 0) == 800);
	/* A worker down gives its memory back. */
	sched_worker_down(s, 1, "gone", 2);
	assert_true(sched_mem_used(s, 0) == 400);
	(void)b;
	(void)c;
	sched_free(s);
}

/* A worker holding a window of tasks is charged the largest of them
 * (it runs one at a time), and plain tasks count nothing. */
static void
test_memory_of_a_window(void **st)
{
	struct sched *s = mk(1, NULL);
	struct sched_pick p[8];
	int n, i;

	(void)st;
	sched_worker_up(s, 0);
	sched_set_mem(s, 0, 1000);
	add_n(s, 2, 10);
	for (i = 0; i < 4; i++)
		add_mem(s, i == 2 ? 300 : 100);
	learn_fast(s, 0, 0);	/* a plain task: its window opens */
	learn_fast(s, 0, 0);
	assert_true(sched_mem_used(s, 0) == 0);
	n = sched_take(s, 0, 0, p, 8);
	assert_int_equal(n, 4);
	assert_true(sched_mem_used(s, 0) == 300);
	for (i = 0; i < n; i++) {
		assert_int_equal(sched_done(s, 0, p[i].tid, p[i].attempt,
					    1e-5, 0), SCHED_ACCEPTED);
		assert_true(sched_mem_used(s, 0) == (i < 2 ? 300 :
						     i < 3 ? 100 : 0));
	}
	sched_free(s);
}

/* A wide task's memory is its node's while it runs; a head that does
 * not fit keeps a node for itself. */
static void
test_memory_of_wide_tasks(void **st)
{
	struct sched *s = mk_nodes(0);
	struct sched_need need = { .cpus = 2, .mem = 900 };
	struct sched_wait why[2];
	struct sched_pick a, b;

	(void)st;
	sched_set_mem(s, 0, 1000);
	sched_set_mem(s, 1, 500);
	add_mem(s, 200);
	a = take1(s, 0, 0);
	sched_add_need(s, 1, 1, "{}", 2, 10, &need);
	/* Only node 0 could hold it, and not beside the task of 200. */
	take_none(s, 1, 0);
	take_none(s, 4, 0);
	assert_int_equal(sched_waiting(s, why, 2), 1);
	assert_int_equal(why[0].mem, 900);
	assert_int_equal(why[0].node, 0);
	assert_int_equal(sched_done(s, 0, a.tid, a.attempt, 1, 1),
			 SCHED_ACCEPTED);
	b = take1(s, 1, 1);
	assert_int_equal(b.cpus, 2);
	assert_true(sched_mem_used(s, 0) == 900);
	sched_free(s);
}

/* Add a one-slot task of batch 1 asking TREQ seconds; its ID. */
static uint64_t
add_time(struct sched *s, uint32_t treq)
{
	static const char spec[] = "{}";
	struct sched_need need = { .cpus = 1, .treq = treq };

	return sched_add_need(s, 1, 0, spec, 2, 10, &need);
}

/* A task asking more time than a node has left starts elsewhere, or
 * waits without holding up the tasks behind it; sched_unmet tells what
 * no node can give. */
static void
test_time_requests(void **st)
{
	struct sched *s = mk_nodes(0);
	struct sched_wait why[2];
	uint64_t a, b, c, d;

	(void)st;
	sched_set_end(s, 0, 100);
	sched_set_end(s, 1, 1000);
	a = add_time(s, 300);
	b = add_n(s, 1, 10);
	assert_int_equal(take1(s, 0, 0).tid, b);	/* not A: 100 s left */
	take_none(s, 1, 0);
	assert_int_equal(take1(s, 4, 0).tid, a);
	assert_int_equal(sched_unmet(s, 0), 0);
	/* No node has 2000 s: it waits, plain tasks go on, a new node is
	 * asked for. */
	c = add_time(s, 2000);
	add_n(s, 1, 10);
	take1(s, 1, 1);
	take_none(s, 2, 1);
	assert_int_equal(sched_unmet(s, 1), 2000);
	assert_int_equal(sched_waiting(s, why, 2), 1);
	assert_int_equal(why[0].treq, 2000);
	assert_int_equal(why[0].why, SCHED_WAIT_NO_NODE);
	/* Time passes: node 1's 1000 s are 200 at 800, too few for 300. */
	d = add_time(s, 300);
	take_none(s, 5, 800);
	/* A node with no end takes them. */
	sched_set_end(s, 0, 0);
	assert_int_equal(sched_unmet(s, 2), 0);
	assert_int_equal(take1(s, 2, 2).tid, d);
	assert_int_equal(take1(s, 3, 2).tid, c);
	sched_free(s);
}

/* Tasks that need memory, and tasks that write output files of their
 * own, get no straggler copies; a plain task does. */
static void
test_no_copy_of_a_memory_task(void **st)
{
	struct sched *s = mk_nodes(0);
	struct sched_need files = { .cpus = 1, .nocopy = 1 };

	(void)st;
	sched_set_mem(s, 0, 1000);
	add_mem(s, 100);
	take1(s, 0, 0);
	take_none(s, 1, 100);
	sched_add_need(s, 1, 1, "{}", 2, 10, &files);
	take1(s, 2, 100);
	take_none(s, 3, 200);
	add_n(s, 1, 10);
	take1(s, 4, 200);
	assert_int_equal(take1(s, 5, 300).duplicate, 1);
	sched_free(s);
}

/* The stream of one-slot tasks does not overtake a task needing a whole
 * node for ever: a node is kept for it and drains. */
static void
test_reservation_drains_one_node(void **st)
{
	struct sched *s = mk_nodes(0);
	struct sched_pick run[8], p;
	struct sched_wait why[4];
	uint64_t wide;
	int w;

	(void)st;
	add_n(s, 8, 10);
	for (w = 0; w < 8; w++)
		run[w] = take1(s, w, 0);
	wide = add_need(s, 2, 4, 0, 0);
	add_n(s, 20, 10);
	/* Worker 0 ends its task: node 0 is kept for the wide task, so it
	 * takes nothing; node 1 goes on with one-slot tasks. */
	assert_int_equal(sched_done(s, 0, run[0].tid, run[0].attempt, 1, 1),
			 SCHED_ACCEPTED);
	take_none(s, 0, 1);
	assert_int_equal(sched_waiting(s, why, 4), 1);
	assert_int_equal(why[0].why, SCHED_WAIT_RESERVED);
	assert_int_equal(why[0].node, 0);
	assert_int_equal(sched_done(s, 4, run[4].tid, run[4].attempt, 1, 1),
			 SCHED_ACCEPTED);
	assert_int_not_equal(take1(s, 4, 1).tid, wide);
	for (w = 1; w < 3; w++) {
		assert_int_equal(sched_done(s, w, run[w].tid, run[w].attempt,
					    1, 2), SCHED_ACCEPTED);
		take_none(s, w, 2);
	}
	assert_int_equal(sched_done(s, 3, run[3].tid, run[3].attempt, 1, 3),
			 SCHED_ACCEPTED);
	p = take1(s, 3, 3);
	assert_int_equal(p.tid, wide);
	assert_int_equal(sched_waiting(s, why, 4), 0);
	sched_free(s);
}

static void
test_priority_then_fifo(void **st)
{
	struct sched *s = mk(1, NULL);
	uint64_t lo1 = add_need(s, 1, 1, 0, 0), lo2 = add_need(s, 1, 1, 0, 0);
	uint64_t hi1 = add_need(s, 2, 1, 0, 5), hi2 = add_need(s, 2, 1, 0, 5);
	uint64_t neg = add_need(s, 3, 1, 0, -3);
	uint64_t want[] = { hi1, hi2, lo1, lo2, neg };
	size_t i;

	(void)st;
	sched_worker_up(s, 0);
	for (i = 0; i < 5; i++) {
		struct sched_pick p = take1(s, 0, (double)i);

		assert_int_equal(p.tid, want[i]);
		assert_int_equal(sched_done(s, 0, p.tid, p.attempt, 1, (double)i),
				 SCHED_ACCEPTED);
	}
	sched_free(s);
}

/* The worker of a wide task dies: the task waits again (first in line),
 * its held workers and GPUs are free.  A held worker that dies and comes
 * back stays held while the task runs. */
static void
test_wide_task_and_worker_deaths(void **st)
{
	struct sched *s = mk_nodes(1);
	uint64_t wide = add_need(s, 1, 2, 1, 0);
	struct sched_pick p = take1(s, 0, 0);
	int other = sched_holder(s, 1) == 0 ? 1 : sched_holder(s, 2) == 0 ? 2 : 3;

	(void)st;
	assert_int_equal(p.tid, wide);
	assert_int_equal(sched_holder(s, other), 0);
	sched_worker_down(s, other, "killed", 1);
	sched_worker_up(s, other);
	take_none(s, other, 1);
	sched_worker_down(s, 0, "killed", 2);
	assert_int_equal(nev(&R, EV_REASSIGNED, 0, wide, 1), 1);
	assert_int_equal(sched_holder(s, other), -1);
	p = take1(s, 1, 3);
	assert_int_equal(p.tid, wide);
	assert_int_equal(p.attempt, 2);
	assert_int_equal(p.gpus, 1);
	sched_free(s);
}

/* A node that loses slots (down, drained) no longer holds what it
 * cannot: the wide task waits, and says why. */
static void
test_wait_reason_when_slots_go(void **st)
{
	struct sched *s = mk_nodes(0);
	struct sched_wait why[2];
	uint64_t wide;
	int w;

	(void)st;
	for (w = 1; w < 8; w++)
		if (w != 4)
			sched_worker_pause(s, w);
	wide = add_need(s, 1, 2, 0, 0);
	take_none(s, 0, 0);
	take_none(s, 4, 0);
	assert_int_equal(sched_waiting(s, why, 2), 1);
	assert_int_equal(why[0].why, SCHED_WAIT_NO_NODE);
	sched_worker_resume(s, 5);
	(void)sched_wake(s);
	assert_int_equal(take1(s, 4, 1).tid, wide);
	sched_free(s);
}

/* No straggler copy of a wide task: a copy would run without its slots
 * and GPUs. */
static void
test_no_copy_of_a_wide_task(void **st)
{
	struct sched *s = mk_nodes(1);
	struct sched_pick p;

	(void)st;
	add_need(s, 1, 1, 1, 0);
	p = take1(s, 0, 0);
	assert_int_equal(p.gpus, 1);
	take_none(s, 5, 100);
	sched_free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fifo_order_and_ids),
		cmocka_unit_test(test_take_respects_max),
		cmocka_unit_test(test_reclaim_ended_chunks),
		cmocka_unit_test(test_no_copy_of_equal_peer),
		cmocka_unit_test(test_window_grows_with_tiny_tasks),
		cmocka_unit_test(test_wide_window_refilled_by_halves),
		cmocka_unit_test(test_window_opens_fast_after_long_tasks),
		cmocka_unit_test(test_window_stays_one_for_long_tasks),
		cmocka_unit_test(test_pass_spreads_evenly),
		cmocka_unit_test(test_pass_skips_down_workers),
		cmocka_unit_test(test_no_copy_behind_a_reporting_worker),
		cmocka_unit_test(test_round_trip_widens_window),
		cmocka_unit_test(test_new_batch_probe_opens_windows),
		cmocka_unit_test(test_new_batch_trial_before_windows_open),
		cmocka_unit_test(test_new_batch_trial_waits_no_longer_than_the_hold),
		cmocka_unit_test(test_new_batch_trial_counts_each_worker_once),
		cmocka_unit_test(test_new_batch_no_trial_for_a_task_each),
		cmocka_unit_test(test_window_reset_on_worker_up),
		cmocka_unit_test(test_done_once_then_duplicate),
		cmocka_unit_test(test_duplicate_from_other_attempt),
		cmocka_unit_test(test_unknown_reports),
		cmocka_unit_test(test_worker_down_requeues_at_front),
		cmocka_unit_test(test_max_attempts_fails_once),
		cmocka_unit_test(test_interrupt_charges_nobody),
		cmocka_unit_test(test_deadline_expiry_requeues),
		cmocka_unit_test(test_deadline_fail_after_max_attempts),
		cmocka_unit_test(test_late_result_for_queued_task),
		cmocka_unit_test(test_late_result_cancels_new_instance),
		cmocka_unit_test(test_straggler_duplicate),
		cmocka_unit_test(test_straggler_original_wins),
		cmocka_unit_test(test_no_duplicate_while_queue_or_busy),
		cmocka_unit_test(test_duplicate_survives_loss_of_original),
		cmocka_unit_test(test_no_copy_of_a_task_that_lost_an_instance),
		cmocka_unit_test(test_slow_then_hung),
		cmocka_unit_test(test_slow_worker_catches_up),
		cmocka_unit_test(test_slow_cleared_by_worker_down),
		cmocka_unit_test(test_pause_keeps_inflight),
		cmocka_unit_test(test_property_exactly_once),
		cmocka_unit_test(test_wide_task_holds_slots_of_its_node),
		cmocka_unit_test(test_gpus_are_never_shared),
		cmocka_unit_test(test_reservation_drains_one_node),
		cmocka_unit_test(test_priority_then_fifo),
		cmocka_unit_test(test_wide_task_and_worker_deaths),
		cmocka_unit_test(test_wait_reason_when_slots_go),
		cmocka_unit_test(test_no_copy_of_a_wide_task),
		cmocka_unit_test(test_memory_of_a_node),
		cmocka_unit_test(test_memory_of_a_window),
		cmocka_unit_test(test_memory_of_wide_tasks),
		cmocka_unit_test(test_no_copy_of_a_memory_task),
		cmocka_unit_test(test_time_requests),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
