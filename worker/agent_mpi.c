/* agent_mpi: a node's agent over MPI (see agent_mpi.h). */
#include "agent_mpi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "doze.h"
#include "hostmem.h"
#include "proto.h"
#include "slots.h"
#include "util.h"

/* After activity the agent polls without sleeping for SPIN_TIME before its
 * first nap: the master's next message often follows within it.  A time,
 * not a count of polls, and a short one: the polls spin on a CPU the
 * node's tasks could use (the agent asks Open MPI not to yield in them,
 * see main.c). */
#define SPIN_TIME 0.00005
#define NAP_MIN 0.00005
/* MPI has no descriptor to sleep on: the agent naps between polls (see
 * doze.h), longer the longer nothing has happened.  Its slots wake it at
 * once (their descriptors are in the epoll set it sleeps on), and so does
 * a message that comes with a hint on the MPI's sockets.  Right after
 * activity naps are short; once the node has been idle a while they grow
 * to the welcome's idle_nap, for a message may come without a hint (over
 * shared memory, another MPI).  Once the hints have proved right
 * (doze_trusted) an idle agent sleeps until one comes, or TRUSTED_NAP: the
 * last MPI call before each sleep is the test of the receive, so no
 * message can wait in the library's buffers unseen.  Every nap ends by
 * the slots' next ping or deadline. */
#define NAP_SOON 0.001		/* cap for QUIET_SOON seconds after activity */
#define QUIET_SOON 0.05
#define NAP_MAX 0.01		/* cap while active lately */
#define QUIET_IDLE 1.0		/* idle past this: naps up to idle_nap */
#define TRUSTED_NAP 2.0		/* ... or this, when hints are trusted */
#define BYE_TIMEOUT 5.0		/* for the master to take the bye */

/* A send in flight: its buffer lives until MPI is done with it. */
struct out {
	MPI_Request req;
	char *buf;
	double deadline;
	struct out *next;
};

struct mpi_agent {
	struct agent a;
	const struct agent_args *args;
	struct doze doze;
	MPI_Request recv;
	char *rbuf;
	struct out *outs;
	double last_activity;		/* a message either way, monotonic */
};

/* agent_wire's send: B out over MPI. */
static void
send_buf(void *ctx, int tag, struct ft_buf *b)
{
	struct mpi_agent *ma = ctx;
	struct out *o = ft_calloc(1, sizeof(*o));

	o->buf = b->data;
	o->deadline = ft_now() + ma->a.master_timeout;
	b->data = NULL;
	if (MPI_Isend(o->buf, (int)b->len, MPI_BYTE, ma->args->rank, tag,
		      ma->args->comm, &o->req) != MPI_SUCCESS)
		agent_die(&ma->a, "MPI_Isend failed");
	b->len = b->cap = 0;
	o->next = ma->outs;
	ma->outs = o;
}

/* Complete finished sends; a send stuck past its deadline means the master
 * is gone. */
static void
test_sends(struct mpi_agent *ma, double now)
{
	struct out **p = &ma->outs;

	while (*p) {
		struct out *o = *p;
		int done = 0;

		MPI_Test(&o->req, &done, MPI_STATUS_IGNORE);
		if (!done) {
			if (now > o->deadline)
				agent_die(&ma->a, "a send to the master did "
					  "not complete");
			p = &o->next;
			continue;
		}
		*p = o->next;
		free(o->buf);
		free(o);
	}
}

static void
send_hello(struct mpi_agent *ma)
{
	char host[64] = "";
	struct proto_hello h = {
		.version = FT_PROTO_VERSION,
		.slot = (uint32_t)ma->args->index,
		.pid = (uint32_t)getpid(),
		.start = ft_proc_start(getpid()),
		.host = host,
		.plugins = "",
		.mem = hostmem_default(),
	};
	struct ft_buf b = { 0 };

	gethostname(host, sizeof(host) - 1);
	h.host_len = strlen(host);
	proto_put_hello(&b, &h);
	send_buf(ma, FT_MSG_HELLO, &b);
}

/* Receive what has arrived.  Returns 0 if nothing came, 1 for a ping
 * (answered: no sign of work to come), 2 for any other message. */
static int
poll_recv(struct mpi_agent *ma)
{
	MPI_Status st;
	int done = 0, count = 0, rc;

	if (MPI_Test(&ma->recv, &done, &st) != MPI_SUCCESS)
		agent_die(&ma->a, "receive failed");
	if (!done)
		return 0;
	MPI_Get_count(&st, MPI_BYTE, &count);
	rc = agent_handle(&ma->a, st.MPI_TAG, ma->rbuf, (size_t)count);
	if (MPI_Irecv(ma->rbuf, FT_MSG_MAX, MPI_BYTE, ma->args->rank,
		      MPI_ANY_TAG, ma->args->comm, &ma->recv) != MPI_SUCCESS)
		agent_die(&ma->a, "cannot post a receive");
	return rc;
}

/* Say bye and wait (bounded) until the master has it. */
static void
say_bye(struct mpi_agent *ma)
{
	struct ft_buf b = { 0 };
	double until = ft_now() + BYE_TIMEOUT;

	proto_put_bye(&b);
	send_buf(ma, FT_MSG_BYE, &b);
	while (ma->outs && ft_now() < until) {
		test_sends(ma, ft_now());
		ft_sleep(0.0005);
	}
	MPI_Cancel(&ma->recv);
	MPI_Request_free(&ma->recv);
}

/* The longest nap for now, NOW. */
static double
nap_cap(struct mpi_agent *ma, double now)
{
	double quiet = now - ma->last_activity;

	if (quiet < QUIET_SOON)
		return NAP_SOON;
	if (quiet < QUIET_IDLE)
		return NAP_MAX;
	if (doze_trusted(&ma->doze))
		return fmax(ma->a.idle_nap,
			    fmin(TRUSTED_NAP, ma->a.master_timeout / 4));
	return ma->a.idle_nap;
}

static int
owns(void *arg, int fd)
{
	struct mpi_agent *ma = arg;

	return slots_owns(ma->a.ss, fd);
}

/* Sleep until a slot has news, a message may have come, or the slots'
 * next timer, at most NAP seconds. */
static void
nap(struct mpi_agent *ma, double now, double t)
{
	t = fmax(0, fmin(t, agent_next(&ma->a) - now));
	doze(&ma->doze, slots_fd(ma->a.ss), t);
}

static void
serve(struct mpi_agent *ma)
{
	struct agent *a = &ma->a;
	double t = NAP_MIN, now, spin_from = ft_now();
	int dozed = 0;

	for (;;) {
		int active, got;

		now = ft_now();
		test_sends(ma, now);
		/* Last before a nap: see TRUSTED_NAP. */
		got = poll_recv(ma);
		if (dozed)
			doze_learn(&ma->doze, got > 0);
		dozed = 0;
		/* Only traffic with the master counts as activity: the slots'
		 * pings and pongs, every heartbeat, would otherwise keep the
		 * naps short for good.  A slot's news wakes the agent anyway
		 * (its socket is in the epoll set). */
		agent_work(a, now);
		active = agent_flush(a);
		active |= got > 1;
		if (a->stopping && agent_stopped(a, now))
			return;
		if (!a->stopping && now - a->last_heard > a->master_timeout)
			agent_die(a, a->welcomed ? "the master went silent"
					   : "no welcome from the master");
		if (active) {
			spin_from = now;
			t = NAP_MIN;
			ma->last_activity = now;
		} else if (got == 0 && now - spin_from > SPIN_TIME) {
			nap(ma, now, t);
			dozed = 1;
			t = fmin(t * 2, nap_cap(ma, now));
		}
	}
}

int
agent_mpi_run(const struct agent_args *args)
{
	struct mpi_agent ma = { .args = args };
	struct agent_wire w = { .ctx = &ma, .send = send_buf };
	char why[256];

	if (agent_init(&ma.a, &w, args->index, args->node, args->state_dir,
		       why, sizeof(why)) == -1)
		agent_die(&ma.a, why);
	ma.doze.skip = owns;
	ma.doze.skip_arg = &ma;
	ma.rbuf = ft_malloc(FT_MSG_MAX);
	ma.last_activity = ft_now();
	MPI_Irecv(ma.rbuf, FT_MSG_MAX, MPI_BYTE, args->rank, MPI_ANY_TAG,
		  args->comm, &ma.recv);
	send_hello(&ma);
	serve(&ma);
	agent_flush(&ma.a);
	say_bye(&ma);
	agent_fini(&ma.a);
	free(ma.rbuf);
	return ma.a.no_finalize ? AGENT_NO_FINALIZE : 0;
}
