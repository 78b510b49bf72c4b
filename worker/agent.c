/* agent: a node's agent, whatever its wire (see agent.h). */
#include "agent.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "memcg.h"
#include "proto.h"
#include "slots.h"

#define NAP_MAX 0.01		/* the idle nap before the welcome's */
#define STOP_TIMEOUT 5.0	/* for the slots to say bye */
#define REAP_TIMEOUT 2.0	/* for slots killed at a stop to be reaped */

void
agent_die(const struct agent *a, const char *why)
{
	slots_kill_everything();
	fprintf(stderr, "ftfarm agent of node %s%s%d (pid %d): %s; exiting\n",
		a->node ? a->node : "", a->node ? ", index " : "index ",
		a->index, (int)getpid(), why);
	_exit(1);	/* MPI_Finalize could wait forever for a dead master */
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
		agent_flush(a);
	if (a->nrelay == 0)
		proto_begin_list(&a->relay);
	proto_put_relay(&a->relay, &e);
	a->nrelay++;
}

int
agent_init(struct agent *a, const struct agent_wire *w, int index,
	   const char *node, const char *state_dir, char *why, size_t n)
{
	char *dir = ft_exe_dir(), *exe;

	memset(a, 0, sizeof(*a));
	a->wire = *w;
	a->index = index;
	a->node = node;
	a->state_dir = state_dir;
	a->master_timeout = AGENT_HELLO_TIMEOUT;
	a->idle_nap = NAP_MAX;
	a->last_heard = ft_now();
	exe = ft_asprintf("%s/ftfarm-slot", dir);
	free(dir);
	a->ss = slots_new(exe, relay_add, a, why, n);
	free(exe);
	return a->ss ? 0 : -1;
}

void
agent_fini(struct agent *a)
{
	if (a->ss)
		slots_free(a->ss);
	a->ss = NULL;
	memcg_node_close();
	ft_buf_free(&a->relay);
	a->nrelay = 0;
}

int
agent_flush(struct agent *a)
{
	if (a->nrelay == 0)
		return 0;
	proto_set_count(&a->relay, a->nrelay);
	a->wire.send(a->wire.ctx, FT_MSG_RELAY, &a->relay);
	a->nrelay = 0;
	return 1;
}

static void
on_relay(struct agent *a, const void *p, size_t n)
{
	struct proto_iter it;
	struct proto_relay e;
	int rc;

	if (proto_iter_init(&it, p, n) == -1)
		agent_die(a, "malformed relay message");
	while ((rc = proto_next_relay(&it, &e)) == 1) {
		switch (e.tag) {
		case FT_MSG_SPAWN: slots_spawn(a->ss, e.slot, e.gen); break;
		case FT_MSG_KILL: slots_kill(a->ss, e.slot, e.gen); break;
		case FT_MSG_WELCOME:
		case FT_MSG_ASSIGN:
		case FT_MSG_CANCEL:
			slots_send(a->ss, e.slot, e.gen, e.tag, e.p, e.n);
			break;
		default: agent_die(a, "unexpected message in a relay");
		}
	}
	if (rc == -1)
		agent_die(a, "malformed relay message");
}

static void
on_ping(struct agent *a, const void *p, size_t n)
{
	struct proto_pong pong = { .running = 0 };
	struct ft_buf b = { 0 };

	if (proto_get_ping(p, n, &pong.seq) == -1)
		agent_die(a, "malformed ping");
	pong.queued = slots_live(a->ss);
	proto_put_pong(&b, &pong);
	a->wire.send(a->wire.ctx, FT_MSG_PONG, &b);
}

/* Make the node's directory of memory cgroups for its slots (memcg.h),
 * or say why its tasks' memory limits are kept by sampling instead. */
static void
memory_cgroups(struct agent *a)
{
	char why[512];

	if (memcg_node_open(why, sizeof(why)) == -1)
		fprintf(stderr, "ftfarm agent (node index %d, pid %d): memory "
			"limits are kept by sampling: %s\n", a->index,
			(int)getpid(), why);
}

static void
on_welcome(struct agent *a, const void *p, size_t n)
{
	struct proto_welcome w;
	char node[256];

	if (proto_get_welcome(p, n, &w) == -1)
		agent_die(a, "malformed welcome");
	snprintf(node, sizeof(node), "%.*s", (int)(w.node_len < 255 ?
						   w.node_len : 255), w.node);
	slots_set_names(a->ss, a->node && !*node ? a->node : node,
			a->state_dir);
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
		agent_die(a, "malformed stop");
	if (!a->stopping)
		slots_stop(a->ss);
	a->stopping = 1;
	a->stop_until = ft_now() + STOP_TIMEOUT;
	a->no_finalize = (flags & FT_STOP_NO_FINALIZE) != 0;
}

static void
on_leave(struct agent *a, const void *p, size_t n)
{
	struct proto_leave l;

	if (proto_get_leave(p, n, &l) == -1 || !(l.grace >= 0))
		agent_die(a, "malformed leave");
	agent_leave(a, l.grace, ft_now());
}

int
agent_handle(struct agent *a, int tag, const void *p, size_t n)
{
	a->last_heard = ft_now();
	if (!a->welcomed && tag != FT_MSG_WELCOME)
		agent_die(a, "the master spoke before its welcome");
	switch (tag) {
	case FT_MSG_WELCOME: on_welcome(a, p, n); break;
	case FT_MSG_RELAY: on_relay(a, p, n); break;
	case FT_MSG_PING: on_ping(a, p, n); break;
	case FT_MSG_STOP: on_stop(a, p, n); break;
	case FT_MSG_LEAVE: on_leave(a, p, n); break;
	default: agent_die(a, "unexpected message from the master");
	}
	return tag == FT_MSG_PING ? 1 : 2;
}

void
agent_leave(struct agent *a, double grace, double now)
{
	if (a->leaving) {
		/* A second word (SIGTERM after `ftfarm leave`): the
		 * shorter grace wins. */
		if (!a->termed && now + grace < a->term_at)
			a->term_at = now + grace;
		return;
	}
	a->leaving = 1;
	a->term_at = now + grace;
	slots_end(a->ss);
}

int
agent_work(struct agent *a, double now)
{
	int did = slots_work(a->ss, now);

	if (a->leaving && !a->termed && now >= a->term_at) {
		a->termed = 1;
		slots_term_everything();
		did = 1;
	}
	return did;
}

double
agent_next(const struct agent *a)
{
	double next = slots_next(a->ss);

	if (a->leaving && !a->termed)
		next = fmin(next, a->term_at);
	return next;
}

int
agent_stopped(struct agent *a, double now)
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
