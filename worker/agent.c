/* agent: the node agent's MPI side (see agent.h). */
#include "agent.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "doze.h"
#include "hostmem.h"
#include "memcg.h"
#include "proto.h"
#include "slots.h"
#include "util.h"

#define HELLO_TIMEOUT 60.0	/* seconds to wait for the master's welcome */
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
#define STOP_TIMEOUT 5.0	/* for the slots to say bye */
#define REAP_TIMEOUT 2.0	/* for slots killed at a stop to be reaped */

/* A send in flight: its buffer lives until MPI is done with it. */
struct out {
	MPI_Request req;
	char *buf;
	double deadline;
	struct out *next;
};

struct agent {
	const struct agent_args *args;
	struct slots *ss;
	struct doze doze;
	MPI_Request recv;
	char *rbuf;
	struct out *outs;
	struct ft_buf relay;		/* the RELAY being gathered */
	uint32_t nrelay;		/* its entries */
	double last_heard;
	double last_activity;		/* a message either way, monotonic */
	double master_timeout;
	double idle_nap;		/* longest nap when idle (the welcome's) */
	double stop_until;		/* the slots' time to stop, then reaping */
	int welcomed;
	int stopping;			/* the master said stop */
	int killed_all;			/* stopping: the slots left were killed */
	int no_finalize;		/* leave without MPI_Finalize */
};

/* Leave at once for WHY, with every slot and task this agent started:
 * nobody would collect their results, and the master may run their tasks
 * elsewhere already. */
static void
die(struct agent *a, const char *why)
{
	slots_kill_everything();
	fprintf(stderr, "ftfarm-worker node %d (pid %d): %s; exiting\n",
		a->args->index, (int)getpid(), why);
	_exit(1);	/* MPI_Finalize could wait forever for a dead master */
}

static void
send_buf(struct agent *a, int tag, struct ft_buf *b)
{
	struct out *o = ft_calloc(1, sizeof(*o));

	o->buf = b->data;
	o->deadline = ft_now() + a->master_timeout;
	b->data = NULL;
	if (MPI_Isend(o->buf, (int)b->len, MPI_BYTE, a->args->rank, tag,
		      a->args->comm, &o->req) != MPI_SUCCESS)
		die(a, "MPI_Isend failed");
	b->len = b->cap = 0;
	o->next = a->outs;
	a->outs = o;
}

/* Complete finished sends; a send stuck past its deadline means the master
 * is gone. */
static void
test_sends(struct agent *a, double now)
{
	struct out **p = &a->outs;

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
	}
}

/* Send the RELAY gathered so far.  Returns 1 if there was one. */
static int
flush_relay(struct agent *a)
{
	if (a->nrelay == 0)
		return 0;
	proto_set_count(&a->relay, a->nrelay);
	send_buf(a, FT_MSG_RELAY, &a->relay);
	a->nrelay = 0;
	return 1;
}

/* A slot's news, to the RELAY of this pass (slots.h's emit). */
static void
relay_add(void *arg, uint32_t slot, uint32_t gen, uint32_t tag, const void *p,
	  size_t n)
{
	struct agent *a = arg;
	struct proto_relay e = {
		.slot = slot, .gen = gen, .tag = tag, .p = p, .n = n,
	};

	if (a->nrelay > 0 && a->relay.len + proto_relay_size(n) > FT_MSG_MAX)
		flush_relay(a);
	if (a->nrelay == 0)
		proto_begin_list(&a->relay);
	proto_put_relay(&a->relay, &e);
	a->nrelay++;
}

static void
send_hello(struct agent *a)
{
	char host[64] = "";
	struct proto_hello h = {
		.version = FT_PROTO_VERSION,
		.slot = (uint32_t)a->args->index,
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
	send_buf(a, FT_MSG_HELLO, &b);
}

static void
on_relay(struct agent *a, const void *p, size_t n)
{
	struct proto_iter it;
	struct proto_relay e;
	int rc;

	if (proto_iter_init(&it, p, n) == -1)
		die(a, "malformed relay message");
	while ((rc = proto_next_relay(&it, &e)) == 1) {
		switch (e.tag) {
		case FT_MSG_SPAWN: slots_spawn(a->ss, e.slot, e.gen); break;
		case FT_MSG_KILL: slots_kill(a->ss, e.slot, e.gen); break;
		case FT_MSG_WELCOME:
		case FT_MSG_ASSIGN:
		case FT_MSG_CANCEL:
			slots_send(a->ss, e.slot, e.gen, e.tag, e.p, e.n);
			break;
		default: die(a, "unexpected message in a relay");
		}
	}
	if (rc == -1)
		die(a, "malformed relay message");
}

static void
on_ping(struct agent *a, const void *p, size_t n)
{
	struct proto_pong pong = { .running = 0 };
	struct ft_buf b = { 0 };

	if (proto_get_ping(p, n, &pong.seq) == -1)
		die(a, "malformed ping");
	pong.queued = slots_live(a->ss);
	proto_put_pong(&b, &pong);
	send_buf(a, FT_MSG_PONG, &b);
}

/* Make the node's directory of memory cgroups for its slots (memcg.h),
 * or say why its tasks' memory limits are kept by sampling instead. */
static void
memory_cgroups(struct agent *a)
{
	char why[512];

	if (memcg_node_open(why, sizeof(why)) == -1)
		fprintf(stderr, "ftfarm-worker (node index %d, pid %d): memory "
			"limits are kept by sampling: %s\n", a->args->index,
			(int)getpid(), why);
}

static void
on_welcome(struct agent *a, const void *p, size_t n)
{
	struct proto_welcome w;
	char node[256];

	if (proto_get_welcome(p, n, &w) == -1)
		die(a, "malformed welcome");
	snprintf(node, sizeof(node), "%.*s", (int)(w.node_len < 255 ?
						   w.node_len : 255), w.node);
	slots_set_names(a->ss, a->args->node && !*node ? a->args->node : node,
			a->args->state_dir);
	slots_set_timing(a->ss, w.heartbeat, w.ping_timeout,
			 proto_slot_silence(w.master_timeout, w.heartbeat));
	a->master_timeout = w.master_timeout;
	if (w.idle_nap > NAP_MAX)
		a->idle_nap = w.idle_nap;
	if (w.mem_enforce == FT_MEM_AUTO)
		memory_cgroups(a);
	a->welcomed = 1;
}

static void
on_stop(struct agent *a, const void *p, size_t n)
{
	uint32_t flags;

	if (proto_get_stop(p, n, &flags) == -1)
		die(a, "malformed stop");
	if (!a->stopping)
		slots_stop(a->ss);
	a->stopping = 1;
	a->stop_until = ft_now() + STOP_TIMEOUT;
	a->no_finalize = (flags & FT_STOP_NO_FINALIZE) != 0;
}

static void
handle(struct agent *a, int tag, const void *p, size_t n)
{
	if (!a->welcomed && tag != FT_MSG_WELCOME)
		die(a, "the master spoke before its welcome");
	switch (tag) {
	case FT_MSG_WELCOME: on_welcome(a, p, n); break;
	case FT_MSG_RELAY: on_relay(a, p, n); break;
	case FT_MSG_PING: on_ping(a, p, n); break;
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
	if (MPI_Irecv(a->rbuf, FT_MSG_MAX, MPI_BYTE, a->args->rank,
		      MPI_ANY_TAG, a->args->comm, &a->recv) != MPI_SUCCESS)
		die(a, "cannot post a receive");
	return st.MPI_TAG == FT_MSG_PING ? 1 : 2;
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

/* The longest nap for now, NOW. */
static double
nap_cap(struct agent *a, double now)
{
	double quiet = now - a->last_activity;

	if (quiet < QUIET_SOON)
		return NAP_SOON;
	if (quiet < QUIET_IDLE)
		return NAP_MAX;
	if (doze_trusted(&a->doze))
		return fmax(a->idle_nap, fmin(TRUSTED_NAP, a->master_timeout / 4));
	return a->idle_nap;
}

/* Stopping: are the slots all gone, or given up on?  Past STOP_TIMEOUT
 * the slots left are killed, and reaped for at most REAP_TIMEOUT. */
static int
stopped(struct agent *a, double now)
{
	if (slots_procs(a->ss) == 0)
		return 1;
	if (now < a->stop_until)
		return 0;
	if (a->killed_all)
		return 1;
	slots_kill_all(a->ss);
	a->killed_all = 1;
	a->stop_until = now + REAP_TIMEOUT;
	return 0;
}

static int
owns(void *arg, int fd)
{
	struct agent *a = arg;

	return slots_owns(a->ss, fd);
}

/* Sleep until a slot has news, a message may have come, or the slots'
 * next timer, at most NAP seconds. */
static void
nap(struct agent *a, double now, double t)
{
	t = fmax(0, fmin(t, slots_next(a->ss) - now));
	doze(&a->doze, slots_fd(a->ss), t);
}

static void
serve(struct agent *a)
{
	double t = NAP_MIN, now, spin_from = ft_now();
	int dozed = 0;

	for (;;) {
		int active, got;

		now = ft_now();
		test_sends(a, now);
		/* Last before a nap: see TRUSTED_NAP. */
		got = poll_recv(a, now);
		if (dozed)
			doze_learn(&a->doze, got > 0);
		dozed = 0;
		/* Only traffic with the master counts as activity: the slots'
		 * pings and pongs, every heartbeat, would otherwise keep the
		 * naps short for good.  A slot's news wakes the agent anyway
		 * (its socket is in the epoll set). */
		slots_work(a->ss, now);
		active = flush_relay(a);
		active |= got > 1;
		if (a->stopping && stopped(a, now))
			return;
		if (!a->stopping && now - a->last_heard > a->master_timeout)
			die(a, a->welcomed ? "the master went silent"
					   : "no welcome from the master");
		if (active) {
			spin_from = now;
			t = NAP_MIN;
			a->last_activity = now;
		} else if (got == 0 && now - spin_from > SPIN_TIME) {
			nap(a, now, t);
			dozed = 1;
			t = fmin(t * 2, nap_cap(a, now));
		}
	}
}

int
agent_run(const struct agent_args *args)
{
	struct agent a = { .args = args };
	char why[256], *dir = ft_exe_dir(), *exe;

	exe = ft_asprintf("%s/ftfarm-slot", dir);
	free(dir);
	a.ss = slots_new(exe, relay_add, &a, why, sizeof(why));
	free(exe);
	if (a.ss == NULL)
		die(&a, why);
	a.doze.skip = owns;
	a.doze.skip_arg = &a;
	a.rbuf = ft_malloc(FT_MSG_MAX);
	a.master_timeout = HELLO_TIMEOUT;
	a.idle_nap = NAP_MAX;
	a.last_heard = a.last_activity = ft_now();
	MPI_Irecv(a.rbuf, FT_MSG_MAX, MPI_BYTE, args->rank, MPI_ANY_TAG,
		  args->comm, &a.recv);
	send_hello(&a);
	serve(&a);
	flush_relay(&a);
	say_bye(&a);
	slots_free(a.ss);
	memcg_node_close();
	ft_buf_free(&a.relay);
	free(a.rbuf);
	return a.no_finalize ? AGENT_NO_FINALIZE : 0;
}
