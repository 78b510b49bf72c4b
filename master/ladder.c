/* ladder: bringing a node back, step by step (see ladder.h). */
#include "ladder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmc.h"
#include "child.h"
#include "hosts.h"
#include "log.h"
#include "registry.h"

#define POLL_MIN 0.25		/* seconds between two power polls, at least */
#define POWER_ON_AFTER 5.0	/* off this long after a cycle: `power on` */
#define READY_RETRY 0.25	/* seconds between two ready commands, at
				 * least (and at least what the last took) */
#define READY_RUN_MAX 30.0	/* the longest one ready command may run */
#define BMC_FAILS_MAX 3		/* BMC failures in a row: it is gone */
#define CYCLE_SPAWN_WAIT 3.0	/* the longest a cycle waits for a spawn */

static struct master *lm;	/* for the children's callbacks */
static struct child **ready;	/* each node's ready command, if it runs */
static int nready;
static ladder_ended_fn *on_ended;	/* node health's */

void
ladder_init(struct master *m, ladder_ended_fn *ended)
{
	lm = m;
	on_ended = ended;
	ready = NULL;
	nready = 0;
	ladder_grow(m);
}

void
ladder_grow(struct master *m)
{
	int n = m->cfg.nnodes;

	if (n <= nready)
		return;
	ready = ft_realloc(ready, (size_t)n * sizeof(*ready));
	memset(ready + nready, 0, (size_t)(n - nready) * sizeof(*ready));
	nready = n;
}

void
ladder_free(struct master *m)
{
	int i;

	(void)m;
	for (i = 0; ready && i < nready; i++)
		child_abandon(ready[i]);
	free(ready);
	ready = NULL;
	nready = 0;
}

void
ladder_abort(struct master *m, struct node *n)
{
	(void)m;
	bmc_cancel(n->id);
	child_abandon(ready[n->id]);
	ready[n->id] = NULL;
	n->step = NS_NONE;
}

/* Keep S (cut to fit) as N's last failure. */
static void
note_error(struct node *n, const char *s)
{
	size_t k = strnlen(s, sizeof(n->last_error) - 1);

	memcpy(n->last_error, s, k);
	n->last_error[k] = '\0';
}

static void
step(struct node *n, enum nstep s, double at)
{
	n->step = s;
	n->step_at = at;
}

/* N's attempt has ended: report it. */
static void
ended(struct master *m, struct node *n, int ok, const char *why)
{
	ladder_abort(m, n);
	on_ended(m, n, ok, why);
}

static void on_bmc(struct master *m, int node, enum bmc_cmd cmd,
		   const struct bmc_result *r);

static void
send(struct master *m, struct node *n, enum bmc_cmd cmd)
{
	if (bmc_send(m, n->id, cmd, on_bmc) == -1)
		log_warnx("node %s: a BMC command is already under way",
			  n->name);
}

/* Seconds between two power polls of N. */
static double
poll_every(const struct master *m, const struct node *n)
{
	return fmax(POLL_MIN, m->cfg.nodes[n->id].bmc->min_gap);
}

/* Respawn N's workers (held) and wait for their hellos. */
static void
start_workers(struct master *m, struct node *n)
{
	int k;

	step(n, NS_WORKERS, ft_now());
	for (k = 0; k < m->nworkers; k++)
		if (m->workers[k].node == n->id)
			registry_revive(m, &m->workers[k]);
}

/* Does N wait for a command before its workers come back: its ready
 * command, or (a node on another host) an ssh to its host?  A spawn
 * onto a host that does not answer hangs, or ends the whole job when the
 * host is outside mpirun's hostfile. */
static int
has_ready(const struct master *m, const struct node *n)
{
	/* A joined node's host is not reached over ssh: its agent joining
	 * again is the sign that it is ready. */
	return m->cfg.nodes[n->id].ready_command != NULL ||
	       (!m->cfg.nodes[n->id].joined &&
		!ft_host_is_local(m->cfg.nodes[n->id].host));
}

/* N has power: its ready command, or its workers. */
static void
powered(struct master *m, struct node *n)
{
	if (has_ready(m, n))
		step(n, NS_READY, ft_now());
	else
		start_workers(m, n);
}

static void
start(struct node *n, const struct master *m)
{
	n->t_start = ft_now();
	n->deadline = n->t_start + m->cfg.reboot_wait;
	n->power_on_sent = 0;
	n->cycle_failed = 0;
	n->bmc_fails = 0;
	n->last_power = -1;
	n->last_error[0] = '\0';
}

/* Send the cycle, unless a spawn is under way: Open MPI's spawn can hang
 * (and with it every MPI call of the master) when the process it starts
 * is killed, so the cycle waits for it (the cron tries again), but only
 * CYCLE_SPAWN_WAIT: a spawn that has not returned by then is hung already
 * (often onto this very node, which is why it is cycled), and waiting for
 * it would leave the node off until reboot_wait_s gives up on it. */
static void
cycle(struct master *m, struct node *n)
{
	double waited = ft_now() - n->t_start;

	if (registry_spawn_busy(m) && waited < CYCLE_SPAWN_WAIT) {
		step(n, NS_CYCLE, ft_now() + POLL_MIN / 10);
		return;
	}
	if (registry_spawn_busy(m))
		log_warnx("node %s: a spawn has not returned in %.1f s: power "
			  "cycle sent without waiting for it", n->name, waited);
	step(n, NS_CYCLE, INFINITY);	/* until it answers */
	send(m, n, BMC_CYCLE);
}

void
ladder_reboot(struct master *m, struct node *n, const char *why)
{
	ladder_abort(m, n);
	node_set(n, N_REBOOTING, why, &m->events);
	start(n, m);
	cycle(m, n);
}

void
ladder_probe(struct master *m, struct node *n, const char *why)
{
	ladder_abort(m, n);
	node_set(n, N_DOWN, why, &m->events);
	start(n, m);
	if (m->cfg.nodes[n->id].bmc)
		step(n, NS_POWER, n->t_start);
	else
		powered(m, n);
}

/* ---- the BMC's answers ---- */

/* The cycle has ended with R. */
static void
cycled(struct master *m, struct node *n, const struct bmc_result *r)
{
	char why[400];

	if (r->ok) {
		step(n, NS_POWER, ft_now() + POLL_MIN);
		return;
	}
	if (!r->ran) {
		snprintf(why, sizeof(why), "power cycle failed: %s", r->error);
		ended(m, n, 0, why);
		return;
	}
	/* The BMC may have acted anyway: ask before concluding. */
	note_error(n, r->error);
	n->cycle_failed = 1;
	step(n, NS_POWER, ft_now());
}

/* A power status or power on failed with R. */
static void
bmc_failed(struct master *m, struct node *n, enum bmc_cmd cmd,
	   const struct bmc_result *r)
{
	char why[512];

	n->bmc_fails++;
	if (n->cycle_failed) {
		snprintf(why, sizeof(why), "power cycle failed: %s; then %s: "
			 "%s", n->last_error, bmc_cmd_name(cmd), r->error);
		ended(m, n, 0, why);
		return;
	}
	note_error(n, r->error);
	if (!r->ran || n->bmc_fails >= BMC_FAILS_MAX) {
		snprintf(why, sizeof(why), "BMC does not answer: %s: %s",
			 bmc_cmd_name(cmd), r->error);
		ended(m, n, 0, why);
		return;
	}
	step(n, NS_POWER, ft_now() + poll_every(m, n));
}

/* Power status R came: on, or wait (and ask for power on once). */
static void
power_status(struct master *m, struct node *n, const struct bmc_result *r)
{
	double now = ft_now();

	if (n->cycle_failed)
		log_warnx("node %s: the cycle's answer was an error (%s); the "
			  "power is %s", n->name, n->last_error,
			  r->power ? "on" : "off");
	n->cycle_failed = 0;
	n->last_power = r->power;
	if (r->power == 1) {
		ev_node_power_on(&m->events, n->name, now - n->t_start);
		powered(m, n);
		return;
	}
	if (!n->power_on_sent && (n->state == N_DOWN ||
				  now - n->t_start >= POWER_ON_AFTER)) {
		n->power_on_sent = 1;
		log_warnx("node %s: power off %.1f s after %s: asking for "
			  "power on", n->name, now - n->t_start,
			  n->state == N_DOWN ? "the probe began" : "the cycle");
		send(m, n, BMC_ON);
		return;
	}
	step(n, NS_POWER, now + poll_every(m, n));
}

static void
on_bmc(struct master *m, int node, enum bmc_cmd cmd,
       const struct bmc_result *r)
{
	struct node *n = &m->nodes[node];

	if (n->state != N_REBOOTING && n->state != N_DOWN)
		return;
	if (cmd == BMC_CYCLE) {
		cycled(m, n, r);
		return;
	}
	if (!r->ok) {
		bmc_failed(m, n, cmd, r);
		return;
	}
	n->bmc_fails = 0;
	if (cmd == BMC_STATUS)
		power_status(m, n, r);
	else
		step(n, NS_POWER, ft_now() + poll_every(m, n));
}

/* ---- the ready command ---- */

static void
on_ready(void *arg, const struct child_result *r)
{
	struct node *n = &lm->nodes[(intptr_t)arg];
	char what[CHILD_OUT_MAX + 64], why[CHILD_OUT_MAX + 128];

	ready[n->id] = NULL;
	child_describe(r, what, sizeof(what));
	if (r->started && r->exit == 0 && !r->timed_out && !r->signal) {
		log_info("node %s: ready (%.2f s after the start)", n->name,
			 ft_now() - n->t_start);
		ev_node_ready(&lm->events, n->name, ft_now() - n->t_start);
		start_workers(lm, n);
		return;
	}
	note_error(n, what);
	if (!r->started) {
		snprintf(why, sizeof(why), "ready_command %s", what);
		ended(lm, n, 0, why);
		return;
	}
	log_info("node %s: not ready yet: %s", n->name, what);
	step(n, NS_READY, ft_now() + fmax(READY_RETRY, r->seconds));
}

static void
run_ready(struct master *m, struct node *n, double now)
{
	double left = n->deadline - now;

	const struct ft_node *cn = &m->cfg.nodes[n->id];
	char **probe = NULL;

	step(n, NS_READY, INFINITY);	/* until it ends */
	if (cn->ready_command == NULL) {
		char *cmd = hosts_probe_cmd(m->worker_exe);

		probe = hosts_remote_argv(&m->cfg, cn->host, cmd);
		free(cmd);
	}
	ready[n->id] = child_start(m->loop, probe ? probe : cn->ready_command,
				   m->cfg.dir, fmin(probe ? HOSTS_PROBE_BOUND :
						    READY_RUN_MAX, left),
				   on_ready, (void *)(intptr_t)n->id);
	hosts_argv_free(probe);
}

/* ---- the cron ---- */

/* Why N's attempt has not ended in time. */
static void
late(const struct master *m, const struct node *n, char *why, size_t len)
{
	const char *after = n->state == N_REBOOTING ? "after the cycle"
						    : "after the probe began";
	double t = m->cfg.reboot_wait;

	if (n->step == NS_POWER && n->last_power == 0)
		snprintf(why, len, "power still off %.0f s %s", t, after);
	else if (n->step == NS_POWER || n->step == NS_CYCLE)
		snprintf(why, len, "no power on %.0f s %s%s%s", t, after,
			 n->last_error[0] ? ": " : "", n->last_error);
	else if (n->step == NS_READY)
		snprintf(why, len, "not ready %.0f s %s%s%s", t, after,
			 n->last_error[0] ? ": " : "", n->last_error);
	else
		snprintf(why, len, "its workers did not say hello %.0f s %s",
			 t, after);
}

static int
workers_up(const struct master *m, const struct node *n)
{
	int k;

	for (k = 0; k < m->nworkers; k++)
		if (m->workers[k].node == n->id && !worker_up(&m->workers[k]))
			return 0;
	return 1;
}

void
ladder_cron(struct master *m, struct node *n, double now)
{
	char why[400];

	if (n->step == NS_WORKERS && workers_up(m, n)) {
		snprintf(why, sizeof(why), "back %.2f s after %s", now -
			 n->t_start, n->state == N_REBOOTING ? "the cycle"
							     : "the probe began");
		ended(m, n, 1, why);
		return;
	}
	if (now > n->deadline) {
		late(m, n, why, sizeof(why));
		ended(m, n, 0, why);
		return;
	}
	if (now < n->step_at)
		return;
	if (n->step == NS_CYCLE && !bmc_busy(n->id)) {
		cycle(m, n);
	} else if (n->step == NS_POWER && !bmc_busy(n->id)) {
		step(n, NS_POWER, INFINITY);	/* until it answers */
		send(m, n, BMC_STATUS);
	} else if (n->step == NS_READY && ready[n->id] == NULL) {
		run_ready(m, n, now);
	}
}
