/* gangs: gang tasks, MPI jobs of several ranks (see gangs.h). */
#include "gangs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gang_load.h"
#include "grun.h"
#include "log.h"
#include "master.h"
#include "spawn.h"
#include "util.h"

/* Ranks are pinged as workers are: every "heartbeat_ms", a pong due
 * within "heartbeat_timeout_ms".  Ranks leave after GANG_SILENCE (at
 * least a few heartbeats) without a word from the master. */
#define GANG_SILENCE 5.0
#define GANG_TIMEOUT 600.0	/* seconds an attempt may take, without the
				 * job's "timeout" */

struct gtask {
	uint32_t batch, index;
	char *job;			/* JSON text */
	char *type;
	int active, spares;
	double timeout;			/* seconds an attempt may run */
	int attempt;			/* of the run under way, or the last */
	double t0;			/* monotonic, when first started */
	struct grun *run;		/* the attempt under way, or NULL */
	int cancelled;			/* its result was recorded: only
					 * finish the attempt */
	struct gtask *next;
};

static struct {
	struct master *m;
	struct gangs_ops ops;
	char *exe, *dir;
	struct gtask *head, *tail;	/* queued, then the running one first */
	struct gtask *cur;		/* running, or NULL */
	int static_world;
} gs;

/* ---- checking (any thread) ---- */

/* ft_plugins.other_jobs: gang jobs, refused under a static world. */
static int
check_job(void *ctx, const json_t *job, const char *path, struct jerr *err)
{
	int rc = gang_load_check(gs.dir, job, path, NULL, NULL, err);
	char key[256];

	(void)ctx;
	if (rc != 0 || !gs.static_world)
		return rc;
	snprintf(key, sizeof(key), "%s.type", path);
	return jerr_set(err, key, "gang jobs need dynamic launch (Open MPI: "
			"MPI_Comm_spawn); this cluster runs a static world");
}

void
gangs_init(struct master *m, const struct gangs_ops *o)
{
	char *dir = ft_exe_dir();

	gs.m = m;
	gs.ops = *o;
	gs.exe = ft_asprintf("%s/ftfarm-gang", dir);
	gs.dir = gang_load_default_dir();
	gs.static_world = m->static_world;
	free(dir);
	m->plugins.other_jobs = check_job;
	m->plugins.other_ctx = NULL;
}

/* ---- the queue ---- */

void
gangs_submit(struct master *m, uint32_t batch, uint32_t index,
	     const json_t *job)
{
	struct gtask *t = ft_calloc(1, sizeof(*t));
	struct jerr jerr;

	(void)m;
	t->batch = batch;
	t->index = index;
	t->job = json_dumps(job, JSON_COMPACT);
	t->type = ft_strdup(json_string_value(json_object_get(job, "type")));
	t->timeout = json_is_number(json_object_get(job, "timeout")) ?
		json_number_value(json_object_get(job, "timeout")) :
		GANG_TIMEOUT;
	/* checked at submit already: this only learns its size */
	gang_load_check(gs.dir, job, "job", &t->active, &t->spares, &jerr);
	if (gs.tail)
		gs.tail->next = t;
	else
		gs.head = t;
	gs.tail = t;
	log_info("batch %u: gang task %u (%s, %d + %d ranks) queued", batch,
		 index, t->type, t->active, t->spares);
}

/* Take T out of the queue and free it. */
static void
drop(struct gtask *t)
{
	struct gtask **p;

	for (p = &gs.head; *p; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			break;
		}
	gs.tail = NULL;
	for (p = &gs.head; *p; p = &(*p)->next)
		gs.tail = *p;
	if (gs.cur == t)
		gs.cur = NULL;
	grun_free(t->run);
	free(t->job);
	free(t->type);
	free(t);
}

/* T ended for good: its one result. */
static void
ended(struct gtask *t, int ok, json_t *figures, const char *reason)
{
	json_t *fig = figures ? figures : json_object();

	gs.ops.ended(gs.ops.ctx, t->batch, t->index, (uint32_t)t->attempt,
		     ok, ft_now() - t->t0, fig, reason);
	json_decref(fig);
}

void
gangs_cancel(struct master *m, uint32_t batch)
{
	struct gtask *t, *next;

	(void)m;
	for (t = gs.head; t; t = next) {
		next = t->next;
		if (t->batch != batch || t->cancelled)
			continue;
		ended(t, 0, NULL, "cancelled");
		if (t->run)
			t->cancelled = 1;	/* the attempt winds down */
		else
			drop(t);
	}
}

/* ---- the attempts' news ---- */

static void
on_started(void *ctx, struct grun *g)
{
	struct gtask *t = ctx;
	json_t *fig = grun_figures(g);

	ev_gang_started(&gs.m->events, t->batch, t->index, grun_attempt(g),
			t->type, t->active, t->spares, json_real_value(
				json_object_get(fig, "spawn_seconds")));
	json_decref(fig);
}

static void
on_dead(void *ctx, struct grun *g, int rank, int pid, const char *reason)
{
	struct gtask *t = ctx;

	ev_gang_rank_dead(&gs.m->events, t->batch, t->index, grun_attempt(g),
			  rank, pid, reason);
	log_warnx("batch %u gang task %u attempt %d: rank %d (pid %d) dead: "
		  "%s", t->batch, t->index, grun_attempt(g), rank, pid, reason);
}

static void
on_notice(void *ctx, struct grun *g, int epoch, int ndead)
{
	struct gtask *t = ctx;

	ev_gang_recovery(&gs.m->events, t->batch, t->index, grun_attempt(g),
			 epoch, ndead);
}

/* ---- running ---- */

/* Start T's next attempt.  0, or -1 when it cannot even start. */
static int
start_attempt(struct gtask *t)
{
	struct grun_params p = {
		.exe = gs.exe, .plugin_dir = gs.dir,
		.heartbeat = gs.m->cfg.heartbeat,
		.ping_timeout = gs.m->cfg.heartbeat_timeout,
		.silence = fmax(GANG_SILENCE, 4 * (gs.m->cfg.heartbeat +
					gs.m->cfg.heartbeat_timeout)),
		.timeout = t->timeout,
	};
	struct grun_ops o = {
		.ctx = t, .started = on_started, .dead = on_dead,
		.notice = on_notice,
	};

	if (t->attempt == 0)
		t->t0 = ft_now();
	t->attempt++;
	t->run = grun_start(&p, &o, &gs.m->treqs, t->job,
			    t->active + t->spares, t->active, t->attempt);
	log_info("batch %u gang task %u: attempt %d on %d + %d processes",
		 t->batch, t->index, t->attempt, t->active, t->spares);
	return t->run ? 0 : -1;
}

/* The attempt of T is over: record it, or run it again. */
static void
attempt_over(struct gtask *t)
{
	struct grun *g = t->run;
	int ok = grun_ok(g);
	json_t *fig = grun_figures(g);

	json_object_set_new(fig, "attempts", json_integer(t->attempt));
	ev_gang_ended(&gs.m->events, t->batch, t->index, t->attempt,
		      ok ? "ok" : "failed", ft_now() - t->t0, grun_deaths(g),
		      ok ? NULL : grun_reason(g));
	if (t->cancelled) {
		json_decref(fig);
		drop(t);
		return;
	}
	/* A hung spawn does not stop the next attempt: a new spawn beside a
	 * hung one worked (7 of 7 here). */
	if (!ok && t->attempt < gs.m->cfg.max_attempts) {
		log_warnx("batch %u gang task %u: attempt %d failed (%s); "
			  "again on fresh processes", t->batch, t->index,
			  t->attempt, grun_reason(g));
		grun_free(g);
		t->run = NULL;
		json_decref(fig);
		return;		/* the cron starts the next attempt */
	}
	ended(t, ok, fig, ok ? NULL : grun_reason(g));
	drop(t);
}

void
gangs_cron(struct master *m, double now)
{
	struct gtask *t = gs.cur ? gs.cur : gs.head;

	if (t == NULL || m->stopping)
		return;
	gs.cur = t;
	/* Not beside a worker's spawn: a gang attempt started while workers
	 * were respawned once got a message of no gang type (two spawns at
	 * once in Open MPI 4.1 are suspect). */
	if (t->run == NULL && m->async_spawn && spawn_async_busy())
		return;
	if (t->run == NULL && start_attempt(t) == -1) {
		ended(t, 0, NULL, "cannot start a spawn thread");
		drop(t);
		return;
	}
	if (t->cancelled)
		grun_abort(t->run, "cancelled");
	if (grun_tick(t->run, now))
		attempt_over(t);
}

int
gangs_busy(void)
{
	return gs.head != NULL;
}

json_t *
gangs_status(void)
{
	json_t *a = json_array();
	struct gtask *t = gs.cur;

	if (t && t->run)
		json_array_append_new(a, json_pack(
			"{s:i,s:i,s:i,s:s,s:o}", "batch", t->batch, "task",
			t->index, "attempt", t->attempt, "job", t->type,
			"ranks", grun_ranks(t->run)));
	return a;
}

int
gangs_leave(void)
{
	struct gtask *t;

	int busy = 0, strays;

	for (t = gs.head; t; t = t->next)
		if (t->run) {
			grun_kill(t->run);
			busy = 1;
		}
	if (grun_spawn_hung() &&
	    (strays = grun_kill_strays(gs.exe)) > 0)
		log_info("killed %d processes of hung gang spawns", strays);
	return busy || grun_spawn_hung();
}
