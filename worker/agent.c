/* agent: the worker's thread that owns MPI. */
#include "agent.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doze.h"
#include "proto.h"
#include "runner.h"

#define HELLO_TIMEOUT 60.0	/* seconds to wait for the master's welcome */
#define SPIN_ITERS 200		/* polls before the first nap (none while a
				 * task waits in the runner: has_queued) */
#define NAP_MIN 0.00005
/* MPI has no descriptor to sleep on: the agent naps between polls (see
 * doze.h), longer the longer nothing has happened.  Results wake it at
 * once, and so does a message that comes with a hint on the MPI's
 * sockets.  Right after activity (the next phase of a job, the next short
 * task) naps are short; once the worker has been idle a while they grow
 * to the welcome's idle_nap, within the ping timeout, for a message may
 * come without a hint (over shared memory, another MPI).  Once the hints
 * have proved right (doze_trusted) an idle worker sleeps until one comes,
 * or TRUSTED_NAP: the last MPI call before each sleep is the test of the
 * receive, so no message can wait in the library's buffers unseen. */
#define NAP_SOON 0.001		/* cap for QUIET_SOON seconds after activity */
#define QUIET_SOON 0.05
#define NAP_MAX 0.01		/* cap while busy or active lately */
#define QUIET_IDLE 1.0		/* idle past this: naps up to idle_nap */
#define TRUSTED_NAP 2.0		/* ... or this, when hints are trusted */
#define BYE_TIMEOUT 5.0
/* After a send of results of tasks shorter than this, while tasks still
 * wait in the runner, the agent sleeps this long before it looks again,
 * so that the next message carries the results of many tiny tasks rather
 * than one or two (each message costs both sides a system call and a
 * poll, more than a no-op task itself).  The master keeps about 2 ms of
 * work queued at each worker (sched.c), so results a little late leave no
 * worker idle; results of longer tasks go at once, as they come. */
#define HOLD 0.0001

/* A send in flight: its buffer lives until MPI is done with it. */
struct out {
	MPI_Request req;
	char *buf;
	double deadline;
	struct out *next;
};

struct agent {
	MPI_Comm comm;
	int rank;
	int slot;
	struct runner *runner;
	struct doze doze;
	MPI_Request recv;
	char *rbuf;
	struct out *outs;
	double last_heard;
	double last_activity;		/* a message or a result, monotonic */
	double last_seconds;		/* the last result's task time */
	double master_timeout;
	double idle_nap;		/* longest nap when idle (the welcome's) */
	int welcomed;
	int stop;
	int no_finalize;		/* leave without MPI_Finalize */
};

/* Leave at once for WHY.  The running task's process group goes too:
 * nobody would collect its result, and a new job may already run the
 * task elsewhere. */
static void
die(struct agent *a, const char *why)
{
	if (a->runner)
		runner_kill_group(a->runner);
	fprintf(stderr, "ftfarm-worker %d (pid %d): %s; exiting\n", a->slot,
		(int)getpid(), why);
	_exit(1);	/* MPI_Finalize could wait forever for a dead master */
}

static void
send_buf(struct agent *a, int tag, struct ft_buf *b)
{
	struct out *o = ft_calloc(1, sizeof(*o));

	o->buf = b->data;
	o->deadline = ft_now() + a->master_timeout;
	b->data = NULL;
	if (MPI_Isend(o->buf, (int)b->len, MPI_BYTE, a->rank, tag, a->comm,
		      &o->req) != MPI_SUCCESS)
		die(a, "MPI_Isend failed");
	b->len = b->cap = 0;
	o->next = a->outs;
	a->outs = o;
}

/* Complete finished sends; a send stuck past its deadline means the master
 * is gone.  Returns 1 if any completed. */
static int
test_sends(struct agent *a, double now)
{
	struct out **p = &a->outs;
	int any = 0;

	while (*p) {
		struct out *o = *p;
		int done = 0;

		MPI_Test(&o->req, &done, MPI_STATUS_IGNORE);
		if (!done) {
			if (now > o->deadline)
				die(a, "a send to the master did not complete");
			p = &o->next;
			continue;
		}
		*p = o->next;
		free(o->buf);
		free(o);
		any = 1;
	}
	return any;
}

static void
send_hello(struct agent *a, const struct ft_plugins *pl)
{
	char host[64] = "";
	char *names = ft_plugins_names(pl);
	struct proto_hello h = {
		.version = FT_PROTO_VERSION,
		.slot = (uint32_t)a->slot,
		.pid = (uint32_t)getpid(),
		.start = ft_proc_start(getpid()),
		.host = host,
		.plugins = names,
	};
	struct ft_buf b = { 0 };

	gethostname(host, sizeof(host) - 1);
	h.host_len = strlen(host);
	h.plugins_len = strlen(names);
	proto_put_hello(&b, &h);
	send_buf(a, FT_MSG_HELLO, &b);
	free(names);
}

static void
on_assign(struct agent *a, const void *p, size_t n)
{
	struct runner_task *head = NULL, **tail = &head;
	struct proto_iter it;
	struct proto_task pt;
	int rc;

	if (proto_iter_init(&it, p, n) == -1)
		die(a, "malformed assign message");
	while ((rc = proto_next_task(&it, &pt)) == 1) {
		struct runner_task *t = runner_task_new(pt.tid, pt.attempt,
							pt.spec, pt.spec_len,
							pt.cpus, pt.gpus,
							pt.gpus_len, pt.cpuset,
							pt.cpuset_len);

		*tail = t;
		tail = &t->next;
	}
	if (rc == -1)
		die(a, "malformed assign message");
	runner_push(a->runner, head);
}

static void
on_ping(struct agent *a, const void *p, size_t n)
{
	struct proto_pong pong;
	struct ft_buf b = { 0 };

	if (proto_get_ping(p, n, &pong.seq) == -1)
		die(a, "malformed ping");
	pong.running = runner_running(a->runner, &pong.queued);
	proto_put_pong(&b, &pong);
	send_buf(a, FT_MSG_PONG, &b);
}

static void
on_cancel(struct agent *a, const void *p, size_t n)
{
	struct proto_cancel c;

	if (proto_get_cancel(p, n, &c) == -1)
		die(a, "malformed cancel");
	runner_cancel(a->runner, c.tid, c.attempt);
}

static void
on_welcome(struct agent *a, const void *p, size_t n)
{
	struct proto_welcome w;

	if (proto_get_welcome(p, n, &w) == -1)
		die(a, "malformed welcome");
	runner_set_output_cap(a->runner, w.output_cap);
	runner_set_node(a->runner, w.node, w.node_len);
	a->master_timeout = w.master_timeout;
	if (w.idle_nap > NAP_MAX)
		a->idle_nap = w.idle_nap;
	a->welcomed = 1;
}

static void
on_stop(struct agent *a, const void *p, size_t n)
{
	uint32_t flags;

	if (proto_get_stop(p, n, &flags) == -1)
		die(a, "malformed stop");
	a->stop = 1;
	a->no_finalize = (flags & FT_STOP_NO_FINALIZE) != 0;
}

static void
handle(struct agent *a, int tag, const void *p, size_t n)
{
	if (!a->welcomed && tag != FT_MSG_WELCOME)
		die(a, "the master spoke before its welcome");
	switch (tag) {
	case FT_MSG_WELCOME: on_welcome(a, p, n); break;
	case FT_MSG_ASSIGN: on_assign(a, p, n); break;
	case FT_MSG_PING: on_ping(a, p, n); break;
	case FT_MSG_CANCEL: on_cancel(a, p, n); break;
	case FT_MSG_STOP: on_stop(a, p, n); break;
	default: die(a, "unexpected message from the master");
	}
}

/* Receive what has arrived.  Returns 0 if nothing came, 1 for a ping
 * (answered: no sign of work to come), 2 for any other message. */
static int
poll_recv(struct agent *a, double now)
{
	MPI_Status st;
	int done = 0, count = 0;

	if (MPI_Test(&a->recv, &done, &st) != MPI_SUCCESS)
		die(a, "receive failed");
	if (!done)
		return 0;
	MPI_Get_count(&st, MPI_BYTE, &count);
	a->last_heard = now;
	handle(a, st.MPI_TAG, a->rbuf, (size_t)count);
	if (MPI_Irecv(a->rbuf, FT_MSG_MAX, MPI_BYTE, a->rank, MPI_ANY_TAG,
		      a->comm, &a->recv) != MPI_SUCCESS)
		die(a, "cannot post a receive");
	return st.MPI_TAG == FT_MSG_PING ? 1 : 2;
}

/* Send finished results in messages of at most FT_MSG_MAX bytes.
 * Returns 1 if any were sent. */
static int
flush_results(struct agent *a)
{
	struct runner_result *list = runner_take(a->runner), *r;
	struct ft_buf b = { 0 };
	uint32_t count = 0;

	if (list == NULL)
		return 0;
	proto_begin_list(&b);
	for (r = list; r; r = r->next) {
		struct proto_result pr = {
			.tid = r->tid, .attempt = r->attempt,
			.ok = (uint8_t)r->res.ok, .exit_code = r->res.exit_code,
			.seconds = r->seconds, .reason = r->res.reason,
			.reason_len = strlen(r->res.reason),
			.out = r->res.out, .out_len = r->res.out_len,
			.err = r->res.err, .err_len = r->res.err_len,
		};

		if (count > 0 && b.len + proto_result_size(&pr) > FT_MSG_MAX) {
			proto_set_count(&b, count);
			send_buf(a, FT_MSG_RESULT, &b);
			proto_begin_list(&b);
			count = 0;
		}
		proto_put_result(&b, &pr);
		count++;
		a->last_seconds = r->seconds;	/* the last one's stays */
	}
	proto_set_count(&b, count);
	send_buf(a, FT_MSG_RESULT, &b);
	runner_sent(a->runner);
	runner_result_free(list);
	return 1;
}

/* Say bye and wait (bounded) until the master has it. */
static void
say_bye(struct agent *a)
{
	struct ft_buf b = { 0 };
	double until = ft_now() + BYE_TIMEOUT;

	proto_put_bye(&b);
	send_buf(a, FT_MSG_BYE, &b);
	while (a->outs && ft_now() < until) {
		test_sends(a, ft_now());
		ft_sleep(0.0005);
	}
	MPI_Cancel(&a->recv);
	MPI_Request_free(&a->recv);
}

/* Does R hold a task that waits behind the running one?  Then nothing
 * the master may send is urgent: the runner's result wakes the agent,
 * and spinning on MPI would only take CPU from the task. */
static int
has_queued(struct runner *r)
{
	uint32_t queued;

	runner_running(r, &queued);
	return queued > 0;
}

/* The longest nap for now, NOW. */
static double
nap_cap(struct agent *a, double now)
{
	double quiet = now - a->last_activity;

	if (quiet < QUIET_SOON)
		return NAP_SOON;
	if (quiet < QUIET_IDLE || runner_busy(a->runner))
		return NAP_MAX;
	if (doze_trusted(&a->doze))
		return fmax(a->idle_nap, fmin(TRUSTED_NAP, a->master_timeout / 4));
	return a->idle_nap;
}

int
agent_run(MPI_Comm comm, int rank, int slot, const struct ft_plugins *pl)
{
	struct agent a = { .comm = comm, .rank = rank, .slot = slot };
	double nap = NAP_MIN, now;
	int spins = 0, dozed = 0;

	a.runner = runner_start(pl);
	if (a.runner == NULL)
		die(&a, "cannot start the runner thread");
	a.rbuf = ft_malloc(FT_MSG_MAX);
	a.master_timeout = HELLO_TIMEOUT;
	a.idle_nap = NAP_MAX;
	a.last_heard = a.last_activity = ft_now();
	MPI_Irecv(a.rbuf, FT_MSG_MAX, MPI_BYTE, rank, MPI_ANY_TAG, comm, &a.recv);
	send_hello(&a, pl);
	while (!a.stop) {
		int active, got, sent;

		now = ft_now();
		active = sent = flush_results(&a);
		test_sends(&a, now);
		/* Last before a nap: see TRUSTED_NAP. */
		got = poll_recv(&a, now);
		if (dozed)
			doze_learn(&a.doze, got > 0);
		dozed = 0;
		active |= got > 1;
		if (now - a.last_heard > a.master_timeout)
			die(&a, a.welcomed ? "the master went silent"
					   : "no welcome from the master");
		if (active) {
			spins = 0;
			nap = NAP_MIN;
			a.last_activity = now;
			if (sent && a.last_seconds < HOLD &&
			    has_queued(a.runner))
				ft_sleep(HOLD);
		} else if (got == 0 &&
			   (++spins > SPIN_ITERS || has_queued(a.runner))) {
			doze(&a.doze, runner_fd(a.runner), nap);
			dozed = 1;
			nap = fmin(nap * 2, nap_cap(&a, now));
		}
	}
	runner_stop(a.runner);
	say_bye(&a);
	free(a.rbuf);
	return a.no_finalize ? AGENT_NO_FINALIZE : 0;
}
