/* alloc: the queues of Slurm allocations (see alloc.h). */
#include "alloc.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents.h"
#include "aplan.h"
#include "child.h"
#include "crc32c.h"
#include "health.h"
#include "log.h"
#include "slurm.h"
#include "util.h"

#define TICK 1.0		/* decisions at most this often */
#define FOLLOW_EVERY 2.0	/* squeue while an allocation lives */
#define SUBMIT_GAP 1.0		/* one sbatch a queue a second at most */
#define BACKOFF_MAX 60.0	/* the longest wait after failures */
#define CMD_TIMEOUT 30.0	/* for sbatch, squeue, scancel */
#define JOIN_WAIT 180.0		/* a running allocation none of whose
				 * agents joined by then has failed */
#define ENDED_KEEP 600.0	/* an ended allocation stays in alloc's
				 * list this long */
#define AGENT_RECONNECT 120	/* an allocation's agents wait this long
				 * for a master that went */
#define STATE_FILE "allocations.json"

enum { AL_PENDING = 1, AL_RUNNING, AL_ENDED };

struct allocation {
	char id[32];
	int queue;
	int state;
	double submitted;		/* wall */
	double started, ended;		/* wall, 0 */
	double end;			/* squeue's end of it (epoch), 0 */
	char nodes[256];		/* its node list, compressed */
	int joined;			/* an agent of it joined */
	int cancelled;			/* scancel asked */
	char why[160];			/* how it ended */
};

struct queue {
	const struct ft_alloc_queue *cfg;
	int paused;
	char reason[600];
	unsigned submissions;
	int fails;			/* in a row */
	double next_submit;		/* monotonic */
	int submitting;			/* an sbatch runs */
	int testing;			/* a dry run runs */
	char *script;
	char name[160];			/* the job name of its allocations */
};

static struct {
	struct master *m;
	struct queue *q;
	int nq;
	struct allocation *a;
	int na, cap;
	double next_tick, next_follow;
	int following;			/* a squeue runs */
	int followed;			/* a squeue answered since the start:
					 * nothing is asked for before (what
					 * a master before asked for may run) */
	double *busy_at;		/* per node: it last had work then */
	int nbusy;
	char prefix[64];		/* job names: PREFIX.<queue> */
	char *path;			/* the state file */
	int dirty;
} al;

static void persist(void);

/* ---- the queues' words ---- */

static struct queue *
queue_named(const char *name)
{
	int i;

	for (i = 0; i < al.nq; i++)
		if (strcmp(al.q[i].cfg->name, name) == 0)
			return &al.q[i];
	return NULL;
}

/* The queue whose job name is NAME, or -1. */
static int
queue_of_job(const char *name)
{
	int i;

	for (i = 0; i < al.nq; i++)
		if (strcmp(al.q[i].name, name) == 0)
			return i;
	return -1;
}

static struct allocation *
find(const char *id)
{
	int i;

	for (i = 0; i < al.na; i++)
		if (strcmp(al.a[i].id, id) == 0)
			return &al.a[i];
	return NULL;
}

static struct allocation *
add(const char *id, int queue, int state)
{
	struct allocation *a;

	if (al.na == al.cap) {
		al.cap = al.cap ? 2 * al.cap : 16;
		al.a = ft_realloc(al.a, (size_t)al.cap * sizeof(*al.a));
	}
	a = &al.a[al.na++];
	memset(a, 0, sizeof(*a));
	snprintf(a->id, sizeof(a->id), "%s", id);
	a->queue = queue;
	a->state = state;
	a->submitted = ft_wall();
	al.dirty = 1;
	return a;
}

static void
pause_queue(struct queue *q, const char *why)
{
	struct master *m = al.m;

	q->paused = 1;
	snprintf(q->reason, sizeof(q->reason), "%s", why);
	log_warnx("allocation queue %s paused: %s", q->cfg->name, why);
	ev_queue_paused(&m->events, q->cfg->name, why);
	al.dirty = 1;
}

/* A failure of Q (WHY): wait longer before its next submission, pause
 * it after FAILS_TO_PAUSE in a row. */
static void
queue_failed(struct queue *q, const char *why)
{
	char text[sizeof(q->reason)];

	q->fails++;
	q->next_submit = ft_now() + fmin(BACKOFF_MAX, 2 * pow(2, q->fails));
	snprintf(q->reason, sizeof(q->reason), "%s", why);
	al.dirty = 1;
	if (q->fails < FAILS_TO_PAUSE) {
		log_warnx("allocation queue %s: failure %d: %s", q->cfg->name,
			  q->fails, why);
		return;
	}
	snprintf(text, sizeof(text), "%d failures in a row; the last: %s",
		 q->fails, why);
	pause_queue(q, text);
}

/* One line of R's output, Slurm's own words, into BUF: its first line
 * that says an error, else its first line. */
static const char *
slurm_words(const struct child_result *r, char *buf, size_t n)
{
	const char *e = strstr(r->out, "error:");
	const char *from = e ? e : r->out;
	size_t len = strcspn(from, "\n");

	if (!r->started)
		snprintf(buf, n, "cannot run it: %s", strerror(r->err_no));
	else if (r->timed_out)
		snprintf(buf, n, "no answer in %.0f s", CMD_TIMEOUT);
	else if (len == 0)
		child_describe(r, buf, n);
	else
		snprintf(buf, n, "%.*s", (int)len, from);
	return buf;
}

/* ---- the script and the commands ---- */

/* S quoted for sh, appended to B. */
static void
shell_quote(struct ft_buf *b, const char *s)
{
	ft_buf_add(b, "'", 1);
	for (; *s; s++) {
		if (*s == '\'')
			ft_buf_add(b, "'\\''", 4);
		else
			ft_buf_add(b, s, 1);
	}
	ft_buf_add(b, "'", 1);
}

/* Q's allocation script: the start command and `ftfarm join` on each
 * node, named HOST.JOBID (a node of the farm is a node of a job: two
 * allocations may share a host).  0, or -1 (logged). */
static int
write_script(struct master *m, struct queue *q)
{
	const struct ft_alloc_queue *c = q->cfg;
	char *dir = ft_exe_dir(), *ftfarm, *cfg = realpath(m->cfg.path, NULL);
	struct ft_buf b = { 0 }, join = { 0 };
	int rc;

	ftfarm = ft_asprintf("%s/ftfarm", dir);
	free(dir);
	shell_quote(&join, ftfarm);
	ft_buf_printf(&join, " join -c ");
	shell_quote(&join, cfg ? cfg : m->cfg.path);
	/* A node a job: two allocations may share a host. */
	ft_buf_printf(&join, " --name \"$(hostname -s).$SLURM_JOB_ID\" "
		      "--reconnect-timeout %d", AGENT_RECONNECT);
	if (c->slots)
		ft_buf_printf(&join, " --slots %d", c->slots);
	if (c->gpus)
		ft_buf_printf(&join, " --gpus %s", c->gpus);
	ft_buf_printf(&b, "#!/bin/sh\n# ftfarm: an allocation of queue %s of "
		      "cluster %s: each node joins the master.\n",
		      c->name, m->cfg.name);
	ft_buf_printf(&b, "exec srun --kill-on-bad-exit=0 --ntasks-per-node=1 "
		      "sh -c ");
	if (c->start_command) {
		struct ft_buf inner = { 0 };

		ft_buf_printf(&inner, "%s && exec %.*s", c->start_command,
			      (int)join.len, (char *)join.data);
		ft_buf_add(&inner, "", 1);
		shell_quote(&b, (char *)inner.data);
		ft_buf_free(&inner);
	} else {
		struct ft_buf inner = { 0 };

		ft_buf_printf(&inner, "exec %.*s", (int)join.len,
			      (char *)join.data);
		ft_buf_add(&inner, "", 1);
		shell_quote(&b, (char *)inner.data);
		ft_buf_free(&inner);
	}
	ft_buf_add(&b, "\n", 1);
	q->script = ft_asprintf("%s/alloc/%s.sh", m->cfg.state_dir, c->name);
	rc = ft_write_file_atomic(q->script, b.data, b.len);
	if (rc == 0)
		rc = chmod(q->script, 0755);
	if (rc == -1)
		log_warn("%s", q->script);
	ft_buf_free(&b);
	ft_buf_free(&join);
	free(ftfarm);
	free(cfg);
	return rc;
}

/* sbatch's argv for Q (TEST: --test-only), NULL-terminated, new. */
static char **
sbatch_argv(struct master *m, const struct queue *q, int test)
{
	const struct ft_alloc_queue *c = q->cfg;
	char **v = ft_calloc((size_t)c->nsbatch + 16, sizeof(char *));
	int k = 0, i;

	v[k++] = ft_strdup("sbatch");
	v[k++] = ft_strdup("--parsable");
	if (test)
		v[k++] = ft_strdup("--test-only");
	v[k++] = ft_asprintf("--job-name=%s", q->name);
	v[k++] = ft_asprintf("--nodes=%d", c->nodes);
	v[k++] = ft_strdup("--ntasks-per-node=1");
	if (c->slots)
		v[k++] = ft_asprintf("--cpus-per-task=%d", c->slots);
	v[k++] = ft_asprintf("--time=%ld", (long)ceil(c->time_limit / 60));
	v[k++] = ft_strdup("--no-kill");
	v[k++] = ft_asprintf("--output=%s/alloc/slurm-%%j.out",
			     m->cfg.state_dir);
	for (i = 0; i < c->nsbatch; i++)
		v[k++] = ft_strdup(c->sbatch[i]);
	v[k++] = ft_strdup(q->script);
	return v;
}

static void
argv_free(char **v)
{
	int i;

	for (i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static void
run(char **argv, child_done_fn done, intptr_t arg)
{
	child_start(al.m->loop, argv, al.m->cfg.state_dir, CMD_TIMEOUT, done,
		    (void *)arg);
	argv_free(argv);
}

/* ---- dry runs ---- */

static void
on_tested(void *arg, const struct child_result *r)
{
	struct queue *q = &al.q[(intptr_t)arg];
	char words[512], why[600];

	q->testing = 0;
	if (r->started && r->exit == 0 && !r->timed_out)
		return;
	snprintf(why, sizeof(why), "sbatch --test-only: %s",
		 slurm_words(r, words, sizeof(words)));
	pause_queue(q, why);
	persist();
}

static void
dry_run(struct master *m, int qi)
{
	struct queue *q = &al.q[qi];

	if (q->testing || q->script == NULL)
		return;
	q->testing = 1;
	run(sbatch_argv(m, q, 1), on_tested, qi);
}

/* ---- submissions ---- */

static void
on_submitted(void *arg, const struct child_result *r)
{
	struct master *m = al.m;
	struct queue *q = &al.q[(intptr_t)arg];
	char id[32], words[512], why[600];
	struct allocation *a;

	q->submitting = 0;
	if (!r->started || r->exit != 0 || r->timed_out ||
	    slurm_parse_jobid(r->out, id, sizeof(id)) == -1) {
		snprintf(why, sizeof(why), "sbatch: %s",
			 slurm_words(r, words, sizeof(words)));
		queue_failed(q, why);
		persist();
		return;
	}
	q->submissions++;
	q->next_submit = ft_now() + SUBMIT_GAP;
	a = find(id);
	if (a == NULL)		/* squeue may have found it first */
		a = add(id, (int)(q - al.q), AL_PENDING);
	log_info("allocation queue %s: submitted allocation %s (%d node%s)",
		 q->cfg->name, id, q->cfg->nodes, q->cfg->nodes == 1 ? "" : "s");
	ev_alloc_submitted(&m->events, q->cfg->name, id, q->cfg->nodes);
	persist();
	al.next_follow = 0;
}

static void
submit(struct master *m, int qi)
{
	struct queue *q = &al.q[qi];

	if (q->submitting || q->script == NULL || ft_now() < q->next_submit)
		return;
	q->submitting = 1;
	q->next_submit = ft_now() + SUBMIT_GAP;
	run(sbatch_argv(m, q, 0), on_submitted, qi);
}

static void
on_cancelled(void *arg, const struct child_result *r)
{
	char what[CHILD_OUT_MAX + 64];

	(void)arg;
	if (!r->started || r->exit != 0) {
		child_describe(r, what, sizeof(what));
		log_warnx("scancel: %s", what);
	}
}

static void
cancel(struct master *m, struct allocation *a, const char *why)
{
	char **v = ft_calloc(3, sizeof(char *));

	if (a->cancelled || a->state == AL_ENDED)
		return;
	a->cancelled = 1;
	log_info("allocation %s of queue %s: cancelled: %s", a->id,
		 al.q[a->queue].cfg->name, why);
	ev_alloc_cancelled(&m->events, al.q[a->queue].cfg->name, a->id, why);
	v[0] = ft_strdup("scancel");
	v[1] = ft_strdup(a->id);
	run(v, on_cancelled, 0);
}

/* ---- following them ---- */

/* A ended for WHY; a failure of its queue when none of its agents had
 * joined (and it was not cancelled). */
static void
ended(struct allocation *a, const char *why)
{
	struct master *m = al.m;
	struct queue *q = &al.q[a->queue];
	char text[600], *out, *path;
	size_t len = 0;

	if (a->state == AL_ENDED)
		return;
	a->state = AL_ENDED;
	a->ended = ft_wall();
	snprintf(a->why, sizeof(a->why), "%s", why);
	al.dirty = 1;
	log_info("allocation %s of queue %s ended: %s", a->id, q->cfg->name,
		 why);
	ev_alloc_ended(&m->events, q->cfg->name, a->id, why);
	if (a->joined || a->cancelled)
		return;
	path = ft_asprintf("%s/alloc/slurm-%s.out", m->cfg.state_dir, a->id);
	out = ft_read_file(path, &len);
	free(path);
	snprintf(text, sizeof(text), "allocation %s ended (%s) before its "
		 "agents joined%s%.*s", a->id, why, out && len ? ": " : "",
		 (int)(out && len ? strcspn(out, "\n") : 0), out ? out : "");
	free(out);
	queue_failed(q, text);
}

/* Allocation A, pending, runs (squeue says so, or one of its agents
 * joined before squeue did). */
static void
runs(struct allocation *a)
{
	a->state = AL_RUNNING;
	a->started = ft_wall();
	al.dirty = 1;
	ev_alloc_started(&al.m->events, al.q[a->queue].cfg->name, a->id,
			 a->nodes);
	log_info("allocation %s of queue %s runs on %s", a->id,
		 al.q[a->queue].cfg->name, a->nodes);
}

/* What squeue said of job J. */
static void
seen(const struct slurm_job *j)
{
	struct allocation *a = find(j->id);
	int qi = queue_of_job(j->name);

	if (a == NULL) {
		if (qi < 0 || slurm_state_ended(j->state))
			return;
		/* Submitted by a master before us, its id not kept. */
		a = add(j->id, qi, AL_PENDING);
		log_info("allocation %s of queue %s found in Slurm", a->id,
			 al.q[qi].cfg->name);
	}
	a->end = j->end;
	snprintf(a->nodes, sizeof(a->nodes), "%s", j->nodes);
	if (slurm_state_ended(j->state)) {
		ended(a, j->state);
	} else if (slurm_state_running(j->state) && a->state == AL_PENDING) {
		runs(a);
	}
}

static void
on_followed(void *arg, const struct child_result *r)
{
	char *text, *line, *save = NULL;
	struct slurm_job j;
	int i, whole;

	(void)arg;
	al.following = 0;
	al.followed |= r->started && r->exit == 0 && !r->timed_out;
	if (!r->started || r->exit != 0 || r->timed_out) {
		char what[CHILD_OUT_MAX + 64];

		child_describe(r, what, sizeof(what));
		log_warnx("squeue: %s", what);
		return;
	}
	whole = r->out_len < CHILD_OUT_MAX;
	text = ft_strdup(r->out);
	/* Not listed in a whole answer: ended. */
	for (i = 0; whole && i < al.na; i++)
		if (al.a[i].state != AL_ENDED && strstr(r->out, al.a[i].id) ==
		    NULL)
			ended(&al.a[i], "gone from squeue");
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		if (slurm_parse_squeue(line, strlen(line), &j) == 0)
			seen(&j);
	free(text);
	persist();
}

static void
follow(struct master *m, double now)
{
	struct ft_buf names = { 0 };
	char **v;
	int i, live = 0;

	if (al.following || now < al.next_follow)
		return;
	for (i = 0; i < al.na; i++)
		live += al.a[i].state != AL_ENDED;
	/* Asked every FOLLOW_EVERY while one lives, else now and then: an
	 * allocation a master before us submitted is found. */
	al.next_follow = now + (live ? FOLLOW_EVERY : 10 * FOLLOW_EVERY);
	for (i = 0; i < al.nq; i++)
		ft_buf_printf(&names, "%s%s", i ? "," : "", al.q[i].name);
	ft_buf_add(&names, "", 1);
	v = ft_calloc(10, sizeof(char *));
	v[0] = ft_strdup("squeue");
	v[1] = ft_strdup("-h");
	v[2] = ft_asprintf("--user=%u", (unsigned)getuid());
	v[3] = ft_asprintf("--name=%s", (char *)names.data);
	v[4] = ft_strdup("--format=" SLURM_SQUEUE_FORMAT);
	ft_buf_free(&names);
	al.following = 1;
	run(v, on_followed, 0);
	(void)m;
}

/* ---- the nodes of allocations ---- */

/* The farm's allocation NODE's agent runs in, or NULL. */
static struct allocation *
alloc_of_node(struct master *m, int node)
{
	const struct agent *a = &m->agents[node];
	struct allocation *x;

	if (!a->tcp || a->alloc[0] == '\0')
		return NULL;
	x = find(a->alloc);
	return x && x->state != AL_ENDED ? x : NULL;
}

int
alloc_owns_node(struct master *m, int node)
{
	return al.nq > 0 && alloc_of_node(m, node) != NULL;
}

/* Task instances NODE's workers hold. */
static int
node_busy(const struct master *m, int node)
{
	int k;

	for (k = 0; k < m->nworkers; k++)
		if (m->workers[k].node == node &&
		    sched_inflight(m->sched, k) > 0)
			return 1;
	return 0;
}

/* Mark the allocations whose agents joined; send idle nodes away. */
static void
watch_nodes(struct master *m, double now)
{
	int i;

	if (al.nbusy < m->cfg.nnodes) {
		al.busy_at = ft_realloc(al.busy_at, (size_t)m->cfg.nnodes *
					sizeof(*al.busy_at));
		for (i = al.nbusy; i < m->cfg.nnodes; i++)
			al.busy_at[i] = now;
		al.nbusy = m->cfg.nnodes;
	}
	for (i = 0; i < m->cfg.nnodes; i++) {
		struct allocation *x = alloc_of_node(m, i);
		struct node *n = &m->nodes[i];
		char err[160];

		if (x == NULL || m->agents[i].state != A_UP) {
			al.busy_at[i] = now;
			continue;
		}
		if (!x->joined) {
			x->joined = 1;
			al.q[x->queue].fails = 0;
			al.dirty = 1;
		}
		if (node_busy(m, i) || sched_queued(m->sched) > 0 ||
		    (n->state != N_UP && n->state != N_SUSPECT))
			al.busy_at[i] = now;
		else if (now - al.busy_at[i] >= al.q[x->queue].cfg->idle &&
			 health_leave(m, n, 0, err, sizeof(err)) == 0)
			log_info("node %s of allocation %s: idle for %.0f s: "
				 "sent away", n->name, x->id,
				 now - al.busy_at[i]);
	}
}

/* Running allocations none of whose agents joined in time have failed:
 * cancelled, charged to their queue. */
static void
check_joins(struct master *m)
{
	int i;

	for (i = 0; i < al.na; i++) {
		struct allocation *a = &al.a[i];
		char why[96];

		if (a->state != AL_RUNNING || a->joined || a->cancelled ||
		    ft_wall() - a->started < JOIN_WAIT)
			continue;
		snprintf(why, sizeof(why), "no agent of it joined in %.0f s",
			 JOIN_WAIT);
		cancel(m, a, why);
		a->cancelled = 0;	/* its end is a failure */
		ended(a, why);
	}
}

/* ---- deciding ---- */

/* Workers up, holding nothing, free to take a task. */
static uint64_t
idle_slots(const struct master *m)
{
	uint64_t k = 0;
	int i;

	for (i = 0; i < m->nworkers; i++)
		k += worker_up(&m->workers[i]) && !m->workers[i].held &&
		     sched_inflight(m->sched, i) == 0;
	return k;
}

/* Nodes of allocation X up now. */
static int
joined_nodes(const struct master *m, const struct allocation *x)
{
	int i, k = 0;

	for (i = 0; i < m->cfg.nnodes; i++)
		k += m->agents[i].tcp && m->agents[i].state == A_UP &&
		     strcmp(m->agents[i].alloc, x->id) == 0;
	return k;
}

/* Allocation X's nodes, not known from squeue yet: the host of the
 * first of its agents up. */
static void
first_host(const struct master *m, struct allocation *x)
{
	int i;

	for (i = 0; i < m->cfg.nnodes; i++)
		if (m->agents[i].tcp && m->agents[i].state == A_UP &&
		    strcmp(m->agents[i].alloc, x->id) == 0) {
			snprintf(x->nodes, sizeof(x->nodes), "%s",
				 m->agents[i].host);
			return;
		}
}

static void
decide(struct master *m)
{
	struct aplan_queue *qs = ft_calloc((size_t)al.nq, sizeof(*qs));
	int *sub = ft_calloc((size_t)al.nq, sizeof(int));
	int *can = ft_calloc((size_t)al.nq, sizeof(int));
	struct aplan_need need = {
		.waiting = sched_queued(m->sched),
		.idle = idle_slots(m),
		.unmet = sched_unmet(m->sched, ft_now()),
	};
	int i, k;

	for (i = 0; i < al.nq; i++) {
		const struct ft_alloc_queue *c = al.q[i].cfg;

		qs[i] = (struct aplan_queue){
			.paused = al.q[i].paused, .nodes = c->nodes,
			.max_nodes = c->max_nodes, .backlog = c->backlog,
			.slots = c->slots, .time_limit = c->time_limit,
		};
	}
	for (k = 0; k < al.na; k++) {
		struct allocation *a = &al.a[k];
		struct aplan_queue *q = &qs[a->queue];

		/* An agent of it joined: it runs, whatever squeue said last
		 * (it must not be cancelled as pending and no longer needed). */
		if (a->state == AL_PENDING && joined_nodes(m, a) > 0) {
			if (a->nodes[0] == '\0')
				first_host(m, a);
			runs(a);
		}
		if (a->state == AL_PENDING && !a->cancelled)
			q->pending++;
		else if (a->state == AL_RUNNING) {
			q->running++;
			q->starting_nodes += a->joined ? 0 :
				al.q[a->queue].cfg->nodes - joined_nodes(m, a);
		}
	}
	aplan_decide(&need, qs, al.nq, sub, can);
	for (i = 0; i < al.nq; i++) {
		if (sub[i])
			submit(m, i);
		for (k = al.na - 1; k >= 0 && can[i] > 0; k--)
			if (al.a[k].queue == i && al.a[k].state == AL_PENDING &&
			    !al.a[k].cancelled) {
				cancel(m, &al.a[k], "no work waits for it");
				can[i]--;
			}
	}
	free(qs);
	free(sub);
	free(can);
}

/* Forget allocations ended long ago. */
static void
trim(void)
{
	int i, k = 0;

	for (i = 0; i < al.na; i++)
		if (al.a[i].state != AL_ENDED ||
		    ft_wall() - al.a[i].ended < ENDED_KEEP)
			al.a[k++] = al.a[i];
	if (k != al.na)
		al.dirty = 1;
	al.na = k;
}

void
alloc_cron(struct master *m, double now)
{
	if (al.nq == 0 || now < al.next_tick || m->stopping)
		return;
	al.next_tick = now + TICK;
	follow(m, now);
	watch_nodes(m, now);
	check_joins(m);
	if (al.followed)
		decide(m);
	trim();
	persist();
}

/* ---- the state for the next master ---- */

static json_t *
state_json(void)
{
	json_t *qs = json_array(), *as = json_array();
	int i;

	for (i = 0; i < al.nq; i++)
		json_array_append_new(qs, json_pack(
			"{s:s, s:b, s:s, s:I, s:i}", "name", al.q[i].cfg->name,
			"paused", al.q[i].paused, "reason", al.q[i].reason,
			"submissions", (json_int_t)al.q[i].submissions,
			"fails", al.q[i].fails));
	for (i = 0; i < al.na; i++)
		if (al.a[i].state != AL_ENDED)
			json_array_append_new(as, json_pack(
				"{s:s, s:s, s:s, s:f, s:f, s:b}", "id",
				al.a[i].id, "queue",
				al.q[al.a[i].queue].cfg->name, "state",
				al.a[i].state == AL_RUNNING ? "running" :
				"pending", "submitted", al.a[i].submitted,
				"started", al.a[i].started, "joined",
				al.a[i].joined));
	return json_pack("{s:i, s:o, s:o}", "v", 1, "queues", qs,
			 "allocations", as);
}

/* Write the state if it changed, while ours to write (the lease). */
static void
persist(void)
{
	struct master *m = al.m;
	json_t *o;
	char *text;

	if (!al.dirty || store_check_lease(&m->store, 0) == -1)
		return;
	o = state_json();
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (ft_write_file_atomic(al.path, text, strlen(text)) == 0)
		al.dirty = 0;
	else
		log_warn("%s", al.path);
	free(text);
}

/* Take back what a master before us left. */
static void
restore(void)
{
	json_t *o = json_load_file(al.path, 0, NULL), *v;
	size_t i;

	if (o == NULL)
		return;
	json_array_foreach(json_object_get(o, "queues"), i, v) {
		struct queue *q = queue_named(jget_str(v, "name", ""));

		if (q == NULL)
			continue;
		q->paused = jget_bool(v, "paused", 0);
		snprintf(q->reason, sizeof(q->reason), "%s",
			 jget_str(v, "reason", ""));
		q->submissions = (unsigned)jget_int(v, "submissions", 0);
		q->fails = (int)jget_int(v, "fails", 0);
	}
	json_array_foreach(json_object_get(o, "allocations"), i, v) {
		struct queue *q = queue_named(jget_str(v, "queue", ""));
		const char *id = jget_str(v, "id", "");
		struct allocation *a;

		if (q == NULL || *id == '\0' || find(id))
			continue;
		a = add(id, (int)(q - al.q),
			strcmp(jget_str(v, "state", ""), "running") == 0 ?
			AL_RUNNING : AL_PENDING);
		a->submitted = jget_num(v, "submitted", ft_wall());
		a->started = jget_num(v, "started", 0);
		a->joined = jget_bool(v, "joined", 0);
	}
	json_decref(o);
	log_info("allocation queues: %d allocations of a master before "
		 "followed", al.na);
}

/* ---- set-up, commands ---- */

/* A short hash of the state dir: the farm's job names are its own. */
static unsigned
farm_hash(const struct master *m)
{
	return crc32c(0, m->cfg.state_dir, strlen(m->cfg.state_dir)) & 0xffffff;
}

void
alloc_init(struct master *m)
{
	char *dir;
	int i;

	al.m = m;
	al.nq = m->cfg.nqueues;
	if (al.nq == 0)
		return;
	al.q = ft_calloc((size_t)al.nq, sizeof(*al.q));
	snprintf(al.prefix, sizeof(al.prefix), "ftfarm.%06x", farm_hash(m));
	al.path = ft_asprintf("%s/%s", m->cfg.state_dir, STATE_FILE);
	dir = ft_asprintf("%s/alloc", m->cfg.state_dir);
	if (mkdir(dir, 0755) == -1 && errno != EEXIST)
		log_warn("%s", dir);
	free(dir);
	for (i = 0; i < al.nq; i++) {
		al.q[i].cfg = &m->cfg.queues[i];
		snprintf(al.q[i].name, sizeof(al.q[i].name), "%s.%s",
			 al.prefix, al.q[i].cfg->name);
		if (write_script(m, &al.q[i]) == -1) {
			free(al.q[i].script);
			al.q[i].script = NULL;
			pause_queue(&al.q[i], "its script cannot be written "
				    "in the state dir");
		}
	}
	restore();
	for (i = 0; i < al.nq; i++)
		if (!al.q[i].paused)
			dry_run(m, i);
	al.next_follow = 0;
}

void
alloc_free(struct master *m)
{
	int i;

	(void)m;
	for (i = 0; i < al.nq; i++)
		free(al.q[i].script);
	free(al.q);
	free(al.a);
	free(al.busy_at);
	free(al.path);
	memset(&al, 0, sizeof(al));
}

/* The seconds allocation A has left, or -1 when not known. */
static double
time_left(const struct allocation *a)
{
	return a->state == AL_RUNNING && a->end > 0 ?
	       fmax(0, a->end - ft_wall()) : -1;
}

static const char *
state_name(int s)
{
	return s == AL_PENDING ? "pending" : s == AL_RUNNING ? "running" :
	       "ended";
}

json_t *
alloc_json(struct master *m)
{
	json_t *qs = json_array();
	int i, k;

	for (i = 0; i < al.nq; i++) {
		const struct ft_alloc_queue *c = al.q[i].cfg;
		json_t *as = json_array();

		for (k = 0; k < al.na; k++) {
			const struct allocation *a = &al.a[k];
			double left = time_left(a);

			if (a->queue != i)
				continue;
			json_array_append_new(as, json_pack(
				"{s:s, s:s, s:i, s:s, s:o, s:s}", "id", a->id,
				"state", state_name(a->state), "nodes",
				c->nodes, "hosts", a->nodes, "time_left",
				left >= 0 ? json_real(left) : json_null(),
				"reason", a->why));
		}
		json_array_append_new(qs, json_pack(
			"{s:s, s:s, s:s, s:I, s:i, s:i, s:i, s:f, s:o}",
			"name", c->name,
			"state", al.q[i].paused ? "paused" : "active",
			"reason", al.q[i].reason,
			"submissions", (json_int_t)al.q[i].submissions,
			"nodes", c->nodes, "max_nodes", c->max_nodes,
			"backlog", c->backlog, "time_limit_s", c->time_limit,
			"allocations", as));
	}
	(void)m;
	return json_pack("{s:o}", "queues", qs);
}

int
alloc_set(struct master *m, const char *name, int paused, char *err,
	  size_t n)
{
	struct queue *q = queue_named(name);

	if (q == NULL) {
		snprintf(err, n, "no allocation queue \"%s\"", name);
		return -1;
	}
	if (paused && !q->paused) {
		pause_queue(q, "paused by an operator");
	} else if (!paused && q->paused) {
		q->paused = 0;
		q->fails = 0;
		q->reason[0] = '\0';
		q->next_submit = 0;
		log_info("allocation queue %s resumed", q->cfg->name);
		ev_queue_resumed(&m->events, q->cfg->name);
		dry_run(m, (int)(q - al.q));
		al.dirty = 1;
	}
	persist();
	return 0;
}

void
alloc_stop(struct master *m)
{
	char *argv[64];
	char out[256];
	int i, k = 0;

	if (al.nq == 0)
		return;
	argv[k++] = "scancel";
	for (i = 0; i < al.na && k < 63; i++)
		if (al.a[i].state != AL_ENDED)
			argv[k++] = al.a[i].id;
	argv[k] = NULL;
	if (k == 1)
		return;
	log_info("cancelling the farm's %d allocations", k - 1);
	/* The master stops: a few seconds of waiting for scancel are fine. */
	if (ft_run_capture(argv, 10, out, sizeof(out)) != 0)
		log_warnx("scancel did not cancel them all");
	for (i = 0; i < al.na; i++)
		if (al.a[i].state != AL_ENDED) {
			al.a[i].cancelled = 1;
			ended(&al.a[i], "cancelled: the farm stops");
		}
	al.dirty = 1;
	persist();
	(void)m;
}
