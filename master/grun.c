/* grun: one attempt of a gang task, run from the loop (see grun.h). */
#include "grun.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gang_proto.h"
#include "util.h"

#define SPAWN_TIMEOUT 20.0	/* seconds a spawn may take */
#define HELLO_TIMEOUT 60.0	/* seconds from the spawn to every hello */
#define DEATH_SETTLE 3.0	/* seconds between a death and the STOP */
#define SEND_TIMEOUT 5.0	/* a message not out by then is dropped */
#define STOP_GRACE 3.0		/* seconds for ranks to leave after STOP */
#define GONE_TIMEOUT 10.0	/* seconds for killed ranks to vanish */

enum gstate {
	G_SPAWN = 1, G_HELLO, G_RUN, G_WRITING,	/* the job under way */
	G_SETTLE, G_STOP, G_GONE, G_OVER,	/* the end */
};

struct grank {
	int pid;
	char host[64];
	int hello, alive;
	int role, phase, step, epoch;
	struct treq *ping;		/* outstanding ping, or NULL */
	int reported, ok, has_output;
	uint64_t digest;
	char *report;			/* JSON text of its figures */
	int written;			/* WRITTEN came: 1 ok, -1 not */
	char reason[256];
};

/* A spawn on its thread; the thread's alone once given up on. */
struct spawn_req {
	char *exe, *argv[2];
	int n;
	MPI_Comm self, inter;
	int rc, done;
};

struct grun {
	struct grun_params p;
	struct grun_ops o;
	struct treq_set *tq;
	char *job;
	int attempt, n, active;
	struct grank *r;
	struct spawn_req *sp;
	MPI_Comm inter;
	enum gstate state;
	int ok;				/* the output was written */
	char reason[512];		/* why not, once failed */
	uint64_t seq;
	uint32_t epoch;
	int newly_dead, deaths;
	double t0, spawn_seconds, last_death, next_ping, deadline;
	int writer;
};

static pthread_mutex_t sp_mu = PTHREAD_MUTEX_INITIALIZER;
static int sp_hung;

int
grun_spawn_hung(void)
{
	return sp_hung;
}

/* ---- the spawn thread ---- */

static void *
spawn_thread(void *arg)
{
	struct spawn_req *r = arg;
	MPI_Info info;
	int *errs = ft_calloc(r->n, sizeof(int)), rc;

	MPI_Info_create(&info);
	MPI_Info_set(info, "bind_to", "none");
	rc = MPI_Comm_spawn(r->exe, r->argv, r->n, info, 0, r->self, &r->inter,
			    errs);
	MPI_Info_free(&info);
	free(errs);
	pthread_mutex_lock(&sp_mu);
	r->rc = rc;
	r->done = 1;
	pthread_mutex_unlock(&sp_mu);
	return NULL;
}

static int
spawn_done(struct spawn_req *r)
{
	int done;

	pthread_mutex_lock(&sp_mu);
	done = r->done;
	pthread_mutex_unlock(&sp_mu);
	return done;
}

/* Start G's spawn on a detached thread, over a duplicate of
 * MPI_COMM_SELF (the spawn is collective over it).  0 or -1. */
static int
spawn_start(struct grun *g)
{
	struct spawn_req *r = ft_calloc(1, sizeof(*r));
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	r->exe = ft_strdup(g->p.exe);
	r->argv[0] = ft_strdup(g->p.plugin_dir);
	r->n = g->n;
	if (MPI_Comm_dup(MPI_COMM_SELF, &r->self) != MPI_SUCCESS) {
		free(r->exe);
		free(r->argv[0]);
		free(r);
		return -1;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, spawn_thread, r);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		MPI_Comm_free(&r->self);
		free(r->exe);
		free(r->argv[0]);
		free(r);
		return -1;
	}
	g->sp = r;
	return 0;
}

static void
spawn_free(struct spawn_req *r)
{
	MPI_Comm_free(&r->self);
	free(r->exe);
	free(r->argv[0]);
	free(r);
}

/* ---- the job under way ---- */

/* End the job with REASON (the first reason wins), then the settling. */
static void
fail(struct grun *g, const char *reason)
{
	if (g->state >= G_SETTLE)
		return;
	snprintf(g->reason, sizeof(g->reason), "%s", reason);
	g->state = G_SETTLE;
}

/* Send MSG (taken over) of type TAG to RANK. */
static void
send_rank(struct grun *g, int rank, int tag, struct ft_buf *msg)
{
	if (treq_isend(g->tq, msg, rank, tag, g->inter,
		       ft_now() + SEND_TIMEOUT, 0, NULL, NULL) == NULL)
		fail(g, "MPI refused a send to a gang rank");
}

/* Declare RANK dead: SIGKILL it (hung or not), forget its requests. */
static void
declare_dead(struct grun *g, int rank, const char *why)
{
	struct grank *r = &g->r[rank];

	if (!r->alive)
		return;
	r->alive = 0;
	r->ping = NULL;
	if (r->pid > 0)
		kill(r->pid, SIGKILL);
	treq_retire_peer(g->tq, g->inter, rank);
	g->newly_dead++;
	g->deaths++;
	g->last_death = ft_now();
	if (g->o.dead)
		g->o.dead(g->o.ctx, g, rank, r->pid, why);
}

static void
on_ping(struct treq *t, enum treq_outcome outcome, void *arg)
{
	struct grun *g = arg;

	g->r[t->peer].ping = NULL;
	if (outcome == TREQ_EXPIRED && (g->state == G_RUN ||
					g->state == G_WRITING))
		declare_dead(g, t->peer, "no pong in time");
}

/* Ping every live rank without a ping under way. */
static void
ping_all(struct grun *g, double now)
{
	int i;

	for (i = 0; i < g->n; i++) {
		struct grank *r = &g->r[i];
		struct ft_buf b = { 0 };

		if (!r->alive || r->ping)
			continue;
		gang_put_u64(&b, ++g->seq);
		r->ping = treq_isend(g->tq, &b, i, GANG_MSG_PING, g->inter,
				     now + g->p.ping_timeout, 1, on_ping, g);
		if (r->ping)
			r->ping->key = g->seq;
	}
}

/* Send the notice of a new epoch, naming every dead rank, to the live. */
static void
notify(struct grun *g)
{
	int *dead = ft_malloc(g->n * sizeof(int)), nd = 0, i;

	for (i = 0; i < g->n; i++)
		if (!g->r[i].alive)
			dead[nd++] = i;
	g->epoch++;
	for (i = 0; i < g->n; i++) {
		struct ft_buf b = { 0 };

		if (!g->r[i].alive)
			continue;
		gang_put_dead(&b, g->epoch, dead, nd);
		send_rank(g, i, GANG_MSG_DEAD, &b);
	}
	g->newly_dead = 0;
	free(dead);
	if (g->o.notice)
		g->o.notice(g->o.ctx, g, (int)g->epoch, nd);
}

static void
on_hello(struct grun *g, int rank, const char *p, int n)
{
	struct gang_hello h;
	struct grank *r = &g->r[rank];

	if (gang_get_hello(p, (size_t)n, &h) == -1 ||
	    h.version != GANG_PROTO_VERSION || (int)h.rank != rank ||
	    (int)h.size != g->n) {
		fail(g, "bad HELLO from a gang rank");
		return;
	}
	r->hello = 1;
	r->pid = (int)h.pid;
	r->role = rank < g->active ? GANG_ROLE_ACTIVE : GANG_ROLE_SPARE;
	snprintf(r->host, sizeof(r->host), "%.*s", (int)h.host_len, h.host);
}

/* PONG or PROGRESS from RANK. */
static void
on_status(struct grun *g, int rank, int tag, const char *p, int n)
{
	struct gang_status s;
	struct grank *r = &g->r[rank];
	struct treq *t;

	if (gang_get_status(p, (size_t)n, &s) == -1) {
		fail(g, "bad status from a gang rank");
		return;
	}
	r->role = s.role;
	r->phase = s.phase;
	r->step = s.step;
	r->epoch = (int)s.epoch;
	if (tag == GANG_MSG_PONG) {
		t = treq_find(g->tq, g->inter, rank, GANG_MSG_PING, s.seq);
		if (t)
			treq_reply(t);
	} else if (s.phase != GANG_PHASE_DONE) {
		r->reported = 0;	/* at work again: its RESULT is stale */
	}
}

static void
on_result(struct grun *g, int rank, const char *p, int n)
{
	struct gang_result res;
	struct grank *r = &g->r[rank];
	char why[512];

	if (gang_get_result(p, (size_t)n, &res) == -1) {
		fail(g, "bad RESULT from a gang rank");
		return;
	}
	r->reported = 1;
	r->ok = res.ok;
	r->has_output = res.has_output;
	r->digest = res.digest;
	free(r->report);
	r->report = ft_asprintf("%.*s", (int)res.report_len, res.report);
	snprintf(r->reason, sizeof(r->reason), "%.*s", (int)res.reason_len,
		 res.reason);
	if (!res.ok) {
		snprintf(why, sizeof(why), "rank %d: %s", rank, r->reason);
		fail(g, why);
	}
}

static void
on_written(struct grun *g, int rank, const char *p, int n)
{
	struct gang_written w;
	struct grank *r = &g->r[rank];

	if (gang_get_written(p, (size_t)n, &w) == -1) {
		fail(g, "bad WRITTEN from a gang rank");
		return;
	}
	r->written = w.ok ? 1 : -1;
	snprintf(r->reason, sizeof(r->reason), "%.*s", (int)w.reason_len,
		 w.reason);
}

static void post_recv(struct grun *g);

/* A message of no known type TAG (N bytes) from RANK fails the job. */
static void
unexpected(struct grun *g, int rank, int tag, int n)
{
	char why[128];

	snprintf(why, sizeof(why), "unexpected message (tag %d, %d bytes) "
		 "from gang rank %d", tag, n, rank);
	fail(g, why);
}

/* The standing receive got a message: post the next, dispatch it. */
static void
on_msg(struct treq *t, enum treq_outcome outcome, void *arg)
{
	struct grun *g = arg;
	int rank = t->status.MPI_SOURCE, tag = t->status.MPI_TAG;

	if (outcome != TREQ_DONE)
		return;
	post_recv(g);
	if (rank < 0 || rank >= g->n || t->error != MPI_SUCCESS ||
	    !g->r[rank].alive)
		return;		/* a rank declared dead no longer counts */
	switch (tag) {
	case GANG_MSG_HELLO:
		on_hello(g, rank, t->buf, t->count);
		break;
	case GANG_MSG_PONG:
	case GANG_MSG_PROGRESS:
		on_status(g, rank, tag, t->buf, t->count);
		break;
	case GANG_MSG_RESULT:
		on_result(g, rank, t->buf, t->count);
		break;
	case GANG_MSG_WRITTEN:
		on_written(g, rank, t->buf, t->count);
		break;
	default:
		unexpected(g, rank, tag, t->count);
	}
}

static void
post_recv(struct grun *g)
{
	if (g->state >= G_GONE)
		return;
	if (treq_irecv(g->tq, GANG_MSG_MAX, MPI_ANY_SOURCE, MPI_ANY_TAG,
		       g->inter, INFINITY, on_msg, g) == NULL)
		fail(g, "cannot receive from the gang");
}

/* Ask the next live rank that has the output to write it. */
static void
ask_writer(struct grun *g)
{
	struct ft_buf b = { 0 };
	int i;

	g->writer = -1;
	for (i = 0; i < g->n && g->writer < 0; i++)
		if (g->r[i].alive && g->r[i].has_output && g->r[i].ok &&
		    g->r[i].written == 0)
			g->writer = i;
	if (g->writer < 0) {
		fail(g, "no live rank can write the output");
		return;
	}
	ft_buf_reserve(&b, 1);
	send_rank(g, g->writer, GANG_MSG_WRITE, &b);
	g->state = G_WRITING;
}

/* Have all live ranks reported ok, with one digest?  Then ask a writer. */
static void
check_results(struct grun *g)
{
	int i, live = 0, first = -1;

	for (i = 0; i < g->n; i++) {
		struct grank *r = &g->r[i];

		if (!r->alive)
			continue;
		live++;
		if (!r->reported)
			return;
		if (r->has_output && first < 0)
			first = i;
		if (r->has_output && r->digest != g->r[first].digest) {
			fail(g, "gang ranks disagree on the result");
			return;
		}
	}
	if (live == 0)
		fail(g, "every rank of the gang died");
	else if (first < 0)
		fail(g, "no rank of the gang has the output");
	else
		ask_writer(g);
}

/* Writing: the writer answered, or died. */
static void
check_writer(struct grun *g)
{
	struct grank *w = &g->r[g->writer];
	char why[512];

	if (w->written > 0) {
		g->ok = 1;
		g->state = G_SETTLE;
	} else if (w->written < 0) {
		snprintf(why, sizeof(why), "rank %d could not write: %s",
			 g->writer, w->reason);
		fail(g, why);
	} else if (!w->alive) {
		ask_writer(g);
	}
}

/* ---- the steps ---- */

static void
step_spawn(struct grun *g, double now)
{
	struct spawn_req *r = g->sp;
	int i;

	if (!spawn_done(r)) {
		if (now - g->t0 > SPAWN_TIMEOUT) {
			sp_hung = 1;	/* R stays the thread's */
			g->sp = NULL;
			snprintf(g->reason, sizeof(g->reason), "MPI_Comm_spawn "
				 "of %d ranks hung for %.0f s", g->n,
				 SPAWN_TIMEOUT);
			g->state = G_OVER;
		}
		return;
	}
	g->sp = NULL;
	g->spawn_seconds = now - g->t0;
	g->inter = r->inter;
	if (r->rc != MPI_SUCCESS) {
		snprintf(g->reason, sizeof(g->reason), "MPI_Comm_spawn of %d "
			 "ranks failed", g->n);
		g->state = G_OVER;
		spawn_free(r);
		return;
	}
	spawn_free(r);
	MPI_Comm_set_errhandler(g->inter, MPI_ERRORS_RETURN);
	for (i = 0; i < g->n; i++)
		g->r[i].alive = 1;
	g->state = G_HELLO;
	g->deadline = now + HELLO_TIMEOUT;
	post_recv(g);
}

static void
step_hello(struct grun *g, double now)
{
	struct gang_start st = { (uint32_t)g->attempt, g->p.silence, g->job,
				 strlen(g->job) };
	int i;

	for (i = 0; i < g->n; i++)
		if (!g->r[i].hello) {
			if (now > g->deadline)
				fail(g, "the gang did not say hello");
			return;
		}
	for (i = 0; i < g->n; i++) {
		struct ft_buf b = { 0 };

		gang_put_start(&b, &st);
		send_rank(g, i, GANG_MSG_START, &b);
	}
	g->state = G_RUN;
	g->deadline = now + g->p.timeout;
	g->next_ping = now;
	if (g->o.started)
		g->o.started(g->o.ctx, g);
}

static void
step_run(struct grun *g, double now)
{
	if (now > g->deadline) {
		fail(g, "the gang task timed out");
		return;
	}
	if (now >= g->next_ping) {
		ping_all(g, now);
		g->next_ping = now + g->p.heartbeat;
	}
	if (g->newly_dead)
		notify(g);	/* the writer may be waiting on the dead */
	if (g->state == G_RUN)
		check_results(g);
	else if (g->state == G_WRITING)
		check_writer(g);
}

static int
all_gone(const struct grun *g)
{
	int i;

	for (i = 0; i < g->n; i++)
		if (g->r[i].hello && ft_pid_alive(g->r[i].pid))
			return 0;
	return 1;
}

/* Settled: STOP every live rank. */
static void
step_settle(struct grun *g, double now)
{
	uint32_t flags = g->deaths == 0 ? GANG_STOP_FINALIZE : 0;
	int i;

	if (g->deaths && now < g->last_death + DEATH_SETTLE)
		return;
	for (i = 0; i < g->n; i++) {
		struct ft_buf b = { 0 };

		if (!g->r[i].alive || !g->r[i].hello)
			continue;
		gang_put_u32(&b, flags);
		send_rank(g, i, GANG_MSG_STOP, &b);
	}
	g->state = G_STOP;
	g->deadline = now + STOP_GRACE;
}

static void
step_stop(struct grun *g, double now)
{
	if (!all_gone(g) && now < g->deadline)
		return;
	grun_kill(g);
	g->state = G_GONE;
	g->deadline = now + GONE_TIMEOUT;
}

/* Everything gone (or given up on): retire the requests, free the
 * intercommunicator. */
static void
step_gone(struct grun *g, double now)
{
	int i;

	if (!all_gone(g) && now < g->deadline)
		return;
	for (i = 0; i < g->n; i++)
		treq_retire_peer(g->tq, g->inter, i);
	treq_retire_peer(g->tq, g->inter, MPI_ANY_SOURCE);
	MPI_Comm_free(&g->inter);
	g->state = G_OVER;
}

int
grun_tick(struct grun *g, double now)
{
	switch (g->state) {
	case G_SPAWN:
		step_spawn(g, now);
		break;
	case G_HELLO:
		step_hello(g, now);
		break;
	case G_RUN:
	case G_WRITING:
		step_run(g, now);
		break;
	case G_SETTLE:
		step_settle(g, now);
		break;
	case G_STOP:
		step_stop(g, now);
		break;
	case G_GONE:
		step_gone(g, now);
		break;
	case G_OVER:
		break;
	}
	return g->state == G_OVER;
}

/* ---- the API ---- */

struct grun *
grun_start(const struct grun_params *p, const struct grun_ops *o,
	   struct treq_set *tq, const char *job, int nranks, int active,
	   int attempt)
{
	struct grun *g = ft_calloc(1, sizeof(*g));

	g->p = *p;
	g->o = *o;
	g->tq = tq;
	g->job = ft_strdup(job);
	g->n = nranks;
	g->active = active;
	g->attempt = attempt;
	g->r = ft_calloc(nranks, sizeof(*g->r));
	g->writer = -1;
	g->inter = MPI_COMM_NULL;
	g->state = G_SPAWN;
	g->t0 = ft_now();
	if (spawn_start(g) == -1) {
		grun_free(g);
		return NULL;
	}
	return g;
}

int
grun_ok(const struct grun *g)
{
	return g->state == G_OVER && g->ok;
}

const char *
grun_reason(const struct grun *g)
{
	return g->reason;
}

int
grun_deaths(const struct grun *g)
{
	return g->deaths;
}

int
grun_attempt(const struct grun *g)
{
	return g->attempt;
}

json_t *
grun_figures(const struct grun *g)
{
	json_t *all = json_object(), *one;
	json_error_t je;
	int i;

	for (i = 0; i < g->n; i++) {
		if (!g->r[i].alive || !g->r[i].report || !g->r[i].report[0])
			continue;
		one = json_loads(g->r[i].report, 0, &je);
		if (json_is_object(one))
			json_object_update_missing(all, one);
		json_decref(one);
	}
	json_object_set_new(all, "deaths", json_integer(g->deaths));
	json_object_set_new(all, "notices", json_integer(g->epoch));
	json_object_set_new(all, "writer", json_integer(g->ok ? g->writer : -1));
	json_object_set_new(all, "spawn_seconds", json_real(g->spawn_seconds));
	return all;
}

/* What RANK is doing, in one word. */
static const char *
rank_state(const struct grun *g, const struct grank *r)
{
	if (!r->hello)
		return "spawning";
	if (!r->alive)
		return "dead";
	if (g->state >= G_SETTLE)
		return "stopping";
	return r->phase ? gang_phase_name(r->phase) : "hello";
}

json_t *
grun_ranks(const struct grun *g)
{
	json_t *a = json_array();
	int i;

	for (i = 0; i < g->n; i++) {
		const struct grank *r = &g->r[i];
		int role = r->role ? r->role : i < g->active ?
			GANG_ROLE_ACTIVE : GANG_ROLE_SPARE;

		json_array_append_new(a, json_pack(
			"{s:i,s:o,s:s,s:s,s:s,s:i,s:i}", "rank", i, "pid",
			r->pid > 0 ? json_integer(r->pid) : json_null(), "host", r->host, "role", gang_role_name(role),
			"state", rank_state(g, r), "step", r->step, "epoch",
			r->epoch));
	}
	return a;
}

void
grun_abort(struct grun *g, const char *reason)
{
	if (g->state == G_RUN || g->state == G_WRITING)
		fail(g, reason);
}

void
grun_kill(struct grun *g)
{
	int i;

	for (i = 0; i < g->n; i++)
		if (g->r[i].hello && g->r[i].pid > 0 &&
		    ft_pid_alive(g->r[i].pid))
			kill(g->r[i].pid, SIGKILL);
}

void
grun_free(struct grun *g)
{
	int i;

	if (g == NULL)
		return;
	for (i = 0; i < g->n; i++)
		free(g->r[i].report);
	free(g->r);
	free(g->job);
	free(g);
}

/* Is PID a child of our launcher running the program EXE? */
static int
launched_exe(int pid, const char *exe)
{
	char path[64], line[256], buf[PATH_MAX];
	int ppid = -1;
	ssize_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "PPid: %d", &ppid) == 1)
			break;
	fclose(f);
	if (ppid != getppid())
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strcmp(buf, exe) == 0;
}

int
grun_kill_strays(const char *exe)
{
	char real[PATH_MAX];
	struct dirent *d;
	DIR *dir;
	int killed = 0;

	if (realpath(exe, real) == NULL || (dir = opendir("/proc")) == NULL)
		return 0;
	while ((d = readdir(dir)) != NULL) {
		int pid = atoi(d->d_name);

		if (pid > 0 && launched_exe(pid, real) &&
		    kill(pid, SIGKILL) == 0)
			killed++;
	}
	closedir(dir);
	return killed;
}
