/* farm: the parts of the master wired together (see farm.h). */
#include "farm.h"

#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "gangs.h"
#include "health.h"
#include "log.h"
#include "reaper.h"
#include "registry.h"
#include "subs.h"
#include "util.h"

#define STOP_WAIT 5.0		/* seconds workers get to say bye */

/* ---- the scheduler's news ---- */

static void
on_reassigned(void *ctx, uint64_t tid, uint32_t attempt, int worker,
	      const char *reason)
{
	struct master *m = ctx;
	const struct sched_task *t = sched_task(m->sched, tid);

	ev_task_reassigned(&m->events, t->batch, t->index, attempt, worker,
			   worker >= 0 && worker < m->nworkers ?
			   m->workers[worker].host : "", reason);
	stats_type(&m->stats, t->kind)->reassigned++;
	batches_reassigned(&m->batches, t->batch);
}

/* A: batch << 32 | index, B: attempts. */
static void
deferred_fail(void *ctx, uint64_t a, uint64_t b, const char *reason)
{
	struct master *m = ctx;

	batches_fail(&m->batches, (uint32_t)(a >> 32), (uint32_t)a,
		     (uint32_t)b, reason);
}

/* A failed task ends its batch, or moves its job on: after the
 * scheduler's call. */
static void
on_failed(void *ctx, uint64_t tid, const char *reason)
{
	struct master *m = ctx;
	const struct sched_task *t = sched_task(m->sched, tid);
	char buf[512];

	stats_type(&m->stats, t->kind)->failed++;
	reason = health_task_failed(m, tid, reason, buf, sizeof(buf));
	defer_call(&m->defer, deferred_fail,
		   (uint64_t)t->batch << 32 | t->index, t->attempts, reason);
}

static void
on_cancel(void *ctx, int worker, uint64_t tid, uint32_t attempt)
{
	struct master *m = ctx;

	registry_cancel(m, &m->workers[worker], tid, attempt);
}

static void
on_slow(void *ctx, int worker, uint64_t tid)
{
	struct master *m = ctx;

	registry_slow(m, &m->workers[worker], tid);
}

static void
on_hung(void *ctx, int worker, uint64_t tid, double seconds)
{
	struct master *m = ctx;
	char why[128];

	snprintf(why, sizeof(why), "slow for %.1f s on one task (id %llu)",
		 seconds, (unsigned long long)tid);
	registry_doom(m, &m->workers[worker], why);
}

/* ---- the registry's news ---- */

static void
on_result(void *ctx, struct worker *w, uint64_t tid,
	  const struct proto_result *r)
{
	struct master *m = ctx;
	const struct sched_task *t = sched_task(m->sched, tid);
	struct type_stats *ts = stats_type(&m->stats, t ? t->kind : -1);

	if (r->ok)
		ts->done++;
	else
		ts->failed++;
	hist_observe(&ts->run, r->seconds);
	health_task_result(m, tid, w, r->ok);
	batches_record(&m->batches, tid, w->id, w->host, r);
}

static void
on_worker_dying(void *ctx, struct worker *w)
{
	health_worker_dying(ctx, w);
}

static void
on_worker_failed(void *ctx, struct worker *w)
{
	health_worker_failed(ctx, w);
}

/* ---- node health's news ---- */

static void
on_reboot_ended(void *ctx, struct node *n, int ok, const char *why)
{
	commands_reboot_ended(ctx, n, ok, why);
}

static void
on_state_saved(void *ctx, uint64_t gen, int err)
{
	commands_state_saved(ctx, gen, err);
}

/* ---- the batches' news ---- */

static void
on_queued(void *ctx)
{
	registry_dispatch_all(ctx);
}

static void
on_finished(void *ctx, struct batch *b)
{
	commands_batch_done(ctx, b);
}

static void
on_results(void *ctx, long id)
{
	struct master *m = ctx;

	subs_results(m->subs, id);
}

static void
on_forget(void *ctx, long id, char *dir, long last_id)
{
	(void)id;
	reaper_remove(ctx, dir, last_id);
}

static void
on_gang(void *ctx, uint32_t batch, uint32_t index, const json_t *job)
{
	gangs_submit(ctx, batch, index, job);
}

static void
on_gang_cancel(void *ctx, uint32_t batch)
{
	gangs_cancel(ctx, batch);
}

/* ---- the gangs' news ---- */

static void
on_gang_ended(void *ctx, uint32_t batch, uint32_t index, uint32_t attempt,
	      int ok, double seconds, json_t *figures, const char *reason)
{
	struct master *m = ctx;

	batches_gang_ended(&m->batches, batch, index, attempt, ok, seconds,
			   figures, reason);
}

/* The scheduler learns which node each worker is on and each node's
 * GPUs. */
static void
sched_nodes(struct master *m)
{
	int *node_of = ft_calloc((size_t)m->nworkers + 1, sizeof(int)), i;

	for (i = 0; i < m->nworkers; i++)
		node_of[i] = m->workers[i].node;
	sched_set_nodes(m->sched, node_of, m->cfg.nnodes);
	for (i = 0; i < m->cfg.nnodes; i++)
		sched_set_gpus(m->sched, i, m->cfg.nodes[i].ngpus);
	free(node_of);
}

void
farm_init(struct master *m)
{
	struct sched_params sp;
	struct sched_ops so = {
		.ctx = m, .reassigned = on_reassigned, .failed = on_failed,
		.cancel = on_cancel, .slow = on_slow, .hung = on_hung,
	};
	struct registry_ops ro = {
		.ctx = m, .result = on_result, .dying = on_worker_dying,
		.failed = on_worker_failed,
	};
	struct health_ops ho = {
		.ctx = m, .reboot_ended = on_reboot_ended,
		.saved = on_state_saved,
	};
	struct batches_ops bo = {
		.ctx = m, .queued = on_queued, .finished = on_finished,
		.gang = on_gang, .gang_cancel = on_gang_cancel,
		.results = on_results, .forget = on_forget,
	};
	struct gangs_ops go = { .ctx = m, .ended = on_gang_ended };

	defer_init(&m->defer, m);
	stats_init(&m->stats);
	sched_params_default(&sp);
	sp.max_attempts = m->cfg.max_attempts;
	sp.slow_timeout = m->cfg.slow_timeout;
	sp.grace = m->cfg.heartbeat + m->cfg.heartbeat_timeout + 1;
	m->sched = sched_new(m->cfg.nworkers, &sp, &so);
	registry_init(m, &ro);
	sched_nodes(m);
	health_init(m, &ho);
	batches_init(&m->batches, &m->cfg, &m->plugins, m->sched, &m->events,
		     &m->store, &bo);
	m->batches.stats = &m->stats;
	gangs_init(m, &go);
}

/* ---- the store's news ---- */

static void
on_synced(void *ctx)
{
	struct master *m = ctx;

	batches_flush(&m->batches);	/* batches that waited for the disk */
	commands_adds_durable(m);	/* and adds */
}

static int
on_retry(void *ctx)
{
	int rc = farm_flush(ctx);

	if (health_retry_save(ctx) == -1)
		rc = -1;
	return rc;
}

static void
on_store_changed(void *ctx, int failed, double seconds)
{
	struct master *m = ctx;

	if (failed) {
		ev_store_failed(&m->events, m->store.what, m->store.path,
				strerror(m->store.err));
		return;
	}
	ev_store_recovered(&m->events, seconds,
			   (long long)m->store.episode_failures);
	registry_dispatch_all(m);
}

int
farm_open_store(struct master *m, char *err, size_t n)
{
	struct store_ops so = {
		.ctx = m, .synced = on_synced, .retry = on_retry,
		.changed = on_store_changed,
	};

	if (store_init(&m->store, &m->cfg, m->loop, &so, err, n) == -1)
		return -1;
	events_set_store(&m->events, &m->store);
	return 0;
}

void
farm_free(struct master *m)
{
	batches_close(&m->batches);
	defer_clear(&m->defer);
	health_free(m);
	registry_free(m);
	sched_free(m->sched);
	m->sched = NULL;
}

/* Stopping: tell the workers, then wait for their byes (bounded).
 * Returns 1 once done. */
static int
cron_stop(struct master *m, double now)
{
	if (m->stopping == 1) {
		registry_stop_all(m);
		m->stop_deadline = now + STOP_WAIT;
		m->stopping = 2;
		return 0;
	}
	if (registry_all_stopped(m) || now > m->stop_deadline) {
		registry_kill_leftovers(m);
		return 1;
	}
	return 0;
}

int
farm_cron(struct master *m, double now)
{
	sched_tick(m->sched, now);
	defer_run(&m->defer);		/* what the tick found, before going on */
	registry_cron(m, now);
	health_cron(m, now);
	registry_dispatch_all(m);
	defer_run(&m->defer);
	sched_reclaim(m->sched);	/* nobody needs the ended tasks now */
	gangs_cron(m, now);
	defer_run(&m->defer);
	subs_tick(m->subs, now);
	commands_adds_durable(m);
	return m->stopping ? cron_stop(m, now) : 0;
}

int
farm_busy(struct master *m)
{
	return sched_open(m->sched) > 0 || gangs_busy() || registry_starting(m) ||
	       health_busy(m) || m->stopping;
}

int
farm_flush(struct master *m)
{
	/* Results first: an event never reaches the disk before the result
	 * line it tells of. */
	int rc = batches_flush(&m->batches);

	if (events_flush(&m->events) == -1)
		rc = -1;
	return rc;
}
