/* agents: the node agents as the master sees them (see agents.h). */
#include "agents.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "hosts.h"
#include "log.h"
#include "master.h"
#include "spawn.h"

#define SEND_TIMEOUT_MIN 5.0	/* seconds a send to a live agent may take */
/* A spawn right after a kill raced Open MPI's handling of the dead
 * process: respawn only once the old process is gone, and a moment
 * later. */
#define RESPAWN_DELAY 0.2
#define RESPAWN_WAIT_MAX 5.0
#define START_PARALLEL 8	/* spawns under way at once */
#define IDLE_NAP_MAX 0.5	/* longest nap of an idle agent */
#define STARVED_MAX 8		/* late pongs in a row spared an agent
				 * waiting for a CPU (on_link_starved) */
#define EXIT_DRAIN_ROUNDS 4	/* MPI progress rounds for a dead agent's
				 * last messages */
/* A gathered RELAY goes out at this size: Open MPI's TCP transport sends
 * up to 64 KiB eagerly, larger messages wait for the agent's answer. */
#define RELAY_GATHER_MAX (60 * 1024)

static struct agents_ops ops;
static struct master *am;		/* for the probes' callbacks */

static void on_link_message(void *ctx, int id, int tag, const void *p,
			    size_t n);
static void on_link_failed(void *ctx, int id, const char *reason);
static int on_link_starved(void *ctx, int id);
static void on_exited(void *ctx, int id);

const char *
agents_state_name(enum astate s)
{
	static const char *names[A_NSTATES] = {
		[A_NONE] = "new", [A_SPAWNING] = "spawning",
		[A_STARTING] = "starting", [A_UP] = "up",
		[A_STOPPING] = "stopping", [A_STOPPED] = "stopped",
		[A_DEAD] = "dead",
	};

	return s < A_NSTATES ? names[s] : "?";
}

static int
live(const struct agent *a)
{
	return a->state == A_STARTING || a->state == A_UP ||
	       a->state == A_STOPPING;
}

static void
set_state(struct agent *a, enum astate to)
{
	a->state = to;
	a->since = ft_now();
}

/* Forget A's gathered RELAY: its process is gone. */
static void
drop_relay(struct agent *a)
{
	ft_buf_free(&a->relay);
	a->nrelay = 0;
}

/* ---- set-up ---- */

void
agents_init(struct master *m, const struct agents_ops *o)
{
	struct link_ops lo = {
		.ctx = m, .message = on_link_message, .failed = on_link_failed,
		.starved = on_link_starved,
	};
	int i;

	am = m;
	ops = *o;
	m->nagents = m->cfg.nnodes;
	m->agents = ft_calloc((size_t)m->nagents + 1, sizeof(*m->agents));
	for (i = 0; i < m->nagents; i++)
		m->agents[i].node = i;
	links_init(&m->links, m->nagents, &m->treqs, m->loop, &lo,
		   !m->static_world,
		   fmax(SEND_TIMEOUT_MIN, 2 * m->cfg.heartbeat_timeout),
		   m->cfg.heartbeat_timeout);
	pidwatches_init(&m->exits, m->nagents, on_exited, m);
}

void
agents_grow(struct master *m)
{
	int i, n = m->cfg.nnodes;

	if (n <= m->nagents)
		return;
	m->agents = ft_realloc(m->agents, (size_t)n * sizeof(*m->agents));
	memset(&m->agents[m->nagents], 0,
	       (size_t)(n - m->nagents) * sizeof(*m->agents));
	for (i = m->nagents; i < n; i++) {
		m->agents[i].node = i;
		m->agents[i].tcp = 1;
	}
	links_grow(&m->links, n);
	pidwatches_grow(&m->exits, n);
	m->nagents = n;
}

void
agents_renamed(struct master *m, int node)
{
	struct agent *a = &m->agents[node];
	unsigned gen = a->gen;	/* what was deferred for the one before
				 * stays stale */

	drop_relay(a);
	memset(a, 0, sizeof(*a));
	a->node = node;
	a->tcp = 1;
	a->gen = gen;
}

int
agents_is_tcp(const struct master *m, int node)
{
	return m->agents[node].tcp;
}

void
agents_free(struct master *m)
{
	int i;

	for (i = 0; i < m->nagents; i++)
		drop_relay(&m->agents[i]);
	links_close_all(&m->links);
	links_free(&m->links);
	pidwatches_free(&m->exits);
	free(m->agents);
	m->agents = NULL;
}

/* Begin A's process's life on COMM/RANK: wait for its hello. */
static void
attach(struct master *m, struct agent *a, MPI_Comm comm, int rank)
{
	snprintf(a->host, sizeof(a->host), "%s", m->cfg.nodes[a->node].host);
	a->pid = 0;
	a->start = 0;
	a->killed = 0;
	a->starved = 0;
	a->last_heard = ft_now();
	drop_relay(a);
	set_state(a, A_STARTING);
	if (link_open(&m->links, a->node, comm, rank) == -1)
		agents_fail(m, a->node, "cannot post a receive");
}

int
agents_start(struct master *m, char *err, size_t n)
{
	int i;

	if (!m->static_world)
		return 0;
	if (spawn_static_check(m->nagents, err, n) == -1)
		return -1;
	for (i = 0; i < m->nagents; i++)
		attach(m, &m->agents[i], MPI_COMM_WORLD, i + 1);
	return 0;
}

/* ---- spawning ---- */

static void
spawn_args(const struct master *m, const struct agent *a,
	   struct spawn_args *s)
{
	s->exe = m->worker_exe;
	s->host = m->cfg.nodes[a->node].host;
	s->add_host = m->nodes[a->node].outside;
	s->node_index = a->node;
	s->node = m->cfg.nodes[a->node].name;
	s->state_dir = m->cfg.state_dir;
}

/* A's start failed for WHY. */
static void
start_failed(struct master *m, struct agent *a, const char *why)
{
	log_warnx("node %s: its agent could not be started: %s",
		  m->cfg.nodes[a->node].name, why);
	set_state(a, A_DEAD);
	a->spawn_at = ft_now() + RESPAWN_DELAY;
	ops.down(ops.ctx, a->node, why, 0);
}

/* Spawn A, on a spawner thread when there is one.  0, or -1 (no thread
 * free now: try at the next cron). */
static int
spawn(struct master *m, struct agent *a)
{
	struct spawn_args s;
	MPI_Comm comm;
	char err[256];

	spawn_args(m, a, &s);
	a->probed = 0;
	a->wanted = 0;
	if (a->state != A_NONE)
		a->respawns++;
	if (m->async_spawn) {
		if (spawn_async_start(&s, a->gen + 1) == -1)
			return -1;
		a->gen++;
		set_state(a, A_SPAWNING);
		return 0;
	}
	a->gen++;
	set_state(a, A_SPAWNING);
	if (spawn_one(&s, &comm, err, sizeof(err)) == 0)
		attach(m, a, comm, 0);
	else
		start_failed(m, a, err);
	return 0;
}

/* A's host probe has ended with R: spawn A at the next cron, or fail. */
static void
probed(void *arg, const struct child_result *r)
{
	struct master *m = am;
	struct agent *a = &m->agents[(intptr_t)arg];
	char what[CHILD_OUT_MAX + 64], why[CHILD_OUT_MAX + 160];

	a->probing = 0;
	if (m->stopping || live(a) || a->state == A_SPAWNING)
		return;
	if (r->started && r->exit == 0 && !r->timed_out && !r->signal) {
		a->probed = 1;
		master_kick(m);
		return;
	}
	child_describe(r, what, sizeof(what));
	snprintf(why, sizeof(why), "host %s does not answer: %s",
		 m->cfg.nodes[a->node].host, what);
	a->wanted = 0;
	start_failed(m, a, why);
}

/* Must A's host answer a probe before A is spawned there again? */
static int
needs_probe(const struct master *m, const struct agent *a)
{
	return m->async_spawn && a->state != A_NONE && !a->probed &&
	       !ft_host_is_local(m->cfg.nodes[a->node].host);
}

static void
start_probe(struct master *m, struct agent *a)
{
	char *cmd = hosts_probe_cmd(m->worker_exe);
	char **argv = hosts_remote_argv(&m->cfg, m->cfg.nodes[a->node].host,
					cmd);

	a->probing = 1;
	child_start(m->loop, argv, m->cfg.dir, HOSTS_PROBE_BOUND, probed,
		    (void *)(intptr_t)a->node);
	hosts_argv_free(argv);
	free(cmd);
}

int
agents_want(struct master *m, int node)
{
	struct agent *a = &m->agents[node];

	if (a->state == A_UP)
		return 1;
	if (a->state == A_SPAWNING || a->state == A_STARTING)
		return 0;
	if (a->tcp && !m->stopping) {
		a->wanted = 1;		/* up once it joins again */
		return 0;
	}
	if (m->static_world || a->state == A_STOPPING || m->stopping)
		return -1;
	if (!a->wanted && a->state == A_DEAD && a->spawn_at < ft_now())
		a->spawn_at = ft_now();
	a->wanted = 1;
	master_kick(m);
	return 0;
}

void
agents_unwant(struct master *m, int node)
{
	struct agent *a = &m->agents[node];

	if (a->state == A_NONE || a->state == A_DEAD || a->state == A_STOPPED)
		a->wanted = 0;
}

void
agents_hold_for_power(struct master *m, int node, double seconds)
{
	m->agents[node].power_wait = ft_now() + seconds;
}

void
agents_power_known(struct master *m, int node)
{
	m->agents[node].power_wait = 0;
	master_kick(m);
}

int
agents_is_up(const struct master *m, int node)
{
	return m->agents[node].state == A_UP;
}

/* Has the time come to spawn A? */
static int
spawn_ready(const struct agent *a, double now)
{
	if (!a->wanted || now < a->spawn_at || a->probing ||
	    now < a->power_wait)
		return 0;
	return a->old_pid <= 0 || !ft_pid_alive(a->old_pid) ||
	       now > a->spawn_at + RESPAWN_WAIT_MAX;
}

/* Spawn the wanted agents, START_PARALLEL at a time: each costs the
 * master little and mostly waits for the new process's MPI_Init. */
static void
spawn_wanted(struct master *m, double now)
{
	int i, running = 0;

	for (i = 0; i < m->nagents; i++)
		running += m->agents[i].state == A_SPAWNING;
	for (i = 0; i < m->nagents && running < START_PARALLEL; i++) {
		struct agent *a = &m->agents[i];

		if (m->stopping || a->tcp || !spawn_ready(a, now) ||
		    (a->state != A_NONE && a->state != A_DEAD &&
		     a->state != A_STOPPED))
			continue;
		if (needs_probe(m, a)) {
			start_probe(m, a);
			continue;
		}
		if (spawn(m, a) == 0)
			running += a->state == A_SPAWNING;
	}
}

/* How long a spawn may take before it is given up on (it normally takes
 * a quarter of a second here). */
static double
spawn_timeout(const struct master *m)
{
	return m->cfg.start_timeout < 15 ? m->cfg.start_timeout : 15;
}

/* Take the spawner threads' finished spawns. */
static void
collect_spawns(struct master *m)
{
	MPI_Comm comm;
	char err[256];
	unsigned gen;
	int id;

	while (spawn_async_poll(&id, &gen, &comm, err, sizeof(err)) == 1) {
		struct agent *a = &m->agents[id];

		if (a->state != A_SPAWNING || gen != a->gen) {
			/* Given up on meanwhile: the new process, never
			 * welcomed, leaves by itself. */
			if (comm != MPI_COMM_NULL)
				MPI_Comm_free(&comm);
			continue;
		}
		if (comm == MPI_COMM_NULL)
			start_failed(m, a, err);
		else
			attach(m, a, comm, 0);
	}
}

/* Deadlines of A's start: its spawn, then its hello. */
static void
check_start(struct master *m, struct agent *a, double now)
{
	if (a->state == A_SPAWNING && m->async_spawn &&
	    now - a->since > spawn_timeout(m)) {
		a->gen++;	/* its end, if any, is dropped */
		start_failed(m, a, "MPI_Comm_spawn did not return in time");
	}
	if (a->state == A_STARTING &&
	    now - a->since > (a->respawns ? spawn_timeout(m)
					  : m->cfg.start_timeout))
		agents_fail(m, a->node, "no hello from the node agent in time");
}

/* ---- sending ---- */

static void
deferred_fail(void *ctx, uint64_t id, uint64_t gen, const char *text)
{
	struct master *m = ctx;
	struct agent *a = &m->agents[id];

	if (a->gen == gen)
		agents_fail(m, a->node, text);
}

static int
link_out(struct master *m, struct agent *a, int tag, struct ft_buf *msg)
{
	if (link_send(&m->links, a->node, tag, msg) == -1) {
		defer_call(&m->defer, deferred_fail, (uint64_t)a->node, a->gen,
			   a->tcp ? "a send failed" : "MPI send failed");
		return -1;
	}
	master_kick(m);
	return 0;
}

/* Send A's gathered RELAY, if any. */
static void
flush_relay(struct master *m, struct agent *a)
{
	if (a->nrelay == 0)
		return;
	proto_set_count(&a->relay, a->nrelay);
	a->nrelay = 0;
	link_out(m, a, FT_MSG_RELAY, &a->relay);
}

/* Send MSG (taken over) with TAG to A, after what was gathered for it. */
static int
send_msg(struct master *m, struct agent *a, int tag, struct ft_buf *msg)
{
	flush_relay(m, a);
	return link_out(m, a, tag, msg);
}

/* The slots' messages of one pass of the loop go out in one RELAY per
 * agent: 512 slots on 8 nodes took 10,000 sends per 100,000 tiny tasks,
 * one per slot message. */
int
agents_relay(struct master *m, int node, uint32_t slot, uint32_t gen,
	     int tag, struct ft_buf *payload)
{
	struct agent *a = &m->agents[node];
	struct proto_relay r = {
		.slot = slot, .gen = gen, .tag = (uint32_t)tag,
		.p = payload->data, .n = payload->len,
	};

	if (a->state != A_UP && a->state != A_STOPPING) {
		ft_buf_free(payload);
		return -1;
	}
	if (a->nrelay > 0 &&
	    a->relay.len + proto_relay_size(payload->len) > RELAY_GATHER_MAX)
		flush_relay(m, a);
	if (a->nrelay == 0)
		proto_begin_list(&a->relay);
	proto_put_relay(&a->relay, &r);
	a->nrelay++;
	ft_buf_free(payload);
	master_kick(m);
	return 0;
}

void
agents_flush(struct master *m)
{
	int i;

	for (i = 0; i < m->nagents; i++)
		flush_relay(m, &m->agents[i]);
}

/* ---- messages from an agent ---- */

/* The longest nap of an idle agent: a ping must be answered within
 * TIMEOUT.  Half of it, for the usual heartbeats; a quarter for fast ones
 * (they ask for fast detection and pay for it). */
static double
idle_nap(double timeout)
{
	return timeout >= 0.5 ? fmin(IDLE_NAP_MAX, timeout / 2) : timeout / 4;
}

/* Welcome A (its hello or JOIN taken): it is up, its slots may start.
 * 0, or -1 (the welcome could not be sent: A is failed). */
static int
welcome(struct master *m, struct agent *a)
{
	const char *node = m->cfg.nodes[a->node].name;
	struct proto_welcome wel = {
		.output_cap = (uint32_t)m->cfg.output_cap,
		.master_timeout = m->cfg.master_silence,
		.idle_nap = idle_nap(m->cfg.heartbeat_timeout),
		.node = node,
		.node_len = strlen(node),
		.heartbeat = m->cfg.heartbeat,
		.ping_timeout = m->cfg.heartbeat_timeout,
		.mem_enforce = (uint32_t)m->cfg.mem_enforce,
	};
	struct ft_buf msg = { 0 };

	proto_put_welcome(&msg, &wel);
	if (send_msg(m, a, FT_MSG_WELCOME, &msg) == -1)
		return -1;
	set_state(a, A_UP);
	ev_agent_up(&m->events, node, (int)a->pid, a->host, a->respawns);
	ops.up(ops.ctx, a->node);
	return 0;
}

static void
on_hello(struct master *m, struct agent *a, const void *p, size_t n)
{
	const char *node = m->cfg.nodes[a->node].name;
	struct proto_hello h;

	if (a->tcp || proto_get_hello(p, n, &h) == -1 ||
	    h.version != FT_PROTO_VERSION || (int)h.slot != a->node ||
	    a->state != A_STARTING) {
		log_warnx("node %s: bad hello from its agent", node);
		agents_fail(m, a->node, "incompatible or malformed hello");
		return;
	}
	a->pid = (pid_t)h.pid;
	a->start = h.start;
	a->mem = h.mem;
	snprintf(a->host, sizeof(a->host), "%.*s", (int)h.host_len, h.host);
	if (ft_host_is_local(a->host))
		pidwatch_start(&m->exits, m->loop, a->node, a->pid, a->start);
	welcome(m, a);
}

int
agents_joined(struct master *m, int node, const struct agent_join *j,
	      int fd, const void *rest, size_t n)
{
	struct agent *a = &m->agents[node];

	if (live(a))
		agents_fail(m, node, "its node joined again");
	a->tcp = 1;
	a->pid = j->pid;
	a->start = j->start;
	snprintf(a->host, sizeof(a->host), "%s", j->host);
	snprintf(a->alloc, sizeof(a->alloc), "%s", j->alloc);
	a->alloc_end = j->alloc_end;
	a->mem = j->mem;
	a->leaving = 0;
	a->starved = 0;
	a->killed = 0;
	a->wanted = 0;
	a->last_heard = ft_now();
	if (a->incarnation++ > 0)
		a->respawns++;
	a->gen++;
	drop_relay(a);
	if (link_open_tcp(&m->links, node, fd, rest, n) == -1) {
		set_state(a, A_DEAD);
		return -1;
	}
	set_state(a, A_STARTING);
	return welcome(m, a);
}

int
agents_leave(struct master *m, int node, double grace)
{
	struct agent *a = &m->agents[node];
	struct proto_leave l = { .grace = grace, .why = "", .why_len = 0 };
	struct ft_buf msg = { 0 };

	if (!a->tcp || a->state != A_UP)
		return -1;
	a->leaving = 1;
	proto_put_leave(&msg, &l);
	return send_msg(m, a, FT_MSG_LEAVE, &msg);
}

void
agents_stop(struct master *m, int node)
{
	struct agent *a = &m->agents[node];
	struct ft_buf msg = { 0 };

	if (a->state != A_UP)
		return;
	proto_put_stop(&msg, 0);
	set_state(a, A_STOPPING);
	send_msg(m, a, FT_MSG_STOP, &msg);
}

/* A joined agent leaves by itself (its allocation ends). */
static void
on_leave(struct master *m, struct agent *a, const void *p, size_t n)
{
	struct proto_leave l;
	char why[200];

	if (!a->tcp || proto_get_leave(p, n, &l) == -1) {
		m->counters.bad_msgs++;
		return;
	}
	snprintf(why, sizeof(why), "%.*s", (int)(l.why_len < 190 ? l.why_len :
						   190), l.why);
	a->leaving = 1;
	ops.leaving(ops.ctx, a->node, why[0] ? why : "its agent leaves");
}

/* A said bye: after a stop.  A joined node has then left. */
static void
on_bye(struct master *m, struct agent *a, const void *p, size_t n)
{
	if (proto_get_bye(p, n) == -1)
		m->counters.bad_msgs++;
	pidwatch_stop(&m->exits, a->node);
	set_state(a, A_STOPPED);
	if (!a->tcp)
		return;
	link_close(&m->links, a->node);
	a->leaving = 0;
	a->gen++;
	if (!m->stopping)
		ops.left(ops.ctx, a->node);
}

static void
on_relay(struct master *m, struct agent *a, const void *p, size_t n)
{
	struct proto_iter it;
	struct proto_relay r;
	int rc;

	if (proto_iter_init(&it, p, n) == -1)
		goto bad;
	while ((rc = proto_next_relay(&it, &r)) == 1 && live(a))
		ops.relay(ops.ctx, a->node, &r);
	if (rc != -1)
		return;
bad:
	m->counters.bad_msgs++;
	log_warnx("node %s: malformed relay message from its agent",
		  m->cfg.nodes[a->node].name);
}

static void
on_link_message(void *ctx, int id, int tag, const void *p, size_t n)
{
	struct master *m = ctx;
	struct agent *a = &m->agents[id];
	struct proto_pong pong;

	if (!live(a))
		return;
	a->last_heard = ft_now();
	a->starved = 0;
	if (a->state == A_STARTING && tag != FT_MSG_HELLO) {
		agents_fail(m, id, "spoke before saying hello");
		return;
	}
	switch (tag) {
	case FT_MSG_HELLO:
		on_hello(m, a, p, n);
		break;
	case FT_MSG_RELAY:
		on_relay(m, a, p, n);
		break;
	case FT_MSG_PONG:
		if (proto_get_pong(p, n, &pong) == 0)
			link_pong(&m->links, id, pong.seq);
		else
			m->counters.bad_msgs++;
		break;
	case FT_MSG_BYE:
		on_bye(m, a, p, n);
		break;
	case FT_MSG_LEAVE:
		on_leave(m, a, p, n);
		break;
	default:
		m->counters.bad_msgs++;
		log_warnx("node %s: unexpected message %s (%d) from its agent",
			  m->cfg.nodes[id].name, proto_msg_name(tag), tag);
	}
}

static void
on_link_failed(void *ctx, int id, const char *reason)
{
	agents_fail(ctx, id, reason);
}

/* Agent A was asleep (state S) when its ping expired: has it stirred,
 * run or waited for a CPU, since its last missed ping?  Its answer may
 * be on its way: a sleeping agent at SCHED_IDLE beside 24 busy processes
 * had answered, and the master, itself waiting for a CPU, had not read
 * the pong yet.  The first such miss only takes the count of its main
 * thread's time; a hung agent (asleep for good) is caught at the next. */
static int
stirred(struct agent *a)
{
	unsigned long long ns;

	if (ft_pid_state(a->pid) != 'S' || ft_pid_sched_ns(a->pid, &ns) == -1)
		return 0;
	if (a->starved > 0 && ns == a->sched_ns)
		return 0;
	a->sched_ns = ns;
	return 1;
}

/* Is agent ID late with its pong only for want of a CPU?  On a host that
 * runs its own slots and the master too (one machine, many nodes), 512
 * tasks starting at once on 2 CPUs kept runnable agents from the CPU for
 * most of a second, and one for 0.75 s in state D (in the kernel: a page,
 * or a lock held by one of its threads that waited for a CPU).  An agent
 * of this host that is busy so (ft_pid_busy), or asleep but stirred since
 * (stirred), is spared, STARVED_MAX rounds in a row at most (one that
 * spins for good is still caught); a stopped one is not.  Of an agent on
 * another host the master cannot tell. */
static int
on_link_starved(void *ctx, int id)
{
	struct master *m = ctx;
	struct agent *a = &m->agents[id];
	char state;

	if (a->state != A_UP || a->pid <= 0 || !ft_host_is_local(a->host))
		return 0;
	if (a->starved >= STARVED_MAX ||
	    !(ft_pid_busy(a->pid) || stirred(a))) {
		/* What it was doing, for whoever reads why the node failed. */
		state = ft_pid_state(a->pid);
		log_info("node %s: its agent missed a ping; its process is in "
			 "state %c%s", m->cfg.nodes[id].name, state ? state : '?',
			 a->starved >= STARVED_MAX ?
			 ", late too many rounds in a row" : "");
		return 0;
	}
	a->starved++;
	m->counters.agents_starved++;
	log_info("node %s: its agent is late with a pong but busy or stirring "
		 "(it waits for a CPU, is in the kernel, or ran since); spared "
		 "(%d in a row)", m->cfg.nodes[id].name, a->starved);
	return 1;
}

/* Agent ID's process on this machine has exited: after a bye, or once
 * told to stop, that is its way out; before, a death seen at once. */
static void
on_exited(void *ctx, int id)
{
	struct master *m = ctx;
	struct agent *a = &m->agents[id];

	if (a->state != A_UP && a->state != A_STARTING)
		return;
	m->counters.exits_seen++;
	/* What it sent before it died comes first: its slots' last results
	 * and their exits. */
	for (int i = 0; i < EXIT_DRAIN_ROUNDS && live(a); i++)
		treq_test(&m->treqs, ft_now());
	if (a->state == A_UP || a->state == A_STARTING)
		agents_fail(m, id, "its process exited");
}

/* ---- death ---- */

static void
remote_killed(void *arg, const struct child_result *r)
{
	char what[CHILD_OUT_MAX + 64];

	child_describe(r, what, sizeof(what));
	log_info("node agent %d: kill over ssh %s", (int)(intptr_t)arg, what);
}

/* SIGKILL A's process on another host over ssh, in the background (the
 * host may not answer), and only the very process A was: its start time
 * must match there.  Its slots die with it (they ask the kernel for
 * SIGKILL when their agent goes). */
static void
kill_remote(struct master *m, struct agent *a)
{
	char cmd[160], **argv;

	snprintf(cmd, sizeof(cmd), "[ \"$(cut -d' ' -f22 /proc/%d/stat)\" = "
		 "%llu ] && kill -9 %d", (int)a->pid, a->start, (int)a->pid);
	argv = hosts_remote_argv(&m->cfg, a->host, cmd);
	child_start(m->loop, argv, m->cfg.dir, HOSTS_PROBE_BOUND,
		    remote_killed, (void *)(intptr_t)a->node);
	hosts_argv_free(argv);
	log_info("node %s: killing its agent, pid %d on %s, over ssh",
		 m->cfg.nodes[a->node].name, (int)a->pid, a->host);
}

/* SIGKILL A's process if the MPI survives that, and here whatever it
 * started: its slots die with it by themselves, but the processes of
 * their tasks would run on beside their next attempts.  1 if a signal
 * was sent to A here. */
static int
kill_agent(struct master *m, struct agent *a)
{
	char entry[64], entry2[64];
	int killed, strays;

	/* A joined agent is its user's process: closing its connection
	 * makes it kill its slots and tasks itself. */
	if (!m->can_kill || a->pid <= 0 || a->tcp)
		return 0;
	if (!ft_host_is_local(a->host)) {
		if (a->start)
			kill_remote(m, a);
		return 0;
	}
	killed = ft_proc_is(a->pid, a->start) && kill(a->pid, SIGKILL) == 0;
	snprintf(entry, sizeof(entry), "%s=%d", FT_AGENT_ENV, (int)a->pid);
	snprintf(entry2, sizeof(entry2), "%s=%llu", FT_AGENT_START_ENV,
		 a->start);
	strays = ft_kill_by_env(entry, entry2);
	if (strays)
		log_info("node %s: killed %d processes its agent left",
			 m->cfg.nodes[a->node].name, strays);
	return killed;
}

void
agents_fail(struct master *m, int node, const char *reason)
{
	struct agent *a = &m->agents[node];
	int hung;

	if (!live(a))
		return;
	pidwatch_stop(&m->exits, node);
	hung = a->pid > 0 && !a->tcp && ft_host_is_local(a->host) &&
	       ft_pid_staying(a->pid);
	a->killed = kill_agent(m, a);
	drop_relay(a);
	link_close(&m->links, node);
	ev_agent_dead(&m->events, m->cfg.nodes[node].name, (int)a->pid, reason,
		      a->killed);
	set_state(a, A_DEAD);
	a->spawn_at = ft_now() + RESPAWN_DELAY;
	a->old_pid = ft_host_is_local(a->host) && !a->tcp ? a->pid : 0;
	a->gen++;
	if (a->leaving) {
		/* Gone in the middle of its leave (its allocation's end
		 * killed it): what it still held goes back, charged to
		 * nobody. */
		a->leaving = 0;
		if (!m->stopping)
			ops.left(ops.ctx, node);
	} else if (!m->stopping) {
		ops.down(ops.ctx, node, reason, hung);
	}
	master_kick(m);
}

/* ---- cron ---- */

/* Is a heartbeat round due?  Every agent is pinged in the same round, so
 * that an idle master wakes once for the pings and once for their
 * deadlines. */
static int
ping_round_due(struct master *m, double now)
{
	double hb = m->cfg.heartbeat;

	if (now < m->ping_round)
		return 0;
	m->ping_round += hb;
	if (m->ping_round < now + hb / 2)	/* late: start again from now */
		m->ping_round = now + hb;
	return 1;
}

double
agents_next_round(const struct master *m)
{
	return m->ping_round;
}

void
agents_cron(struct master *m, double now)
{
	int i, round = ping_round_due(m, now);

	if (m->async_spawn)
		collect_spawns(m);
	spawn_wanted(m, now);
	for (i = 0; i < m->nagents; i++) {
		struct agent *a = &m->agents[i];

		check_start(m, a, now);
		if (round && a->state == A_UP && !link_pinging(&m->links, i) &&
		    link_ping(&m->links, i, ft_now()) == -1)
			agents_fail(m, i, a->tcp ? "a send failed" :
				    "MPI send failed");
	}
}

int
agents_starting(const struct master *m)
{
	int i;

	for (i = 0; i < m->nagents; i++)
		if (m->agents[i].state == A_SPAWNING ||
		    m->agents[i].state == A_STARTING ||
		    (m->agents[i].wanted && !m->agents[i].tcp))
			return 1;
	return 0;
}

int
agents_spawn_busy(const struct master *m)
{
	return m->async_spawn && spawn_async_busy();
}

/* ---- shutdown ---- */

void
agents_stop_all(struct master *m, uint32_t flags)
{
	int i;

	for (i = 0; i < m->nagents; i++) {
		struct agent *a = &m->agents[i];
		struct ft_buf msg = { 0 };

		a->wanted = 0;
		if (a->state != A_UP && a->state != A_STARTING)
			continue;
		/* A stopped (SIGSTOP) agent can still leave cleanly once it
		 * runs again. */
		if (a->pid > 0 && ft_host_is_local(a->host) &&
		    ft_proc_is(a->pid, a->start))
			kill(a->pid, SIGCONT);
		if (a->state == A_STARTING) {
			agents_fail(m, i, "stopped before its hello");
			continue;
		}
		proto_put_stop(&msg, flags);
		set_state(a, A_STOPPING);
		send_msg(m, a, FT_MSG_STOP, &msg);
	}
}

int
agents_all_stopped(const struct master *m)
{
	int i;

	for (i = 0; i < m->nagents; i++)
		if (live(&m->agents[i]))
			return 0;
	return 1;
}

void
agents_kill_leftovers(struct master *m)
{
	int i;

	for (i = 0; i < m->nagents; i++)
		if (live(&m->agents[i]))
			agents_fail(m, i, "did not stop in time");
}

int
agents_lost_ranks(const struct master *m)
{
	int i;

	for (i = 0; m->static_world && i < m->nagents; i++)
		if (m->agents[i].state == A_DEAD)
			return 1;
	return 0;
}
