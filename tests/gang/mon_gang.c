/* mon_gang: the master's side of one gang attempt (see mon_gang.h). */
#include "mon_gang.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "gang_proto.h"
#include "treq.h"
#include "util.h"

#define SPAWN_TIMEOUT 20.0	/* seconds a spawn may take */
#define DEATH_SETTLE 3.0	/* seconds between a death and the end */
#define HELLO_TIMEOUT 60.0	/* seconds from spawn to every hello */
#define SEND_TIMEOUT 5.0	/* a message to a rank not out by then is dropped */
#define STOP_GRACE 3.0		/* seconds for ranks to leave after STOP */
#define GONE_TIMEOUT 10.0	/* seconds for killed ranks to vanish */
#define NAP_MAX 0.002

enum mstate { M_RUN = 1, M_WRITING, M_DONE, M_FAILED };

struct mrank {
	int pid;
	char host[64];
	int hello, alive;
	int role, phase, step;
	struct treq *ping;		/* outstanding ping, or NULL */
	int reported, ok, has_output;
	uint64_t digest;
	char *report;			/* JSON text of its figures */
	int written;			/* WRITTEN came: 1 ok, -1 not */
	char reason[256];
};

struct mgang {
	const struct mon_opts *o;
	int attempt;
	MPI_Comm inter;
	int n;
	struct mrank *r;
	struct treq_set *tq;
	uint64_t seq;
	uint32_t epoch;
	int newly_dead;			/* declared dead since the last notice */
	int deaths;
	double last_death;		/* ft_now() of the last declaration */
	double next_ping;
	enum mstate state;
	int writer;
	char reason[512];
};

/* Every gang pid that said hello, so that strays can be told apart. */
static int *known_pids;
static int nknown;

static void
know_pid(int pid)
{
	known_pids = ft_realloc(known_pids, (nknown + 1) * sizeof(int));
	known_pids[nknown++] = pid;
}

static int
is_known(int pid)
{
	int i;

	for (i = 0; i < nknown; i++)
		if (known_pids[i] == pid)
			return 1;
	return 0;
}

void
mon_event(const struct mon_opts *o, const char *name, json_t *fields)
{
	struct timespec ts;

	if (o->events == NULL) {
		json_decref(fields);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	json_object_set_new(fields, "ts", json_real(ts.tv_sec + ts.tv_nsec * 1e-9));
	json_object_set_new(fields, "event", json_string(name));
	json_dumpf(fields, o->events, JSON_COMPACT | JSON_SORT_KEYS);
	fputc('\n', o->events);
	fflush(o->events);
	json_decref(fields);
}

/* End the attempt with REASON (the first reason wins). */
static void
fail(struct mgang *m, const char *reason)
{
	if (m->state == M_FAILED || m->state == M_DONE)
		return;
	m->state = M_FAILED;
	snprintf(m->reason, sizeof(m->reason), "%s", reason);
}

/* Send MSG (taken over) of type TAG to RANK. */
static void
send_rank(struct mgang *m, int rank, int tag, struct ft_buf *msg)
{
	if (treq_isend(m->tq, msg, rank, tag, m->inter,
		       ft_now() + SEND_TIMEOUT, 0, NULL, NULL) == NULL)
		fail(m, "MPI refused a send to a gang rank");
}

/* Declare RANK dead: SIGKILL it (hung or not) and forget its requests. */
static void
declare_dead(struct mgang *m, int rank, const char *why)
{
	struct mrank *r = &m->r[rank];

	if (!r->alive)
		return;
	r->alive = 0;
	r->ping = NULL;
	if (r->pid > 0)
		kill(r->pid, SIGKILL);
	treq_retire_peer(m->tq, m->inter, rank);
	m->newly_dead++;
	m->deaths++;
	m->last_death = ft_now();
	mon_event(m->o, "dead", json_pack("{s:i,s:i,s:i,s:s}", "attempt",
					  m->attempt, "rank", rank, "pid",
					  r->pid, "reason", why));
}

/* A ping ended: answered, or not in time. */
static void
on_ping(struct treq *t, enum treq_outcome outcome, void *arg)
{
	struct mgang *m = arg;
	struct mrank *r = &m->r[t->peer];

	r->ping = NULL;
	if (outcome == TREQ_EXPIRED &&
	    (m->state == M_RUN || m->state == M_WRITING))
		declare_dead(m, t->peer, "no pong in time");
}

/* Ping every live rank without a ping under way. */
static void
ping_all(struct mgang *m, double now)
{
	int i;

	for (i = 0; i < m->n; i++) {
		struct mrank *r = &m->r[i];
		struct ft_buf b = { 0 };

		if (!r->alive || r->ping)
			continue;
		gang_put_u64(&b, ++m->seq);
		r->ping = treq_isend(m->tq, &b, i, GANG_MSG_PING, m->inter,
				     now + m->o->ping_timeout, 1, on_ping, m);
		if (r->ping)
			r->ping->key = m->seq;
	}
}

/* Send the notice of a new epoch to every live rank. */
static void
notify(struct mgang *m)
{
	int *dead = ft_malloc(m->n * sizeof(int)), nd = 0, i;
	json_t *list = json_array();

	for (i = 0; i < m->n; i++)
		if (!m->r[i].alive) {
			dead[nd++] = i;
			json_array_append_new(list, json_integer(i));
		}
	m->epoch++;
	for (i = 0; i < m->n; i++) {
		struct ft_buf b = { 0 };

		if (!m->r[i].alive)
			continue;
		gang_put_dead(&b, m->epoch, dead, nd);
		send_rank(m, i, GANG_MSG_DEAD, &b);
	}
	m->newly_dead = 0;
	free(dead);
	mon_event(m->o, "notice", json_pack("{s:i,s:i,s:o}", "attempt",
					    m->attempt, "epoch", m->epoch,
					    "dead", list));
}

/* Send a scheduled signal to RANK now that it announced STEP at EPOCH. */
static void
run_kills(struct mgang *m, int rank, int step, int epoch)
{
	int i;

	for (i = 0; i < m->o->nkills; i++) {
		struct mon_kill *k = &m->o->kills[i];

		if (k->done || k->rank != rank || k->step != step ||
		    epoch < k->min_epoch || k->attempt != m->attempt ||
		    !m->r[rank].alive)
			continue;
		k->done = 1;
		kill(m->r[rank].pid, k->sig);
		mon_event(m->o, "kill", json_pack("{s:i,s:i,s:i,s:i,s:i,s:i}",
			  "attempt", m->attempt, "rank", rank, "pid",
			  m->r[rank].pid, "signal", k->sig, "step", step,
			  "epoch", epoch));
	}
}

/* HELLO from RANK. */
static void
on_hello(struct mgang *m, int rank, const char *p, int n)
{
	struct gang_hello h;
	struct mrank *r = &m->r[rank];

	if (gang_get_hello(p, (size_t)n, &h) == -1 ||
	    h.version != GANG_PROTO_VERSION || (int)h.rank != rank ||
	    (int)h.size != m->n) {
		fail(m, "bad HELLO from a gang rank");
		return;
	}
	r->hello = 1;
	r->pid = (int)h.pid;
	know_pid(r->pid);
	snprintf(r->host, sizeof(r->host), "%.*s", (int)h.host_len, h.host);
}

/* PONG or PROGRESS from RANK. */
static void
on_status(struct mgang *m, int rank, int tag, const char *p, int n)
{
	struct gang_status s;
	struct mrank *r = &m->r[rank];
	struct treq *t;

	if (gang_get_status(p, (size_t)n, &s) == -1) {
		fail(m, "bad status from a gang rank");
		return;
	}
	r->role = s.role;
	r->phase = s.phase;
	r->step = s.step;
	if (tag == GANG_MSG_PONG) {
		t = treq_find(m->tq, m->inter, rank, GANG_MSG_PING, s.seq);
		if (t)
			treq_reply(t);
		return;
	}
	if (s.phase != GANG_PHASE_DONE)
		r->reported = 0;	/* at work again: its RESULT is stale */
	mon_event(m->o, "progress", json_pack("{s:i,s:i,s:i,s:s,s:s,s:i}",
		  "attempt", m->attempt, "rank", rank, "step", s.step, "phase",
		  gang_phase_name(s.phase), "role", gang_role_name(s.role),
		  "epoch", s.epoch));
	run_kills(m, rank, s.phase == GANG_PHASE_RECOVER ? MON_STEP_RECOVER
							 : s.step, (int)s.epoch);
}

/* RESULT from RANK. */
static void
on_result(struct mgang *m, int rank, const char *p, int n)
{
	struct gang_result res;
	struct mrank *r = &m->r[rank];

	if (gang_get_result(p, (size_t)n, &res) == -1) {
		fail(m, "bad RESULT from a gang rank");
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
	mon_event(m->o, "result", json_pack("{s:i,s:i,s:b,s:s,s:I}",
		  "attempt", m->attempt, "rank", rank, "ok", res.ok, "reason",
		  r->reason, "epoch", (json_int_t)res.epoch));
	if (!res.ok) {
		char why[512];

		snprintf(why, sizeof(why), "rank %d: %s", rank, r->reason);
		fail(m, why);
	}
}

/* WRITTEN from RANK. */
static void
on_written(struct mgang *m, int rank, const char *p, int n)
{
	struct gang_written w;
	struct mrank *r = &m->r[rank];

	if (gang_get_written(p, (size_t)n, &w) == -1) {
		fail(m, "bad WRITTEN from a gang rank");
		return;
	}
	r->written = w.ok ? 1 : -1;
	snprintf(r->reason, sizeof(r->reason), "%.*s", (int)w.reason_len,
		 w.reason);
	mon_event(m->o, "written", json_pack("{s:i,s:i,s:b,s:s}", "attempt",
		  m->attempt, "rank", rank, "ok", w.ok, "reason", r->reason));
}

static void post_recv(struct mgang *m);

/* The standing receive got a message: dispatch it, post the next. */
static void
on_msg(struct treq *t, enum treq_outcome outcome, void *arg)
{
	struct mgang *m = arg;
	int rank = t->status.MPI_SOURCE, tag = t->status.MPI_TAG;

	if (outcome != TREQ_DONE)
		return;
	post_recv(m);
	if (rank < 0 || rank >= m->n || t->error != MPI_SUCCESS)
		return;
	if (!m->r[rank].alive)
		return;		/* a rank declared dead no longer counts */
	switch (tag) {
	case GANG_MSG_HELLO:
		on_hello(m, rank, t->buf, t->count);
		break;
	case GANG_MSG_PONG:
	case GANG_MSG_PROGRESS:
		on_status(m, rank, tag, t->buf, t->count);
		break;
	case GANG_MSG_RESULT:
		on_result(m, rank, t->buf, t->count);
		break;
	case GANG_MSG_WRITTEN:
		on_written(m, rank, t->buf, t->count);
		break;
	default:
		fail(m, "unexpected message from a gang rank");
	}
}

static void
post_recv(struct mgang *m)
{
	if (treq_irecv(m->tq, GANG_MSG_MAX, MPI_ANY_SOURCE, MPI_ANY_TAG,
		       m->inter, INFINITY, on_msg, m) == NULL)
		fail(m, "cannot receive from the gang");
}

/* Sleep a little while nothing happens. */
static void
nap(int *idle)
{
	double s = *idle < 50 ? 0 : *idle < 200 ? 0.00005 : NAP_MAX;

	(*idle)++;
	if (s > 0)
		ft_sleep(s);
}

/*
 * Spawns run on a thread of their own (the monitor runs with
 * MPI_THREAD_MULTIPLE), over a duplicate of MPI_COMM_SELF: under a stream
 * of kills Open MPI's MPI_Comm_spawn has been seen to hang in PMIx (see
 * master/launch.c).  A spawn not back in SPAWN_TIMEOUT seconds is given up
 * on: the attempt fails, its thread and request are left behind, and the
 * program must then leave without MPI_Finalize (mon_gang_spawn_hung),
 * after killing the hung spawn's processes (mon_gang_kill_strays).
 * Killing them earlier made the following spawns hang too (2 of 2), while
 * a new spawn beside a hung one worked (7 of 7).
 */
struct spawn_req {
	char *exe, *argv[2];
	int n;
	MPI_Comm self, inter;
	int rc, done;
};

static pthread_mutex_t sp_mu = PTHREAD_MUTEX_INITIALIZER;
static int sp_hung;

int
mon_gang_spawn_hung(void)
{
	return sp_hung;
}

static void *
spawn_thread(void *arg)
{
	struct spawn_req *r = arg;
	MPI_Info info;
	int *errs = ft_calloc(r->n, sizeof(int)), rc;

	MPI_Info_create(&info);
	MPI_Info_set(info, "bind_to", "none");
	rc = MPI_Comm_spawn(r->exe, r->argv[0] ? r->argv : MPI_ARGV_NULL, r->n,
			    info, 0, r->self, &r->inter, errs);
	MPI_Info_free(&info);
	free(errs);
	pthread_mutex_lock(&sp_mu);
	r->rc = rc;
	r->done = 1;
	pthread_mutex_unlock(&sp_mu);
	return NULL;
}

/* Has spawn R ended? */
static int
spawn_done(struct spawn_req *r)
{
	int done;

	pthread_mutex_lock(&sp_mu);
	done = r->done;
	pthread_mutex_unlock(&sp_mu);
	return done;
}

/* Start spawn R on a detached thread.  0 or -1. */
static int
spawn_start(struct spawn_req *r)
{
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (MPI_Comm_dup(MPI_COMM_SELF, &r->self) != MPI_SUCCESS)
		return -1;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, spawn_thread, r);
	pthread_attr_destroy(&attr);
	return rc == 0 ? 0 : -1;
}

/* Is PID a child of our launcher (mpirun) running EXE? */
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

json_t *
mon_gang_kill_strays(const struct mon_opts *o)
{
	char exe[PATH_MAX];
	json_t *killed = json_array();
	struct dirent *d;
	DIR *dir;

	if (realpath(o->gang_bin, exe) == NULL || !(dir = opendir("/proc")))
		return killed;
	while ((d = readdir(dir)) != NULL) {
		int pid = atoi(d->d_name);

		if (pid <= 0 || is_known(pid) || !launched_exe(pid, exe))
			continue;
		kill(pid, SIGKILL);
		json_array_append_new(killed, json_integer(pid));
	}
	closedir(dir);
	return killed;
}

/* Wait until spawn R ends or DEADLINE passes.  1 if it ended. */
static int
spawn_wait(struct spawn_req *r, double deadline)
{
	int idle = 0;

	while (!spawn_done(r) && ft_now() < deadline)
		nap(&idle);
	return spawn_done(r);
}

/* Spawn the gang.  0, or -1 with M->reason. */
static int
spawn(struct mgang *m)
{
	struct spawn_req *r = ft_calloc(1, sizeof(*r));

	r->exe = ft_strdup(m->o->gang_bin);
	r->argv[0] = m->o->plugin_dir ? ft_strdup(m->o->plugin_dir) : NULL;
	r->n = m->n;
	if (spawn_start(r) == -1) {
		snprintf(m->reason, sizeof(m->reason), "cannot start a spawn");
		return -1;
	}
	if (!spawn_wait(r, ft_now() + SPAWN_TIMEOUT)) {
		sp_hung = 1;	/* R stays the thread's */
		mon_event(m->o, "spawn_hung", json_pack("{s:i}", "attempt",
							m->attempt));
		snprintf(m->reason, sizeof(m->reason), "MPI_Comm_spawn of %d "
			 "ranks hung for %.0f s", m->n, SPAWN_TIMEOUT);
		return -1;
	}
	MPI_Comm_free(&r->self);
	m->inter = r->inter;
	if (r->rc != MPI_SUCCESS && !m->reason[0])
		snprintf(m->reason, sizeof(m->reason), "MPI_Comm_spawn of %d "
			 "ranks failed", m->n);
	else if (r->rc == MPI_SUCCESS)
		MPI_Comm_set_errhandler(m->inter, MPI_ERRORS_RETURN);
	free(r->exe);
	free(r->argv[0]);
	free(r);
	return m->reason[0] ? -1 : 0;
}

/* Wait for every HELLO, then send START.  0, or -1 (attempt failed). */
static int
start(struct mgang *m, const char *job)
{
	double end = ft_now() + HELLO_TIMEOUT;
	struct gang_start st = { m->attempt, m->o->silence, job, strlen(job) };
	int idle = 0, i, all = 0;
	json_t *ranks = json_array();

	while (!all && m->state == M_RUN && ft_now() < end) {
		if (treq_test(m->tq, ft_now()) == 0)
			nap(&idle);
		for (all = 1, i = 0; i < m->n; i++)
			all &= m->r[i].hello;
	}
	if (!all) {
		fail(m, "the gang did not say hello");
		json_decref(ranks);
		return -1;
	}
	for (i = 0; i < m->n; i++) {
		struct ft_buf b = { 0 };

		gang_put_start(&b, &st);
		send_rank(m, i, GANG_MSG_START, &b);
		json_array_append_new(ranks, json_pack("{s:i,s:i,s:s}", "rank",
					i, "pid", m->r[i].pid, "host",
					m->r[i].host));
	}
	mon_event(m->o, "started", json_pack("{s:i,s:o}", "attempt",
					     m->attempt, "ranks", ranks));
	return 0;
}

/* Ask the next live rank that has the output to write it. */
static void
ask_writer(struct mgang *m)
{
	struct ft_buf b = { 0 };
	int i;

	m->writer = -1;
	for (i = 0; i < m->n && m->writer < 0; i++)
		if (m->r[i].alive && m->r[i].has_output && m->r[i].ok &&
		    m->r[i].written == 0)
			m->writer = i;
	if (m->writer < 0) {
		fail(m, "no live rank can write the output");
		return;
	}
	ft_buf_reserve(&b, 1);
	send_rank(m, m->writer, GANG_MSG_WRITE, &b);
	m->state = M_WRITING;
	mon_event(m->o, "write", json_pack("{s:i,s:i}", "attempt", m->attempt,
					   "rank", m->writer));
}

/* Have all live ranks reported ok, with one digest?  Then ask a writer. */
static void
check_results(struct mgang *m)
{
	int i, live = 0, have = 0, first = -1;

	for (i = 0; i < m->n; i++) {
		struct mrank *r = &m->r[i];

		if (!r->alive)
			continue;
		live++;
		if (!r->reported)
			return;
		if (r->has_output && first < 0)
			first = i;
		if (r->has_output && r->digest != m->r[first].digest) {
			fail(m, "gang ranks disagree on the result");
			return;
		}
		have++;
	}
	if (live == 0)
		fail(m, "every rank of the gang died");
	else if (first < 0)
		fail(m, "no rank of the gang has the output");
	else if (have == live)
		ask_writer(m);
}

/* In M_WRITING: the writer answered, or died. */
static void
check_writer(struct mgang *m)
{
	struct mrank *w = &m->r[m->writer];
	char why[512];

	if (w->written > 0) {
		m->state = M_DONE;
	} else if (w->written < 0) {
		snprintf(why, sizeof(why), "rank %d could not write: %s",
			 m->writer, w->reason);
		fail(m, why);
	} else if (!w->alive) {
		ask_writer(m);
	}
}

/* One turn of the attempt's loop.  Returns how much happened. */
static int
turn(struct mgang *m, double now)
{
	int ran = treq_test(m->tq, now);

	if (now >= m->next_ping) {
		ping_all(m, now);
		m->next_ping = now + m->o->heartbeat;
	}
	if (m->newly_dead && (m->state == M_RUN || m->state == M_WRITING))
		notify(m);	/* the writer may be waiting on the dead */
	if (m->state == M_RUN)
		check_results(m);
	else if (m->state == M_WRITING)
		check_writer(m);
	return ran;
}

/* Run the attempt from START to its end (M_DONE or M_FAILED). */
static void
watch(struct mgang *m)
{
	double end = ft_now() + m->o->attempt_timeout;
	int idle = 0;

	m->next_ping = ft_now();
	while (m->state == M_RUN || m->state == M_WRITING) {
		double now = ft_now();

		if (now > end) {
			fail(m, "the attempt timed out");
			break;
		}
		if (turn(m, now) > 0)
			idle = 0;
		else
			nap(&idle);
	}
}

/* Are the gang's processes gone? */
static int
all_gone(const struct mgang *m)
{
	int i;

	for (i = 0; i < m->n; i++)
		if (ft_pid_alive(m->r[i].pid))
			return 0;
	return 1;
}

/* Serve MPI until END, or (UNTIL_GONE) until every process is gone. */
static void
wait_gone_until(struct mgang *m, double end, int until_gone)
{
	int idle = 0;

	while (!(until_gone && all_gone(m)) && ft_now() < end) {
		treq_test(m->tq, ft_now());
		nap(&idle);
	}
}

/* Wait up to S seconds (serving MPI) for every process to be gone. */
static void
wait_gone(struct mgang *m, double s)
{
	wait_gone_until(m, ft_now() + s, 1);
}

/* STOP the live ranks, kill what stays, free the intercommunicator.
 * Not within DEATH_SETTLE seconds of a death: ending a gang that soon
 * after ranks of it were killed made the next MPI_Comm_spawn hang in
 * MPI_Init's fence (about 1 run in 3 here; 0 of 12 with the wait). */
static void
teardown(struct mgang *m)
{
	uint32_t flags = m->deaths == 0 ? GANG_STOP_FINALIZE : 0;
	int i;

	if (m->deaths)
		wait_gone_until(m, m->last_death + DEATH_SETTLE, 0);

	for (i = 0; i < m->n; i++) {
		struct ft_buf b = { 0 };

		if (!m->r[i].alive || !m->r[i].hello)
			continue;
		gang_put_u32(&b, flags);
		send_rank(m, i, GANG_MSG_STOP, &b);
	}
	wait_gone(m, STOP_GRACE);
	for (i = 0; i < m->n; i++)
		if (ft_pid_alive(m->r[i].pid))
			kill(m->r[i].pid, SIGKILL);
	wait_gone(m, GONE_TIMEOUT);
	for (i = 0; i < m->n; i++)
		treq_retire_peer(m->tq, m->inter, i);
	treq_retire_peer(m->tq, m->inter, MPI_ANY_SOURCE);
	MPI_Comm_free(&m->inter);
}

/* The figures of the live ranks' reports, merged in world rank order (a
 * key of a lower rank wins), or NULL when none has any. */
static json_t *
merged_report(const struct mgang *m)
{
	json_t *all = json_object(), *one;
	json_error_t je;
	int i;

	for (i = 0; i < m->n; i++) {
		if (!m->r[i].alive || !m->r[i].report || !m->r[i].report[0])
			continue;
		one = json_loads(m->r[i].report, 0, &je);
		if (json_is_object(one))
			json_object_update_missing(all, one);
		json_decref(one);
	}
	if (json_object_size(all) == 0) {
		json_decref(all);
		return NULL;
	}
	return all;
}

/* What the attempt produced, into OUT. */
static void
outcome(struct mgang *m, struct mon_outcome *out)
{
	out->ok = m->state == M_DONE;
	snprintf(out->reason, sizeof(out->reason), "%s",
		 out->ok ? "" : m->reason);
	out->deaths = m->deaths;
	out->notices = (int)m->epoch;
	out->writer = out->ok ? m->writer : -1;
	out->report = out->ok ? merged_report(m) : NULL;
}

static void
mgang_free(struct mgang *m)
{
	int i;

	for (i = 0; i < m->n; i++)
		free(m->r[i].report);
	free(m->r);
}

int
mon_gang_run(const struct mon_opts *o, struct treq_set *tq,
	     const char *job_text, int nranks, int attempt,
	     struct mon_outcome *out)
{
	struct mgang m;
	double t0 = ft_now();
	int i;

	memset(&m, 0, sizeof(m));
	m.o = o;
	m.attempt = attempt;
	m.n = nranks;
	m.r = ft_calloc(nranks, sizeof(*m.r));
	for (i = 0; i < nranks; i++)
		m.r[i].alive = 1;
	m.state = M_RUN;
	m.writer = -1;
	m.tq = tq;
	if (spawn(&m) == -1) {
		snprintf(out->reason, sizeof(out->reason), "%s", m.reason);
		out->ok = 0;
		mgang_free(&m);
		return -1;
	}
	out->spawn_seconds = ft_now() - t0;
	post_recv(&m);
	if (start(&m, job_text) == 0)
		watch(&m);
	teardown(&m);
	outcome(&m, out);
	out->seconds = ft_now() - t0;
	mgang_free(&m);
	return 0;
}
