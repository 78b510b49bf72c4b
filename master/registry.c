/* registry: the master's workers (see registry.h). */
#include "registry.h"

#include <math.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents.h"
#include "log.h"
#include "memsize.h"
#include "parked.h"

#define PICKS_MAX 1024
/* Tasks a dispatch pass hands out before it lets the loop read results,
 * send what it gathered and write the events: a pass of 100,000 tasks
 * would otherwise leave hundreds of workers idle with their results
 * unread, and grow the events' buffer to tens of megabytes. */
#define PASS_TASKS 8192
/* A respawn waits a moment after the death, and for the old process to
 * be gone (its agent kills it, if it is still there, when told to start
 * the next). */
#define RESPAWN_DELAY 0.2
#define RESPAWN_WAIT_MAX 5.0

static struct registry_ops ops;
static struct parked *parked;		/* signal-9 reports held back */

/* ---- set-up ---- */

static void on_agent_up(void *ctx, int node);
static void on_agent_down(void *ctx, int node, const char *reason, int hung);
static void on_relay(void *ctx, int node, const struct proto_relay *r);
static void on_agent_leaving(void *ctx, int node, const char *why);
static void on_agent_left(void *ctx, int node);

void
registry_init(struct master *m, const struct registry_ops *o)
{
	struct agents_ops ao = {
		.ctx = m, .up = on_agent_up, .down = on_agent_down,
		.relay = on_relay, .leaving = on_agent_leaving,
		.left = on_agent_left,
	};
	int i, k, slot = 0;

	ops = *o;
	parked = parked_new();
	m->nworkers = m->cfg.nworkers;
	m->workers = ft_calloc((size_t)m->nworkers, sizeof(*m->workers));
	for (i = 0; i < m->cfg.nnodes; i++)
		for (k = 0; k < m->cfg.nodes[i].workers; k++, slot++)
			worker_init(&m->workers[slot], slot, i,
				    m->cfg.nodes[i].name);
	agents_init(m, &ao);
}

void
registry_free(struct master *m)
{
	agents_free(m);
	parked_free(parked);
	parked = NULL;
	free(m->workers);
	m->workers = NULL;
}

/* The deferred half of a failure: hand W to node health, unless W has
 * moved on meanwhile.  ID: W's slot and spawn generation. */
static void
deferred_failed(void *ctx, uint64_t id, uint64_t unused, const char *text)
{
	struct master *m = ctx;
	struct worker *w = &m->workers[id & 0xffffffffu];

	(void)text, (void)unused;
	if (m->stopping || w->spawn_gen != (unsigned)(id >> 32) ||
	    w->state != W_DEAD)
		return;
	ops.failed(ops.ctx, w);
}

/* Move W to TO (DEAD or INACTIVE) for REASON; a death is blamed at once
 * (W->died_on and died_hung, set by the caller or 0; died_starting) and
 * handed to node health after the current callback. */
static void
down(struct master *m, struct worker *w, enum wstate to, const char *reason)
{
	/* A respawn that did not come back; the first start is not one, nor
	 * a spawn that hung in MPI (Open MPI's, now and then under load: a
	 * failure like any other, not proof that the node is gone). */
	w->died_starting = w->ever_up && !w->spawn_hung &&
			   (w->state == W_SPAWNING || w->state == W_STARTING);
	w->spawn_hung = 0;
	if (worker_set(w, to, reason, &m->events) == 0 && to == W_DEAD &&
	    !m->stopping) {
		ops.dying(ops.ctx, w);
		defer_call(&m->defer, deferred_failed,
			   (uint64_t)w->spawn_gen << 32 | (uint32_t)w->id, 0,
			   NULL);
	}
	w->died_on = 0;
	w->died_hung = 0;
}

/* W's agent is up: have it start W's process, and wait for its hello. */
static void
send_spawn(struct master *m, struct worker *w)
{
	struct ft_buf msg = { 0 };
	const struct agent *a = &m->agents[w->node];

	snprintf(w->host, sizeof(w->host), "%s", a->host);
	w->pid = 0;
	w->start = 0;
	w->bye = 0;
	w->killed = 0;
	w->ending = 0;
	w->heard = ft_now();
	worker_set(w, W_STARTING, NULL, &m->events);
	if (agents_relay(m, w->node, (uint32_t)w->id, w->spawn_gen,
			 FT_MSG_SPAWN, &msg) == -1)
		registry_doom(m, w, "its node agent cannot take messages");
}

/* Start W (a new generation of its slot): at once when its node's agent
 * is up, else once it is (SPAWNING until then). */
static void
start_slot(struct master *m, struct worker *w)
{
	int up;

	if (w->absent)
		return;
	up = agents_want(m, w->node);
	w->spawn_gen++;
	w->pid = 0;
	w->with_agent = 0;
	worker_set(w, W_SPAWNING, NULL, &m->events);
	if (up == 1)
		send_spawn(m, w);
	else if (up == -1)
		down(m, w, W_DEAD, "its node agent is gone for good");
}

int
registry_start(struct master *m, char *err, size_t n)
{
	int i;

	if (agents_start(m, err, n) == -1)
		return -1;
	for (i = 0; i < m->nworkers; i++)
		if (m->workers[i].state == W_NEW)	/* else its host was
							 * left out */
			start_slot(m, &m->workers[i]);
	return 0;
}

/* A worker more for slot ID of NODE. */
static void
add_worker(struct master *m, int node)
{
	int id = m->nworkers;

	m->workers = ft_realloc(m->workers, (size_t)(id + 1) *
				sizeof(*m->workers));
	worker_init(&m->workers[id], id, node, m->cfg.nodes[node].name);
	m->nworkers++;
	if (sched_add_worker(m->sched, node) != id)
		abort();	/* the scheduler's workers are the registry's */
}

void
registry_join_node(struct master *m, int node, int slots)
{
	int k, have = 0;

	for (k = 0; k < m->nworkers; k++) {
		struct worker *w = &m->workers[k];

		if (w->node != node)
			continue;
		w->node_name = m->cfg.nodes[node].name;
		w->absent = have >= slots;
		have += !w->absent;
		if (w->absent && w->state != W_INACTIVE && w->state != W_NEW)
			registry_retire(m, w, "not a slot of its node now");
	}
	for (; have < slots; have++)
		add_worker(m, node);
	for (k = 0; k < m->nworkers; k++) {
		struct worker *w = &m->workers[k];

		if (w->node == node && !w->absent && !m->stopping &&
		    (w->state == W_NEW || w->state == W_INACTIVE ||
		     (w->state == W_DEAD && !w->respawn_due)))
			start_slot(m, w);
	}
}

/* ---- sending ---- */

/* Send MSG (taken over) with TAG to W.  0, or -1: W is doomed (the caller
 * may be in the middle of the scheduler). */
static int
send_msg(struct master *m, struct worker *w, int tag, struct ft_buf *msg)
{
	if (agents_relay(m, w->node, (uint32_t)w->id, w->spawn_gen, tag,
			 msg) == -1) {
		registry_doom(m, w, "its node agent cannot take messages");
		return -1;
	}
	return 0;
}

/* W's state from the scheduler's view of its load. */
static void
update_state(struct master *m, struct worker *w)
{
	enum wstate to;

	if (!worker_up(w))
		return;
	if (sched_is_slow(m->sched, w->id))
		to = W_SLOW;
	else
		to = sched_inflight(m->sched, w->id) ? W_BUSY : W_IDLE;
	worker_set(w, to, NULL, &m->events);
}

/* The ids of the GPUs of MASK on W's node, comma-separated, into BUF.
 * Their length. */
static size_t
gpu_ids(const struct master *m, const struct worker *w, uint64_t mask,
	char *buf, size_t n)
{
	const struct ft_node *nd = &m->cfg.nodes[w->node];
	size_t len = 0;
	int g;

	buf[0] = '\0';
	for (g = 0; g < nd->ngpus && mask; g++)
		if (mask & (1ull << g))
			len += (size_t)snprintf(buf + len, n - len, "%s%s",
						len ? "," : "", nd->gpus[g]);
	return len < n ? len : n - 1;
}

/* For a node whose tasks are pinned: the places in W's node of W and of
 * the workers its task holds (the CPUs the task is bound to, taken modulo
 * the host's CPUs by the worker), comma-separated, into BUF.  Their
 * length; 0 when the node does not pin. */
static size_t
cpu_set_of(const struct master *m, const struct worker *w, char *buf,
	   size_t n)
{
	size_t len = 0;
	int k, place = 0;

	buf[0] = '\0';
	if (!m->cfg.nodes[w->node].pin)
		return 0;
	for (k = 0; k < m->nworkers && len + 12 < n; k++) {
		if (m->workers[k].node != w->node)
			continue;
		if (k == w->id || sched_holder(m->sched, k) == w->id)
			len += (size_t)snprintf(buf + len, n - len, "%s%d",
						len ? "," : "", place);
		place++;
	}
	return len;
}

/* Pack PICKS into ASSIGN messages of at most FT_MSG_MAX bytes. */
static void
send_picks(struct master *m, struct worker *w, struct sched_pick *picks,
	   int n)
{
	struct ft_buf msg = { 0 };
	uint32_t count = 0;
	int i;

	proto_begin_list(&msg);
	for (i = 0; i < n; i++) {
		char gpus[1024], cpuset[1400];
		struct proto_task pt = {
			.tid = picks[i].tid,
			.attempt = picks[i].attempt,
			.spec = picks[i].task->spec,
			.spec_len = picks[i].task->spec_len,
			.cpus = (uint32_t)picks[i].cpus,
			.gpus = gpus,
			.cpuset = cpuset,
			.batch = picks[i].task->batch,
			.index = picks[i].task->index,
		};

		pt.gpus_len = picks[i].gpus ? gpu_ids(m, w, picks[i].gpus, gpus,
						      sizeof(gpus)) : 0;
		pt.cpuset_len = cpu_set_of(m, w, cpuset, sizeof(cpuset));
		if (count > 0 && msg.len + pt.spec_len + pt.gpus_len +
		    pt.cpuset_len + 56 > FT_SLOT_MSG_MAX) {
			proto_set_count(&msg, count);
			if (send_msg(m, w, FT_MSG_ASSIGN, &msg) == -1)
				return;
			proto_begin_list(&msg);
			count = 0;
		}
		proto_put_task(&msg, &pt);
		count++;
		ev_task_assigned(&m->events, picks[i].task->batch,
				 picks[i].task->index, picks[i].attempt, w->id,
				 w->host, picks[i].duplicate);
	}
	proto_set_count(&msg, count);
	send_msg(m, w, FT_MSG_ASSIGN, &msg);
}

/* Send W up to MAX tasks (as many as its window takes).  Returns how
 * many. */
static int
dispatch(struct master *m, struct worker *w, int max)
{
	struct sched_pick picks[PICKS_MAX];
	int n;

	/* No new task while the state dir cannot take their results. */
	if (!worker_up(w) || m->stopping || !store_ok(&m->store))
		return 0;
	n = sched_take(m->sched, w->id, ft_now(), picks, max);
	if (n > 0)
		send_picks(m, w, picks, n);
	update_state(m, w);
	return n;
}

void
registry_dispatch(struct master *m, struct worker *w)
{
	dispatch(m, w, PICKS_MAX);
}

/* A pass over the workers from m->pass_next on, PASS_TASKS at most. */
static void
run_pass(struct master *m)
{
	int i, sent = 0;

	sched_pass(m->sched, sched_takers(m->sched, m->pass_next));
	for (i = m->pass_next; i < m->nworkers; i++) {
		sent += dispatch(m, &m->workers[i], PICKS_MAX);
		if (sent >= PASS_TASKS && i + 1 < m->nworkers) {
			m->pass_next = i + 1;
			sched_pass(m->sched, 0);
			master_kick(m);
			return;
		}
	}
	m->pass_next = 0;
	sched_pass(m->sched, 0);
}

/* Every idle worker gets a task before any worker gets a second: a window
 * of two (short tasks) must not let the first worker in the list take
 * both tasks of a job's phase while the second stays idle.  Where the
 * scheduler's pass spreads the queue by itself, one message per worker
 * does it; else a first pass hands out one task each. */
void
registry_dispatch_all(struct master *m)
{
	int i;

	if (m->pass_next > 0) {
		run_pass(m);		/* it reaches every worker anyway */
		return;
	}
	if (!sched_spreads(m->sched))
		for (i = 0; i < m->nworkers; i++)
			if (sched_inflight(m->sched, i) == 0)
				dispatch(m, &m->workers[i], 1);
	run_pass(m);
}

void
registry_pass_more(struct master *m)
{
	if (m->pass_next > 0)
		run_pass(m);
}

void
registry_wake(struct master *m)
{
	if (sched_wake(m->sched))
		registry_dispatch_all(m);
}

void
registry_cancel(struct master *m, struct worker *w, uint64_t tid,
		uint32_t attempt)
{
	struct proto_cancel c = { .tid = tid, .attempt = attempt };
	struct ft_buf msg = { 0 };

	if (!worker_up(w) && w->state != W_STOPPING)
		return;
	proto_put_cancel(&msg, &c);
	send_msg(m, w, FT_MSG_CANCEL, &msg);
}

void
registry_slow(struct master *m, struct worker *w, uint64_t tid)
{
	const struct sched_task *t = sched_task(m->sched, tid);

	ev_worker_slow(&m->events, w->id, w->node_name, w->pid, t->batch,
		       t->index);
}

/* ---- messages from a worker ---- */

static void
on_hello(struct master *m, struct worker *w, const void *p, size_t n)
{
	struct proto_hello h;
	const char *out = m->cfg.task_stdout ? m->cfg.task_stdout : "";
	const char *err = m->cfg.task_stderr ? m->cfg.task_stderr : "";
	struct proto_welcome wel = {
		.output_cap = (uint32_t)m->cfg.output_cap,
		.master_timeout = proto_slot_silence(m->cfg.master_silence,
						     m->cfg.heartbeat),
		.node = w->node_name,
		.node_len = strlen(w->node_name),
		.mem_enforce = (uint32_t)m->cfg.mem_enforce,
		.out_default = out,
		.out_default_len = strlen(out),
		.err_default = err,
		.err_default_len = strlen(err),
	};
	struct ft_buf msg = { 0 };

	if (proto_get_hello(p, n, &h) == -1 || h.version != FT_PROTO_VERSION ||
	    (int)h.slot != w->id || w->state != W_STARTING) {
		log_warnx("worker %d: bad hello (version %u, slot %u)", w->id,
			  h.version, h.slot);
		registry_fail(m, w, "incompatible or malformed hello");
		return;
	}
	w->pid = (pid_t)h.pid;
	w->start = h.start;
	snprintf(w->host, sizeof(w->host), "%.*s", (int)h.host_len, h.host);
	proto_put_welcome(&msg, &wel);
	if (send_msg(m, w, FT_MSG_WELCOME, &msg) == -1)
		return;
	worker_set(w, W_IDLE, NULL, &m->events);
	sched_worker_up(m->sched, w->id);
	if (w->held)
		sched_worker_pause(m->sched, w->id);
	registry_dispatch(m, w);
}

/* R of W, as final. */
static void
take_result(struct master *m, struct worker *w, const struct proto_result *r)
{
	enum sched_verdict v = sched_done(m->sched, w->id, r->tid, r->attempt,
					  r->seconds, ft_now());

	if (v == SCHED_ACCEPTED) {
		w->tasks_done++;
		w->failures = 0;
		ops.result(ops.ctx, w, r->tid, r);
	} else if (v == SCHED_DUPLICATE) {
		m->counters.duplicates++;
	} else {
		m->counters.bad_msgs++;
	}
}

/* How long a task's signal 9 waits for its worker's death: as long as a
 * death takes to be seen (a heartbeat round and its timeout). */
static double
kill_grace(const struct master *m)
{
	return m->cfg.heartbeat + m->cfg.heartbeat_timeout;
}

/* The held signal-9 reports: dropped if their worker died meanwhile (the
 * task was in flight on it: it runs again), else taken as final once
 * their grace is over (or at once when stopping). */
static void
settle_parked(struct master *m, double now)
{
	size_t i = 0;

	while (i < parked_count(parked)) {
		const struct parked_result *x = parked_at(parked, i);
		struct worker *w = &m->workers[x->worker];

		if (w->spawn_gen != x->gen || !worker_up(w)) {
			log_info("worker %d: task id %llu killed by signal 9 "
				 "and its worker died right after: lost, not "
				 "failed", x->worker,
				 (unsigned long long)x->r.tid);
			parked_drop(parked, i);
		} else if (now >= x->until || m->stopping) {
			take_result(m, w, &x->r);
			parked_drop(parked, i);
		} else {
			i++;
		}
	}
}

/* Is R no result of its task's own: its slot got SIGTERM (the job ends)
 * and gave it back, or, while the master stops, SIGTERM ended it (the
 * job's end reached the task before its slot: it died of the signal, or
 * exited 143 as one that handles it does)? */
static int
is_interrupted(const struct master *m, const struct proto_result *r)
{
	return r->interrupted != PROTO_FINISHED ||
	       (m->stopping && !r->ok && (r->signal == SIGTERM ||
					  r->exit_code == 128 + SIGTERM));
}

/* R of W is no result (is_interrupted): the task waits again, or for
 * the next master's replay, with no line written and no attempt
 * charged; task_interrupted says so of a task that had started (unless
 * the stop already did: farm.c, stop_begins).  W's slot will run
 * nothing more: its other instances go back too. */
static void
take_interrupted(struct master *m, struct worker *w,
		 const struct proto_result *r)
{
	const struct sched_task *t = sched_task(m->sched, r->tid);
	int said = m->stopping > 1 || r->interrupted == PROTO_UNSTARTED;
	char why[200];

	if (r->interrupted != PROTO_FINISHED)
		snprintf(why, sizeof(why), "%.*s", (int)r->reason_len,
			 r->reason ? r->reason : "");
	else
		snprintf(why, sizeof(why), "killed by SIGTERM as the master "
			 "stops (%s)", m->stop_reason);
	if (t && sched_interrupt(m->sched, w->id, r->tid, r->attempt) &&
	    !said)
		ev_task_interrupted(&m->events, t->batch, t->index, r->attempt,
				    w->id, w->host, why);
	if (w->ending || r->interrupted == PROTO_FINISHED)
		return;
	w->ending = 1;
	log_info("worker %d on %s: its slot got SIGTERM (its job ends); it "
		 "takes no more tasks", w->id, w->host);
	sched_worker_release(m->sched, w->id, "its slot got SIGTERM (its job "
			     "ends)", ft_now());
}

static void
on_results(struct master *m, struct worker *w, const void *p, size_t n)
{
	struct proto_iter it;
	struct proto_result r;
	int rc;

	if (proto_iter_init(&it, p, n) == -1)
		goto bad;
	while ((rc = proto_next_result(&it, &r)) == 1) {
		m->counters.results_in++;
		if (is_interrupted(m, &r))
			take_interrupted(m, w, &r);
		else if (parked_is_kill(&r) && !m->stopping)
			parked_add(parked, w->id, w->spawn_gen,
				   ft_now() + kill_grace(m), &r);
		else
			take_result(m, w, &r);
	}
	if (rc == -1)
		goto bad;
	registry_dispatch(m, w);
	registry_wake(m);
	return;
bad:
	m->counters.bad_msgs++;
	log_warnx("worker %d: malformed result message", w->id);
}

static void
on_bye(struct master *m, struct worker *w, const void *p, size_t n)
{
	if (proto_get_bye(p, n) == -1)
		m->counters.bad_msgs++;
	w->bye = 1;
	worker_set(w, W_STOPPED, "said bye", &m->events);
}

/* W's process has ended (its agent saw it): a death, unless W was
 * stopping and said bye. */
static void
on_exited_msg(struct master *m, struct worker *w, const void *p, size_t n)
{
	struct proto_exited e;

	if (proto_get_exited(p, n, &e) == -1) {
		m->counters.bad_msgs++;
		memset(&e, 0, sizeof(e));
	}
	if (w->bye)
		return;
	log_info("worker %d: pid %d on %s ended: %.*s", w->id, (int)w->pid,
		 w->host, (int)e.reason_len, e.reason ? e.reason : "");
	if (e.hung) {
		char why[160];

		snprintf(why, sizeof(why), "%.*s", (int)e.reason_len,
			 e.reason ? e.reason : "");
		w->reported_hung = 1;
		w->killed = 1;
		registry_fail(m, w, why[0] ? why : "hung");
		return;
	}
	if (worker_up(w))
		m->counters.exits_seen++;
	registry_fail(m, w, "its process exited");
}

/* A message of slot R->slot from NODE's agent: dispatch on its type,
 * unless it comes from a generation of the slot given up on. */
static void
on_relay(void *ctx, int node, const struct proto_relay *r)
{
	struct master *m = ctx;
	struct worker *w;

	if (r->slot >= (uint32_t)m->nworkers ||
	    m->workers[r->slot].node != node) {
		m->counters.bad_msgs++;
		log_warnx("node %s: its agent relayed a message of slot %u, "
			  "not one of the node's", m->cfg.nodes[node].name,
			  r->slot);
		return;
	}
	w = &m->workers[r->slot];
	if (r->gen != w->spawn_gen || !worker_live(w))
		return;
	w->heard = ft_now();
	if (w->state == W_STARTING && r->tag != FT_MSG_HELLO &&
	    r->tag != FT_MSG_EXITED) {
		registry_fail(m, w, "spoke before saying hello");
		return;
	}
	switch (r->tag) {
	case FT_MSG_HELLO:
		on_hello(m, w, r->p, r->n);
		break;
	case FT_MSG_RESULT:
		on_results(m, w, r->p, r->n);
		break;
	case FT_MSG_BYE:
		on_bye(m, w, r->p, r->n);
		break;
	case FT_MSG_EXITED:
		on_exited_msg(m, w, r->p, r->n);
		break;
	default:
		m->counters.bad_msgs++;
		log_warnx("worker %d: unexpected message %s (%u)", w->id,
			  proto_msg_name((int)r->tag), r->tag);
	}
}

/* NODE's agent said hello, finding MEM bytes for tasks: the scheduler
 * counts them unless the config says how much the node has. */
static void
node_mem(struct master *m, int node, uint64_t mem)
{
	struct ft_node *nd = &m->cfg.nodes[node];

	__atomic_store_n(&nd->mem_found, mem, __ATOMIC_RELAXED);
	sched_set_mem(m->sched, node, memsize_mib(ft_node_mem(nd, 0)));
}

/* NODE's agent said hello: the slots that wait for it start. */
static void
on_agent_up(void *ctx, int node)
{
	struct master *m = ctx;
	const struct agent *a = &m->agents[node];
	int i;

	node_mem(m, node, a->mem);
	/* A joined node in an allocation ends with it (for time requests);
	 * its end is a wall time, the scheduler's clock is ft_now's. */
	sched_set_end(m->sched, node, a->tcp && a->alloc_end > 0 ?
		      ft_now() + (a->alloc_end - ft_wall()) : 0);
	for (i = 0; i < m->nworkers; i++)
		if (m->workers[i].node == node &&
		    m->workers[i].state == W_SPAWNING)
			send_spawn(m, &m->workers[i]);
}

/* NODE's agent is gone: so is every slot of it.  One failure of the node,
 * not one per slot: the first slot carries it (node health), the others
 * follow (with_agent); none is charged to the task it ran. */
static void
on_agent_down(void *ctx, int node, const char *reason, int hung)
{
	struct master *m = ctx;
	char why[256];
	int i, first = 1;

	snprintf(why, sizeof(why), "its node agent: %s", reason);
	for (i = 0; i < m->nworkers; i++) {
		struct worker *w = &m->workers[i];

		if (w->node != node ||
		    (!worker_live(w) && w->state != W_SPAWNING))
			continue;
		w->with_agent = !first;
		first = 0;
		if (w->state == W_SPAWNING) {
			down(m, w, W_DEAD, why);
			continue;
		}
		w->reported_hung = hung;
		w->agent_died = 1;
		registry_fail(m, w, why);
	}
}

/* NODE's (joined) agent leaves by itself: node health decides. */
static void
on_agent_leaving(void *ctx, int node, const char *why)
{
	(void)ctx;
	ops.leaving(ops.ctx, node, why);
}

/* NODE's (joined) agent has left: its slots are gone with it, and what
 * they held goes back, charged to nobody. */
static void
on_agent_left(void *ctx, int node)
{
	struct master *m = ctx;
	int i;

	for (i = 0; i < m->nworkers; i++)
		if (m->workers[i].node == node)
			registry_retire(m, &m->workers[i], "its node left");
	ops.left(ops.ctx, node);
}

/* ---- death ---- */

/* SIGKILL W's process.  Its agent, when up, is told to (it kills what
 * W's tasks left running too: one scan of its node's processes), and
 * here, on the same host, the very process W was (pid and start time) is
 * killed at once.  With its agent gone, what W's tasks left is found here.
 * Returns 1 if a signal was sent here. */
static int
kill_worker(struct master *m, struct worker *w)
{
	char entry[64], entry2[64];
	struct ft_buf msg = { 0 };
	int killed, strays, told = 0;

	if (agents_is_up(m, w->node))
		told = agents_relay(m, w->node, (uint32_t)w->id, w->spawn_gen,
				    FT_MSG_KILL, &msg) == 0;
	if (w->pid <= 0 || !ft_host_is_local(w->host))
		return 0;
	killed = ft_proc_is(w->pid, w->start) && kill(w->pid, SIGKILL) == 0;
	if (told)
		return killed;
	snprintf(entry, sizeof(entry), "%s=%d", FT_WORKER_ENV, (int)w->pid);
	snprintf(entry2, sizeof(entry2), "%s=%llu", FT_WORKER_START_ENV,
		 w->start);
	strays = ft_kill_by_env(entry, entry2);
	if (strays)
		log_info("worker %d: killed %d processes its tasks left", w->id,
			 strays);
	return killed;
}

/* Is W's process still there (and so hung rather than dead)?  Known only
 * for processes on this machine.  A killed process is seen dead by MPI (its
 * sockets closed) a moment before the kernel has made it a zombie; it is
 * exiting by then, which is not "still there" (a death that is the task's
 * doing must not be charged to the node). */
static int
still_there(const struct worker *w)
{
	return w->pid > 0 && ft_host_is_local(w->host) &&
	       ft_pid_staying(w->pid);
}

/* Take W's process out of service: kill it, close its link, move W to TO
 * for REASON, give its tasks back (a death counts against the task it
 * was running, a retirement against none). */
static void
take_down(struct master *m, struct worker *w, enum wstate to,
	  const char *reason)
{
	/* A death counts against the task it was running, unless the whole
	 * node agent went; a retirement against none. */
	w->died_on = to == W_DEAD && !w->agent_died ?
		     sched_oldest(m->sched, w->id) : 0;
	w->died_hung = to == W_DEAD && (w->reported_hung || still_there(w));
	/* A slot whose agent died went with it; what its tasks left was
	 * found by one scan for the agent's processes (agents_fail), not
	 * one scan each. */
	if (!w->agent_died)
		w->killed |= kill_worker(m, w);
	w->reported_hung = 0;
	w->agent_died = 0;
	down(m, w, to, reason);
	if (to == W_DEAD)
		sched_worker_down(m->sched, w->id, reason, ft_now());
	else
		sched_worker_release(m->sched, w->id, reason, ft_now());
	master_kick(m);
}

void
registry_fail(struct master *m, struct worker *w, const char *reason)
{
	if (!worker_live(w))
		return;
	/* How long it went unnoticed: at most this since it was last heard. */
	if (worker_up(w))
		hist_observe(&m->stats.detect, ft_now() - w->heard);
	take_down(m, w, W_DEAD, reason);
}

static void
deferred_doom(void *ctx, uint64_t id, uint64_t unused, const char *text)
{
	struct master *m = ctx;

	(void)unused;
	struct worker *w = &m->workers[id & 0xffffffffu];

	if (w->spawn_gen == (unsigned)(id >> 32))
		registry_fail(m, w, text);
}

void
registry_doom(struct master *m, struct worker *w, const char *reason)
{
	defer_call(&m->defer, deferred_doom,
		   (uint64_t)w->spawn_gen << 32 | (uint32_t)w->id, 0, reason);
}

/* Does a slot of NODE wait for its agent? */
static int
node_spawning(const struct master *m, int node)
{
	int i;

	for (i = 0; i < m->nworkers; i++)
		if (m->workers[i].node == node &&
		    m->workers[i].state == W_SPAWNING)
			return 1;
	return 0;
}

/* A retired node's agent is not spawned for it: after a power-off found
 * at a master's start, a spawn onto the node while it was cycled hung,
 * and with it every spawn after it (Open MPI runs them one at a time). */
void
registry_retire(struct master *m, struct worker *w, const char *reason)
{
	int waited;

	w->respawn_due = 0;
	if (worker_live(w)) {
		take_down(m, w, W_INACTIVE, reason);
		return;
	}
	waited = w->state == W_SPAWNING;
	if (waited)
		w->spawn_gen++;		/* its spawn's end is dropped */
	w->killed = 0;
	down(m, w, W_INACTIVE, reason);
	/* Only a slot that waited for its agent wanted it; the node's scan
	 * is done for those alone. */
	if (waited && !node_spawning(m, w->node))
		agents_unwant(m, w->node);
}

void
registry_revive(struct master *m, struct worker *w)
{
	if ((w->state != W_INACTIVE && w->state != W_DEAD) || w->absent)
		return;
	w->respawn_due = 1;
	w->respawn_at = ft_now();
	w->old_pid = ft_host_is_local(w->host) ? w->pid : 0;
	master_kick(m);
}

void
registry_hold(struct master *m, struct worker *w, int held)
{
	if (w->held == held)
		return;
	w->held = held;
	if (held) {
		sched_worker_pause(m->sched, w->id);
		return;
	}
	sched_worker_resume(m->sched, w->id);
	registry_dispatch(m, w);
}

/* ---- respawn ---- */

void
registry_respawn_later(struct master *m, struct worker *w)
{
	(void)m;
	if (w->state != W_DEAD)
		return;
	w->respawn_due = 1;
	w->respawn_at = ft_now() + RESPAWN_DELAY;
	w->old_pid = ft_host_is_local(w->host) ? w->pid : 0;
}

/* Has the time come to respawn W? */
static int
respawn_ready(const struct worker *w, double now)
{
	if (!w->respawn_due || now < w->respawn_at)
		return 0;
	return w->old_pid <= 0 || !ft_pid_alive(w->old_pid) ||
	       now > w->respawn_at + RESPAWN_WAIT_MAX;
}

/* ---- cron ---- */

/* Deadlines of W's start: its agent's, then its hello. */
static void
check_start(struct master *m, struct worker *w, double now)
{
	double limit = m->cfg.start_timeout < 15 ? m->cfg.start_timeout : 15;

	/* The agent's own deadlines end a wait for it (on_agent_down);
	 * this is the bound of last resort. */
	if (w->state == W_SPAWNING && now - w->since > 2 * m->cfg.start_timeout)
		down(m, w, W_DEAD, "its node agent did not come up in time");
	/* A slot is started by its agent in a few milliseconds: a respawn
	 * need not get the whole start timeout. */
	if (w->state == W_STARTING &&
	    now - w->since > (w->respawns ? limit : m->cfg.start_timeout))
		registry_fail(m, w, "no hello from the new worker in time");
}

void
registry_cron(struct master *m, double now)
{
	int i;

	agents_cron(m, now);
	settle_parked(m, now);
	for (i = 0; i < m->nworkers; i++) {
		struct worker *w = &m->workers[i];

		check_start(m, w, now);
		if ((w->state == W_DEAD || w->state == W_INACTIVE) &&
		    !m->stopping && respawn_ready(w, now)) {
			w->respawn_due = 0;
			start_slot(m, w);
		}
		update_state(m, w);
	}
}

double
registry_next_round(const struct master *m)
{
	return agents_next_round(m);
}

int
registry_starting(const struct master *m)
{
	int i;

	for (i = 0; i < m->nworkers; i++)
		if (m->workers[i].state == W_NEW ||
		    m->workers[i].state == W_SPAWNING ||
		    m->workers[i].state == W_STARTING ||
		    m->workers[i].respawn_due)
			return 1;
	return agents_starting(m);
}

int
registry_spawn_busy(const struct master *m)
{
	return agents_spawn_busy(m);
}

int
registry_any_left(const struct master *m)
{
	int i;

	for (i = 0; i < m->nworkers; i++) {
		const struct worker *w = &m->workers[i];

		if (worker_live(w) || w->state == W_NEW ||
		    w->state == W_SPAWNING || w->respawn_due)
			return 1;
	}
	return 0;
}

/* ---- shutdown ---- */

int
registry_lost_ranks(const struct master *m)
{
	return agents_lost_ranks(m);
}

/* Every slot stops with its agent: the agent tells them, relays their
 * byes, then says its own. */
void
registry_stop_all(struct master *m)
{
	int i;

	for (i = 0; i < m->nworkers; i++) {
		struct worker *w = &m->workers[i];

		w->respawn_due = 0;
		if (!worker_live(w) || w->bye || w->state == W_STOPPING)
			continue;
		sched_worker_pause(m->sched, w->id);
		worker_set(w, W_STOPPING, "stop", &m->events);
	}
	agents_stop_all(m, registry_lost_ranks(m) ? FT_STOP_NO_FINALIZE : 0);
}

int
registry_all_stopped(const struct master *m)
{
	int i;

	for (i = 0; i < m->nworkers; i++)
		if (worker_live(&m->workers[i]) && !m->workers[i].bye)
			return 0;
	return agents_all_stopped(m);
}

void
registry_kill_leftovers(struct master *m)
{
	int i;

	for (i = 0; i < m->nworkers; i++) {
		struct worker *w = &m->workers[i];

		if (worker_live(w) && !w->bye)
			registry_fail(m, w, "did not stop in time");
	}
	agents_kill_leftovers(m);
}
