/* farm: the parts of the master wired together (see farm.h). */
#include "farm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents.h"
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

static void
on_node_leaving(void *ctx, int node, const char *why)
{
	struct master *m = ctx;

	health_leaving(m, &m->nodes[node], why);
}

static void
on_node_left(void *ctx, int node)
{
	struct master *m = ctx;

	health_left(m, &m->nodes[node]);
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
		.failed = on_worker_failed, .leaving = on_node_leaving,
		.left = on_node_left,
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

/* ---- nodes that join ---- */

/* Joined nodes now. */
static int
joined_nodes(const struct master *m)
{
	int i, k = 0;

	for (i = 0; i < m->cfg.nnodes; i++)
		k += m->cfg.nodes[i].joined;
	return k;
}

/* The index of the node J names: known (its next incarnation; it may
 * be), or new.  -1 with ERR when it may not join. */
static int
node_for(struct master *m, const struct agent_join *j, char *err, size_t n)
{
	int i;

	for (i = 0; i < m->cfg.nnodes; i++) {
		const struct agent *a = &m->agents[i];

		if (strcmp(m->cfg.nodes[i].name, j->name) != 0)
			continue;
		if (!m->cfg.nodes[i].joined) {
			ft_snprintf(err, n, "node %s is one of the config's "
				    "nodes (started over MPI): join under "
				    "another --name", j->name);
			return -1;
		}
		/* Its own earlier connection (lost before we noticed) makes
		 * way; another agent of that name does not. */
		if ((a->state == A_UP || a->state == A_STARTING ||
		     a->state == A_STOPPING) &&
		    (a->pid != j->pid || a->start != j->start ||
		     strcmp(a->host, j->host) != 0)) {
			ft_snprintf(err, n, "node %s is in the farm already "
				    "(its agent, pid %d on %s, is up): join "
				    "under another --name", j->name,
				    (int)a->pid, a->host);
			return -1;
		}
		ft_config_rejoin(&m->cfg, i, j->host, j->slots, j->gpus,
				 j->ngpus);
		return i;
	}
	if (joined_nodes(m) >= m->cfg.join.max_nodes) {
		ft_snprintf(err, n, "the farm has %d joined nodes, its "
			    "join.max_nodes", m->cfg.join.max_nodes);
		return -1;
	}
	i = ft_config_add_joined(&m->cfg, j->name, j->host, j->slots,
				 j->gpus, j->ngpus);
	if (sched_add_node(m->sched) != i)
		abort();	/* the scheduler's nodes are the config's */
	agents_grow(m);
	health_grow(m);
	return i;
}

int
farm_join(struct master *m, const struct agent_join *j, int fd,
	  const void *rest, size_t n, char *err, size_t len)
{
	struct node *nd;
	char why[64];
	int node;

	if (m->stopping) {
		ft_snprintf(err, len, "the master is stopping");
		return -1;
	}
	if ((node = node_for(m, j, err, len)) == -1)
		return -1;
	nd = &m->nodes[node];
	/* Its own connection before this one, lost before we noticed. */
	agents_fail(m, node, "its agent joined again");
	sched_set_gpus(m->sched, node, j->ngpus);
	registry_join_node(m, node, j->slots);
	ev_node_joined(&m->events, nd->name, j->host, (int)j->pid, j->slots,
		       *j->alloc ? j->alloc : NULL,
		       m->agents[node].incarnation + 1);
	log_info("node %s joined from %s (agent pid %d, %d slots%s%s)",
		 nd->name, j->host, (int)j->pid, j->slots,
		 *j->alloc ? ", Slurm job " : "", j->alloc);
	snprintf(why, sizeof(why), "its agent joined (pid %d)", (int)j->pid);
	health_joined(m, nd, why);
	agents_joined(m, node, j, fd, rest, n);
	return 0;
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

/* The stop begins: say why (master_stopping), and name each worker's
 * first instance, the one that may have started, as interrupted: its
 * task runs again under the next master (the replay), charged to
 * nobody.  Written at once: a job that ends kills the master soon. */
static void
stop_begins(struct master *m)
{
	char why[200];
	uint64_t tid;
	uint32_t attempt;
	int i, out = 0;

	if (m->stop_reason[0] == '\0')
		snprintf(m->stop_reason, sizeof(m->stop_reason), "stop");
	for (i = 0; i < m->nworkers; i++)
		out += sched_inflight(m->sched, i);
	ev_master_stopping(&m->events, m->stop_reason, out);
	snprintf(why, sizeof(why), "the master stops: %s", m->stop_reason);
	for (i = 0; i < m->nworkers; i++) {
		const struct sched_task *t;

		if (!sched_first(m->sched, i, &tid, &attempt) ||
		    (t = sched_task(m->sched, tid)) == NULL)
			continue;
		ev_task_interrupted(&m->events, t->batch, t->index, attempt,
				    i, m->workers[i].host, why);
	}
	farm_flush(m);
}

/* Stopping: tell the workers, then wait for their byes (bounded).
 * Returns 1 once done. */
static int
cron_stop(struct master *m, double now)
{
	if (m->stopping == 1) {
		stop_begins(m);
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
