/* health: node health, the ladder, blame and drains (see health.h). */
#include "health.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents.h"
#include "blame.h"
#include "bmc.h"
#include "hosts.h"
#include "ladder.h"
#include "log.h"
#include "opstate.h"
#include "registry.h"

/* Seconds without a failure after which a suspect node whose workers are
 * all up is up again. */
#define HEALTH_QUIET 30.0
#define START_POWER_WAIT 15.0	/* the longest an agent waits for its
				 * node's first power status */
#define SAVE_EVERY 1.0		/* the cron saves what changed this often */

static struct blame *blame;
static struct health_ops hops;
static const char **names;	/* the nodes' names, by index */

/* The nodes' state on disk (opstate.h), once restored. */
static struct opstate *disk;
static struct opstate_rec *recs;	/* as last saved: one per node of the
					 * config (and joined), then those
					 * carried over */
static size_t nrecs;			/* all of them */
static size_t nnode_recs;		/* of them, the nodes' */
static struct opstate_read found;	/* what the file held (owns the
					 * carried records' names) */
static double wall_offset;		/* ft_wall() - ft_now() */
static double save_at;			/* the cron's next save */

static void persist(struct master *m);
static void rec_of(const struct node *n, struct opstate_rec *r);
static void leave_progress(struct master *m, struct node *n, double now);
static void restore_node(struct master *m, struct node *n,
			 const struct opstate_rec *r, enum nstate was);

void
health_init(struct master *m, const struct health_ops *ops)
{
	int i;

	m->nodes = ft_calloc((size_t)m->cfg.nnodes + 1, sizeof(*m->nodes));
	names = ft_calloc((size_t)m->cfg.nnodes + 1, sizeof(*names));
	for (i = 0; i < m->cfg.nnodes; i++) {
		node_init(&m->nodes[i], i, m->cfg.nodes[i].name);
		names[i] = m->cfg.nodes[i].name;
	}
	blame = blame_new();
	hops = *ops;
	bmc_init(m);
	ladder_init(m, health_ladder_ended);
}

void
health_free(struct master *m)
{
	opstate_close(disk);
	disk = NULL;
	free(recs);
	recs = NULL;
	nrecs = 0;
	opstate_read_free(&found);
	ladder_free(m);
	bmc_free(m);
	blame_free(blame);
	blame = NULL;
	free(names);
	names = NULL;
	free(m->nodes);
	m->nodes = NULL;
}

struct node *
health_node(struct master *m, const char *name)
{
	int i;

	for (i = 0; name && i < m->cfg.nnodes; i++)
		if (strcmp(m->nodes[i].name, name) == 0)
			return &m->nodes[i];
	return NULL;
}

/* ---- the node's workers ---- */

/* Hold N's workers unless N is in service; released ones get tasks. */
static void
sync_hold(struct master *m, struct node *n)
{
	int k;

	for (k = 0; k < m->nworkers; k++)
		if (m->workers[k].node == n->id)
			registry_hold(m, &m->workers[k], !node_serves(n));
}

/* Move N to TO for WHY, its workers held or released to match. */
static void
set_state(struct master *m, struct node *n, enum nstate to, const char *why)
{
	node_set(n, to, why, &m->events);
	sync_hold(m, n);
}

static void
retire_workers(struct master *m, struct node *n, const char *why)
{
	int k;

	for (k = 0; k < m->nworkers; k++)
		if (m->workers[k].node == n->id)
			registry_retire(m, &m->workers[k], why);
}

/* Task instances N's workers hold. */
static int
node_inflight(const struct master *m, const struct node *n)
{
	int k, sum = 0;

	for (k = 0; k < m->nworkers; k++)
		if (m->workers[k].node == n->id)
			sum += sched_inflight(m->sched, k);
	return sum;
}

/* Is any worker of N running, starting or due to start? */
static int
node_has_workers(const struct master *m, const struct node *n)
{
	int k;

	for (k = 0; k < m->nworkers; k++) {
		const struct worker *w = &m->workers[k];

		if (w->node == n->id && (worker_live(w) || w->respawn_due ||
					 w->state == W_SPAWNING))
			return 1;
	}
	return 0;
}

/* ---- the ladder's decisions ---- */

/* Are N's failures and reboots old enough to be forgotten (a window
 * without any, N in service or drained)? */
static int
stale(const struct master *m, const struct node *n, double now)
{
	return (n->strikes || n->episode_reboots) &&
	       now - n->last_strike > m->cfg.failure_window &&
	       (node_serves(n) || n->state == N_DRAINING ||
		n->state == N_DRAINED);
}

/* Forget N's failures and reboots after a window without any. */
static void
forget(struct master *m, struct node *n, double now)
{
	if (!stale(m, n, now))
		return;
	n->strikes = 0;
	n->episode_reboots = 0;
	n->probe_delay = 0;
	if (n->state == N_SUSPECT)
		set_state(m, n, N_UP, "no failure for a while");
}

/* Has N no failure charged to it (is it healthy but for this death)?
 * Changes nothing (it is asked in the middle of a death). */
static int
healthy(const struct master *m, const struct node *n)
{
	if (n->strikes > 0 && !stale(m, n, ft_now()))
		return 0;
	return n->state == N_UP || n->state == N_SUSPECT ||
	       n->state == N_DRAINING || n->state == N_DRAINED;
}

/* Give up on N for WHY: INACTIVE, its workers retired, a probe later. */
static void
give_up(struct master *m, struct node *n, const char *why)
{
	double d = n->probe_delay > 0 ? fmin(2 * n->probe_delay,
					     m->cfg.probe_max)
				      : m->cfg.probe_min;

	ladder_abort(m, n);
	n->reboot_wanted = 0;
	n->probe_delay = d;
	n->probe_at = ft_now() + d;
	set_state(m, n, N_INACTIVE, why);
	retire_workers(m, n, "node inactive");
	if (!m->static_world)
		log_info("node %s: probed again in %.0f s", n->name, d);
}

void
health_hosts_left_out(struct master *m)
{
	char (*why)[160], text[sizeof(m->nodes[0].reason)];
	int i;

	if (!m->cfg.remote || m->static_world)
		return;
	why = ft_calloc((size_t)m->cfg.nnodes, sizeof(*why));
	hosts_read_down(&m->cfg, why);
	for (i = 0; i < m->cfg.nnodes; i++) {
		if (!why[i][0])
			continue;
		m->nodes[i].outside = 1;
		snprintf(text, sizeof(text), "host %s did not answer at "
			 "start: %s", m->cfg.nodes[i].host, why[i]);
		give_up(m, &m->nodes[i], text);
	}
	free(why);
}

static void escalate(struct master *m, struct node *n, const char *why);

/* The power status of a node asked when the master started: a node
 * found off (power lost while no master watched, or while the one before
 * was being replaced) is power-cycled at once rather than found out by
 * spawns that hang. */
static void
on_start_power(struct master *m, int node, enum bmc_cmd cmd,
	       const struct bmc_result *r)
{
	struct node *n = &m->nodes[node];

	(void)cmd;
	agents_power_known(m, node);
	if (!r->ok || r->power != 0 || m->stopping ||
	    (n->state != N_UP && n->state != N_SUSPECT))
		return;
	log_warnx("node %s: its power is off", n->name);
	escalate(m, n, "power off when the master started");
	persist(m);
}

void
health_check_power(struct master *m)
{
	char err[160];
	int i;

	for (i = 0; i < m->cfg.nnodes; i++) {
		if (health_can_reboot(m, &m->nodes[i], err, sizeof(err)) != 0)
			continue;
		/* Its agent waits for the answer (a spawn onto a node that
		 * is off would hang every spawn after it). */
		agents_hold_for_power(m, i, START_POWER_WAIT);
		bmc_send(m, i, BMC_STATUS, on_start_power);
	}
}

/* Power-cycle N now for WHY (an operator's reboot if BY_OPERATOR): its
 * tasks go elsewhere at once. */
static void
start_reboot(struct master *m, struct node *n, const char *why,
	     int by_operator)
{
	n->reboot_wanted = 0;
	n->by_operator = by_operator;
	retire_workers(m, n, "node rebooting");
	ladder_reboot(m, n, why);
	sync_hold(m, n);
}

int
health_can_reboot(const struct master *m, const struct node *n, char *err,
		  size_t len)
{
	if (m->static_world) {
		snprintf(err, len, "static launch cannot respawn the workers "
			 "of a power-cycled node");
		return -1;
	}
	if (m->cfg.nodes[n->id].bmc == NULL) {
		snprintf(err, len, "node %s has no \"bmc\" in the config",
			 n->name);
		return -1;
	}
	return 0;
}

/* N's failures call for more than a respawn (WHY): a power cycle if it
 * may have one, else give up on it. */
static void
escalate(struct master *m, struct node *n, const char *why)
{
	char err[160], full[400];

	if (n->episode_reboots >= m->cfg.max_reboots) {
		snprintf(full, sizeof(full), "%s, after %d reboot%s", why,
			 n->episode_reboots, n->episode_reboots == 1 ? "" : "s");
		give_up(m, n, full);
	} else if (health_can_reboot(m, n, err, sizeof(err)) == -1) {
		snprintf(full, sizeof(full), "%s; %s", why, err);
		give_up(m, n, full);
	} else {
		n->episode_reboots++;
		start_reboot(m, n, why, 0);
	}
}

/* Charge N with a failure (WHY); W, if not NULL, is the failed worker:
 * respawn it, or climb the ladder (at once on a TIMEOUT, a respawn that
 * did not come back, when N can be power-cycled). */
static void
strike(struct master *m, struct node *n, struct worker *w, const char *why,
       int timeout)
{
	double now = ft_now();
	char err[160];

	forget(m, n, now);
	n->strikes++;
	n->last_strike = now;
	if (timeout && health_can_reboot(m, n, err, sizeof(err)) == -1)
		timeout = 0;	/* nothing more to do than respawn */
	if (timeout || n->strikes > m->cfg.respawn_limit ||
	    n->episode_reboots > 0) {
		escalate(m, n, why);
		return;
	}
	if (n->state == N_UP)
		set_state(m, n, N_SUSPECT, why);
	else
		log_warnx("node %s: failure %d: %s", n->name, n->strikes, why);
	if (w)
		registry_respawn_later(m, w);
}

/* ---- failures ---- */

void
health_worker_dying(struct master *m, struct worker *w)
{
	struct node *n = &m->nodes[w->node];
	const struct sched_task *t = sched_task(m->sched, w->died_on);
	enum blame_verdict v;
	char why[128], text[192];

	w->charged_task = 0;
	if (n->state == N_REBOOTING || n->state == N_DOWN ||
	    n->state == N_INACTIVE)
		return;		/* out of service: nothing to charge */
	if (w->with_agent)
		return;		/* another slot of its agent carries it */
	v = blame_death(blame, t ? w->died_on : 0, n->id, w->died_hung,
			healthy(m, n), why, sizeof(why));
	w->charged_task = v == BLAME_TASK;
	if (t)
		snprintf(text, sizeof(text), "task %u of batch %u: %s",
			 t->index, t->batch, why);
	else
		snprintf(text, sizeof(text), "%s", why);
	ev_worker_blamed(&m->events, w->id, n->name,
			 w->charged_task ? "task" : "node", text);
}

/* Static launch: nothing is respawned; a node with no worker left is
 * inactive. */
static void
static_failed(struct master *m, struct worker *w)
{
	struct node *n = &m->nodes[w->node];

	log_warnx("worker %d: static launch cannot respawn it; its tasks go "
		  "to the other workers", w->id);
	if (!node_has_workers(m, n) && n->state != N_INACTIVE)
		set_state(m, n, N_INACTIVE, "static launch: its workers "
			  "cannot be respawned");
}

void
health_worker_failed(struct master *m, struct worker *w)
{
	struct node *n = &m->nodes[w->node];
	char why[128];

	if (m->static_world) {
		static_failed(m, w);
		persist(m);
		return;
	}
	switch (n->state) {
	case N_REBOOTING:
	case N_DOWN:
		if (n->step == NS_WORKERS)
			registry_respawn_later(m, w);
		return;
	case N_INACTIVE:
		registry_retire(m, w, "node inactive");
		return;
	default:
		break;
	}
	if (w->charged_task || w->with_agent) {
		registry_respawn_later(m, w);
		return;
	}
	if (w->died_starting)
		snprintf(why, sizeof(why), "worker %d did not start", w->id);
	else
		snprintf(why, sizeof(why), "worker %d failed (%d in a row)",
			 w->id, w->failures);
	strike(m, n, w, why, w->died_starting);
	persist(m);
}

/* A: the node a task's earlier death is charged to after all; B: the
 * task. */
static void
deferred_strike(void *ctx, uint64_t a, uint64_t b, const char *text)
{
	struct master *m = ctx;
	struct node *n = &m->nodes[a];
	char why[128];

	(void)text;
	if (n->state == N_REBOOTING || n->state == N_DOWN ||
	    n->state == N_INACTIVE)
		return;
	snprintf(why, sizeof(why), "a worker died running task id %llu, "
		 "which then succeeded elsewhere", (unsigned long long)b);
	strike(m, n, NULL, why, 0);
	persist(m);
}

/* A worker of N finished a task: N's failures in a row are over (its
 * reboots are not: they are forgotten only after failure_window_s).  Only
 * a worker that has lived REGISTRY_VOUCH_AFTER past its hello vouches for
 * its node: under power loss each respawn finishes a short task or two
 * before it dies, and the node must still climb the ladder. */
static void
finished_task(struct master *m, struct node *n)
{
	n->strikes = 0;
	if (n->state == N_SUSPECT)
		set_state(m, n, N_UP, "recovered: a task ran to its end on it");
	persist(m);
}

void
health_task_result(struct master *m, uint64_t tid, struct worker *w, int ok)
{
	char why[256];
	int back;

	if (m->nodes[w->node].strikes &&
	    ft_now() - w->hello_at >= REGISTRY_VOUCH_AFTER)
		finished_task(m, &m->nodes[w->node]);
	if (blame_records(blame) == 0)
		return;
	if (!ok) {
		blame_task_failed(blame, tid, names, why, sizeof(why));
		return;
	}
	back = blame_task_ok(blame, tid, w->node);
	if (back >= 0)
		defer_call(&m->defer, deferred_strike, (uint64_t)back, tid,
			   NULL);
}

const char *
health_task_failed(struct master *m, uint64_t tid, const char *reason,
		   char *buf, size_t n)
{
	char poison[256];

	(void)m;
	if (blame_records(blame) == 0 ||
	    !blame_task_failed(blame, tid, names, poison, sizeof(poison)))
		return reason;
	snprintf(buf, n, "%s (%s)", poison, reason);
	return buf;
}

/* ---- the ends of reboots and probes ---- */

void
health_ladder_ended(struct master *m, struct node *n, int ok,
		    const char *why)
{
	n->by_operator = 0;
	if (!ok) {
		give_up(m, n, why);
		persist(m);
		hops.reboot_ended(hops.ctx, n, 0, why);
		return;
	}
	/* On probation: a failure within the window climbs on at once. */
	n->strikes = 0;
	n->last_strike = ft_now();
	n->probes = 0;
	set_state(m, n, n->drain_wanted ? N_DRAINED : N_UP, why);
	persist(m);
	hops.reboot_ended(hops.ctx, n, 1, why);
}

/* ---- the operators' requests ---- */

/* N drains: once nothing runs on it, it is DRAINED, or rebooted if that
 * was asked (also once the drain has taken too long). */
static void
drain_progress(struct master *m, struct node *n, double now)
{
	char why[128];

	if (n->state != N_DRAINING)
		return;
	if (node_inflight(m, n) == 0) {
		if (n->reboot_wanted)
			start_reboot(m, n, "reboot asked by an operator", 1);
		else
			set_state(m, n, N_DRAINED, "drained by an operator");
	} else if (n->reboot_wanted && now > n->drain_deadline) {
		snprintf(why, sizeof(why), "reboot asked by an operator; its "
			 "tasks taken back after a %.0f s drain",
			 m->cfg.drain_timeout);
		start_reboot(m, n, why, 1);
	}
}

int
health_drain(struct master *m, struct node *n, char *err, size_t len)
{
	(void)err, (void)len;
	n->drain_wanted = 1;
	if (node_serves(n))
		set_state(m, n, N_DRAINING, "drained by an operator");
	drain_progress(m, n, ft_now());
	persist(m);
	return 0;
}

/* Undrain N (health_undrain). */
static int
undrain(struct master *m, struct node *n, char *err, size_t len)
{
	n->drain_wanted = 0;
	switch (n->state) {
	case N_DRAINING:
		if (n->reboot_wanted) {
			n->reboot_wanted = 0;
			hops.reboot_ended(hops.ctx, n, 0, "reboot cancelled: "
					  "the node was undrained");
		}
		/* fall through */
	case N_DRAINED:
		set_state(m, n, N_UP, "undrained by an operator");
		break;
	case N_SUSPECT:
		n->strikes = 0;
		n->episode_reboots = 0;
		set_state(m, n, N_UP, "cleared by an operator");
		break;
	case N_INACTIVE:
		if (m->static_world) {
			snprintf(err, len, "static launch cannot respawn the "
				 "workers of node %s", n->name);
			return -1;
		}
		n->strikes = 0;
		n->episode_reboots = 0;
		n->probe_delay = 0;
		ladder_probe(m, n, "undrained by an operator");
		sync_hold(m, n);
		break;
	default:
		break;
	}
	return 0;
}

int
health_undrain(struct master *m, struct node *n, char *err, size_t len)
{
	int rc = undrain(m, n, err, len);

	persist(m);
	return rc;
}

/* Reboot N (health_reboot). */
static int
reboot(struct master *m, struct node *n, int force, char *err, size_t len)
{
	if (health_can_reboot(m, n, err, len) == -1)
		return -1;
	switch (n->state) {
	case N_REBOOTING:
		return 0;		/* its end answers this request too */
	case N_DOWN:
	case N_INACTIVE:
		start_reboot(m, n, "reboot asked by an operator", 1);
		return 0;
	default:
		break;
	}
	if (force || node_inflight(m, n) == 0) {
		start_reboot(m, n, force ? "forced reboot asked by an operator"
				      : "reboot asked by an operator", 1);
		return 0;
	}
	n->reboot_wanted = 1;
	n->drain_deadline = ft_now() + m->cfg.drain_timeout;
	if (n->state != N_DRAINING)
		set_state(m, n, N_DRAINING, "reboot asked by an operator: "
			  "draining");
	return 0;
}

int
health_reboot(struct master *m, struct node *n, int force, char *err,
	      size_t len)
{
	int rc = reboot(m, n, force, err, len);

	persist(m);
	return rc;
}

/* ---- the cron ---- */

int
health_busy(const struct master *m)
{
	int i;

	for (i = 0; i < m->cfg.nnodes; i++)
		if (m->nodes[i].state == N_REBOOTING ||
		    m->nodes[i].state == N_DOWN ||
		    m->nodes[i].state == N_DRAINING ||
		    m->nodes[i].state == N_LEAVING)
			return 1;
	return 0;
}

/* N suspect, with no failure for HEALTH_QUIET and every worker of it up
 * long enough to vouch for it: its failures in a row are over, as if a
 * worker had finished a task (an idle node would otherwise stay suspect
 * for failure_window_s). */
static void
quiet_clear(struct master *m, struct node *n, double now)
{
	int k;

	if (n->state != N_SUSPECT || now - n->last_strike < HEALTH_QUIET)
		return;
	for (k = 0; k < m->nworkers; k++) {
		const struct worker *w = &m->workers[k];

		if (w->node == n->id && (!worker_up(w) ||
					 now - w->hello_at <
					 REGISTRY_VOUCH_AFTER))
			return;
	}
	n->strikes = 0;
	set_state(m, n, N_UP, "no failure for a while and its workers up");
}

/* Probe N, inactive, once its time has come. */
static void
maybe_probe(struct master *m, struct node *n, double now)
{
	char why[96];

	if (m->static_world || now < n->probe_at)
		return;
	n->probes++;
	snprintf(why, sizeof(why), "probe %d of the inactive node", n->probes);
	ladder_probe(m, n, why);
	sync_hold(m, n);
}

/* Nothing can run the open tasks: every node is inactive, no worker is
 * left.  Fail them rather than let them wait for a probe. */
static void
fail_if_hopeless(struct master *m)
{
	int i;

	/* Where nodes may join, one may yet come. */
	if (sched_open(m->sched) == 0 || registry_any_left(m) ||
	    ft_config_joinable(&m->cfg))
		return;
	for (i = 0; i < m->cfg.nnodes; i++)
		if (m->nodes[i].state != N_INACTIVE)
			return;
	log_warnx("no worker is left: failing %llu open tasks",
		  (unsigned long long)sched_open(m->sched));
	sched_fail_open(m->sched, "no live workers");
}

void
health_cron(struct master *m, double now)
{
	int i;

	if (m->stopping)
		return;
	for (i = 0; i < m->cfg.nnodes; i++) {
		struct node *n = &m->nodes[i];

		forget(m, n, now);
		quiet_clear(m, n, now);
		if (n->state == N_DRAINING)
			drain_progress(m, n, now);
		else if (n->state == N_LEAVING)
			leave_progress(m, n, now);
		else if (n->state == N_REBOOTING || n->state == N_DOWN)
			ladder_cron(m, n, now);
		else if (n->state == N_INACTIVE)
			maybe_probe(m, n, now);
	}
	fail_if_hopeless(m);
	if (now >= save_at) {
		save_at = now + SAVE_EVERY;
		persist(m);
	}
}

/* ---- nodes that join and leave ---- */

/* A leaving node: once nothing runs on it, its agent stops (then says
 * bye: it has left). */
static void
leave_progress(struct master *m, struct node *n, double now)
{
	(void)now;
	if (node_inflight(m, n) == 0)
		agents_stop(m, n->id);
}

/* The record carried over for NAME (saved by a master before, for a
 * node not in the config), taken out of the carried ones into *R.  1 if
 * there was one. */
static int
take_carried(const char *name, struct opstate_rec *r)
{
	size_t i;

	for (i = nnode_recs; i < nrecs; i++) {
		if (strcmp(recs[i].node, name) != 0)
			continue;
		*r = recs[i];
		memmove(&recs[i], &recs[i + 1],
			(nrecs - i - 1) * sizeof(*recs));
		nrecs--;
		return 1;
	}
	return 0;
}

void
health_grow(struct master *m)
{
	int i, old = (int)nnode_recs, n = m->cfg.nnodes;
	struct opstate_rec saved;

	if (n <= old)
		return;
	m->nodes = ft_realloc(m->nodes, (size_t)n * sizeof(*m->nodes));
	names = ft_realloc(names, (size_t)n * sizeof(*names));
	/* The new nodes' records go before the carried ones. */
	recs = ft_realloc(recs, (nrecs + (size_t)(n - old)) * sizeof(*recs));
	memmove(&recs[n], &recs[old], (nrecs - (size_t)old) * sizeof(*recs));
	nrecs += (size_t)(n - old);
	nnode_recs = (size_t)n;
	bmc_grow(m);
	ladder_grow(m);
	for (i = old; i < n; i++) {
		struct node *nd = &m->nodes[i];

		node_init(nd, i, m->cfg.nodes[i].name);
		names[i] = m->cfg.nodes[i].name;
		rec_of(nd, &recs[i]);
		if (take_carried(nd->name, &saved) &&
		    node_state_parse(saved.state) != 0)
			restore_node(m, nd, &saved,
				     node_state_parse(saved.state));
	}
}

void
health_joined(struct master *m, struct node *n, const char *why)
{
	switch (n->state) {
	case N_INACTIVE:
		ladder_abort(m, n);
		node_set(n, N_DOWN, why, &m->events);
		/* fall through */
	case N_LEFT:
		n->strikes = 0;
		n->episode_reboots = 0;
		n->probe_delay = 0;
		set_state(m, n, n->drain_wanted ? N_DRAINED : N_UP, why);
		break;
	case N_LEAVING:
		/* Its old agent's bye never came: it left all the same. */
		node_set(n, N_LEFT, "joined again before it said bye",
			 &m->events);
		set_state(m, n, n->drain_wanted ? N_DRAINED : N_UP, why);
		break;
	default:
		/* Up, suspect (its agent died and is back: the ladder's
		 * respawn goes on), draining or drained: as it was. */
		sync_hold(m, n);
		break;
	}
	persist(m);
}

void
health_leaving(struct master *m, struct node *n, const char *why)
{
	if (n->state == N_LEAVING || n->state == N_LEFT)
		return;
	if (node_can(n->state, N_LEAVING))
		set_state(m, n, N_LEAVING, why);
	else
		log_info("node %s: leaves (%s) while %s", n->name, why,
			 node_state_name(n->state));
	leave_progress(m, n, ft_now());
}

int
health_leave(struct master *m, struct node *n, double grace, char *err,
	     size_t len)
{
	char why[96];

	if (!agents_is_tcp(m, n->id)) {
		snprintf(err, len, "node %s did not join over TCP: only a "
			 "joined node may leave (drain it instead)", n->name);
		return -1;
	}
	if (n->state == N_LEAVING || n->state == N_LEFT)
		return 0;
	if (agents_leave(m, n->id, grace) == -1) {
		snprintf(err, len, "node %s has no agent up (%s)", n->name,
			 node_state_name(n->state));
		return -1;
	}
	snprintf(why, sizeof(why), "asked to leave by an operator (grace "
		 "%.0f s)", grace);
	health_leaving(m, n, why);
	return 0;
}

void
health_left(struct master *m, struct node *n)
{
	char why[sizeof(n->reason)];

	if (n->state == N_LEFT)
		return;
	if (n->state == N_LEAVING ||
	    node_set(n, N_LEAVING, "its agent left", &m->events) == 0) {
		snprintf(why, sizeof(why), "%s", n->reason);	/* the leave's */
		set_state(m, n, N_LEFT, why);
	}
	persist(m);
}

/* ---- the state on disk ---- */

/* N's record now. */
static void
rec_of(const struct node *n, struct opstate_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->node = n->name;
	snprintf(r->state, sizeof(r->state), "%s", node_state_name(n->state));
	r->drained = n->drain_wanted;
	snprintf(r->reason, sizeof(r->reason), "%s", n->reason);
	r->reboots = n->reboots;
	r->last_reboot = n->last_reboot;
	r->failures = n->strikes;
	r->episode_reboots = n->episode_reboots;
	r->last_failure = n->last_strike != 0 ? n->last_strike + wall_offset
					      : 0;
	r->probe_delay = n->probe_delay;
	r->next_probe = n->state == N_INACTIVE && n->probe_at > 0 ?
			n->probe_at + wall_offset : 0;
}

/* Save the nodes' records if any has changed since the last save. */
static void
persist(struct master *m)
{
	struct opstate_rec r;
	int i, changed = 0;

	if (disk == NULL)
		return;
	for (i = 0; i < (int)nnode_recs; i++) {
		rec_of(&m->nodes[i], &r);
		if (!opstate_rec_equal(&r, &recs[i])) {
			recs[i] = r;
			changed = 1;
		}
	}
	if (changed)
		opstate_save(disk, recs, nrecs);
}

uint64_t
health_unsaved(const struct master *m)
{
	(void)m;
	return opstate_handed(disk) > opstate_durable(disk) ?
	       opstate_handed(disk) : 0;
}

int
health_retry_save(struct master *m)
{
	(void)m;
	return opstate_retry(disk);
}

static void
on_saved(void *ctx, uint64_t gen, int err)
{
	(void)ctx;
	if (hops.saved)
		hops.saved(hops.ctx, gen, err);
}

/* A line (LINE; 0: the whole file) of PATH not taken, for WHAT. */
static void
damaged(struct master *m, const char *path, int line, const char *what)
{
	log_warnx("%s:%d: %s; ignored (the file is kept as %s.damaged)",
		  path, line, what, path);
	ev_node_state_damaged(&m->events, path, line, what);
}

/* Does R hold anything a fresh node has not? */
static int
worth_restoring(const struct opstate_rec *r, enum nstate st)
{
	return st != N_UP || r->drained || r->reboots || r->failures ||
	       r->episode_reboots || r->last_reboot > 0;
}

/* The state of a node saved in state WAS (N's counts restored), and why
 * when not the saved reason (*WHY). */
static enum nstate
restored_state(const struct master *m, const struct node *n,
	       enum nstate was, const char **why)
{
	*why = NULL;
	switch (was) {
	case N_INACTIVE:
		if (!m->static_world)
			return N_INACTIVE;
		*why = "static launch: the new job's workers are new";
		break;
	case N_REBOOTING:
	case N_DOWN:
		if (m->static_world)	/* it has neither */
			break;
		*why = was == N_REBOOTING ?
		       "a reboot was under way when the master restarted; "
		       "probed: power, ready command, workers" :
		       "a probe was under way when the master restarted; "
		       "probed again";
		return N_DOWN;
	case N_SUSPECT:
		if (!n->drain_wanted && n->strikes > 0)
			return N_SUSPECT;
		break;
	case N_DRAINING:
		if (!n->drain_wanted)
			*why = "the reboot asked before the master restarted "
			       "was dropped";
		break;
	case N_LEAVING:
	case N_LEFT:
		*why = "joined again";
		break;
	default:
		break;
	}
	return n->drain_wanted ? N_DRAINED : N_UP;
}

/* N as record R (saved in state WAS) says, before any worker starts. */
static void
restore_node(struct master *m, struct node *n, const struct opstate_rec *r,
	     enum nstate was)
{
	const char *why;
	enum nstate to;

	n->reboots = r->reboots;
	n->last_reboot = r->last_reboot;
	n->strikes = r->failures;
	n->episode_reboots = r->episode_reboots;
	n->last_strike = r->last_failure > 0 ? r->last_failure - wall_offset
					     : 0;
	n->drain_wanted = r->drained;
	if (n->state == N_INACTIVE) {
		/* Its host did not answer at this start: that stands. */
		node_restore(n, N_INACTIVE, n->reason, was, &m->events);
		return;
	}
	n->probe_delay = r->probe_delay;
	to = restored_state(m, n, was, &why);
	node_restore(n, to, why ? why : r->reason, was, &m->events);
	if (to == N_INACTIVE) {
		/* Its probes go on where they were (at once if one is due). */
		if (n->probe_delay <= 0)
			n->probe_delay = m->cfg.probe_min;
		n->probe_at = r->next_probe > 0 ? r->next_probe - wall_offset
						: ft_now() + n->probe_delay;
		retire_workers(m, n, "node inactive");
	} else if (to == N_DOWN) {
		retire_workers(m, n, "node coming back");
		ladder_probe(m, n, why);
	}
	sync_hold(m, n);
}

/* The records of F for the nodes of the config; the others are carried
 * over (kept as they are in every file written). */
static void
restore_all(struct master *m, const char *path, const struct opstate_read *f)
{
	size_t i, k = (size_t)m->cfg.nnodes;
	char what[300];

	recs = ft_calloc((size_t)m->cfg.nnodes + f->n, sizeof(*recs));
	for (i = 0; i < f->n; i++) {
		const struct opstate_rec *r = &f->recs[i];
		struct node *n = health_node(m, r->node);
		enum nstate st = node_state_parse(r->state);

		if (n == NULL) {
			log_info("node %s is not in the config: its saved "
				 "state (%s) is kept for when it is again",
				 r->node, r->state);
			recs[k++] = *r;
		} else if (st == 0) {
			snprintf(what, sizeof(what), "node %s: no state "
				 "\"%s\"", r->node, r->state);
			damaged(m, path, 0, what);
		} else if (worth_restoring(r, st)) {
			restore_node(m, n, r, st);
		}
	}
	nrecs = k;
	nnode_recs = (size_t)m->cfg.nnodes;
	for (i = 0; i < (size_t)m->cfg.nnodes; i++)
		rec_of(&m->nodes[i], &recs[i]);
}

void
health_restore(struct master *m)
{
	struct opstate_ops ops = { .ctx = m, .saved = on_saved };
	char *path = ft_asprintf("%s/%s", m->cfg.state_dir, OPSTATE_FILE);
	char err[512];
	size_t i;
	int bad;

	wall_offset = ft_wall() - ft_now();
	bad = opstate_read(path, &found, err, sizeof(err)) == -1;
	if (bad)
		damaged(m, path, 0, err);
	for (i = 0; i < found.nproblems; i++)
		damaged(m, path, found.problems[i].line,
			found.problems[i].what);
	disk = opstate_open(path, m->loop, &m->store, &ops, err, sizeof(err));
	if (disk == NULL)
		log_warnx("%s: the nodes' state is not saved", err);
	if (disk && (bad || found.nproblems) &&
	    opstate_set_aside(disk) == -1)
		log_warn("%s: cannot move it aside", path);
	restore_all(m, path, &found);
	if (disk)
		opstate_save(disk, recs, nrecs);
	free(path);
}
