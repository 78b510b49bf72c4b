/*
 * registry: the master's workers.
 *
 * Each worker slot has at most one live process.  The master keeps one
 * standing receive per worker and pings it every heartbeat; a ping that is
 * not answered within heartbeat_timeout, a send that does not complete, or
 * the scheduler's slow rule declares the worker dead.  A dead worker is
 * killed (if the master can), its requests are retired, its tasks go back
 * to the queue, and the ladder decides: respawn, or hand the node over to
 * node health.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "master.h"
#include "proto.h"
#include "wire.h"

#define SEND_TIMEOUT_MIN 5.0	/* seconds a send to a live worker may take */
#define PICKS_MAX 256
/* A spawn right after a kill raced Open MPI's handling of the dead
 * process: once in a few hundred respawns MPI_Comm_spawn hung for its
 * 300 s timeout.  Respawn only once the old process is gone, and a moment
 * later. */
#define RESPAWN_DELAY 0.2
#define RESPAWN_WAIT_MAX 5.0

static void on_message(struct treq *t, enum treq_outcome outcome, void *arg);

const char *
registry_state_name(enum wstate s)
{
	static const char *names[] = {
		"?", "starting", "idle", "busy", "slow", "dead", "inactive",
		"stopped",
	};

	return (s >= W_STARTING && s <= W_STOPPED) ? names[s] : "?";
}

int
registry_live(const struct worker *w)
{
	return w->state == W_STARTING || w->state == W_IDLE ||
	       w->state == W_BUSY || w->state == W_SLOW;
}

void
registry_init(struct master *m)
{
	int i, k, slot = 0;

	m->nworkers = m->cfg.nworkers;
	m->workers = ft_calloc((size_t)m->nworkers, sizeof(*m->workers));
	for (i = 0; i < m->cfg.nnodes; i++)
		for (k = 0; k < m->cfg.nodes[i].workers; k++, slot++) {
			struct worker *w = &m->workers[slot];

			w->m = m;
			w->slot = slot;
			w->node = i;
			w->state = W_DEAD;
			w->comm = MPI_COMM_NULL;
		}
}

static double
send_timeout(const struct master *m)
{
	return fmax(SEND_TIMEOUT_MIN, 2 * m->cfg.heartbeat_timeout);
}

static void
event_worker(struct master *m, const char *name, const struct worker *w)
{
	jsonl_event(&m->events, name);
	jsonl_int(&m->events, "worker", w->slot);
	jsonl_str(&m->events, "node", m->cfg.nodes[w->node].name);
	jsonl_int(&m->events, "pid", w->pid);
}

static int
post_receive(struct master *m, struct worker *w)
{
	w->recv = treq_irecv(&m->treqs, FT_MSG_MAX, w->rank, MPI_ANY_TAG,
			     w->comm, INFINITY, on_message, w);
	return w->recv ? 0 : -1;
}

void
registry_attach(struct master *m, struct worker *w, MPI_Comm comm, int rank)
{
	double now = ft_now();

	w->comm = comm;
	w->rank = rank;
	w->state = W_STARTING;
	w->pid = 0;
	w->bye = 0;
	w->doomed = NULL;
	w->started = w->last_heard = w->last_ping = now;
	w->ping = NULL;
	if (post_receive(m, w) == -1)
		registry_dead(m, w, "cannot post a receive");
}

/* A send to W expired: it does not take messages any more. */
static void
on_sent(struct treq *t, enum treq_outcome outcome, void *arg)
{
	struct worker *w = arg;

	(void)t;
	if (outcome == TREQ_EXPIRED && registry_live(w))
		registry_dead(w->m, w, "a send did not complete in time");
}

/* Send MSG with TAG to W.  0, or -1 (W declared dead). */
static int
send_msg(struct master *m, struct worker *w, int tag, struct ft_buf *msg)
{
	struct treq *t = treq_isend(&m->treqs, msg, w->rank, tag, w->comm,
				    ft_now() + send_timeout(m), 0, on_sent, w);

	if (t == NULL) {
		/* Not now: the caller may be in the middle of the scheduler. */
		w->doomed = "MPI send failed";
		return -1;
	}
	m->msgs_out++;
	loop_kick(m);
	return 0;
}

static void
update_state(struct master *m, struct worker *w)
{
	if (!(w->state == W_IDLE || w->state == W_BUSY || w->state == W_SLOW))
		return;
	if (sched_is_slow(m->sched, w->slot))
		w->state = W_SLOW;
	else
		w->state = sched_inflight(m->sched, w->slot) ? W_BUSY : W_IDLE;
}

static void
event_assigned(struct master *m, const struct worker *w,
	       const struct sched_pick *p)
{
	if (!m->cfg.task_events)
		return;
	jsonl_event(&m->events, "task_assigned");
	jsonl_int(&m->events, "batch", p->task->batch);
	jsonl_int(&m->events, "task", p->task->index);
	jsonl_int(&m->events, "attempt", p->attempt);
	jsonl_int(&m->events, "worker", w->slot);
	if (p->duplicate)
		jsonl_bool(&m->events, "duplicate", 1);
	jsonl_end(&m->events);
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
		struct proto_task pt = {
			.tid = picks[i].tid,
			.attempt = picks[i].attempt,
			.spec = picks[i].task->spec,
			.spec_len = picks[i].task->spec_len,
		};

		if (count > 0 && msg.len + pt.spec_len + 32 > FT_MSG_MAX) {
			proto_set_count(&msg, count);
			if (send_msg(m, w, FT_MSG_ASSIGN, &msg) == -1)
				return;
			proto_begin_list(&msg);
			count = 0;
		}
		proto_put_task(&msg, &pt);
		count++;
		event_assigned(m, w, &picks[i]);
	}
	proto_set_count(&msg, count);
	send_msg(m, w, FT_MSG_ASSIGN, &msg);
}

void
registry_dispatch(struct master *m, struct worker *w)
{
	struct sched_pick picks[PICKS_MAX];
	int n;

	if (!(w->state == W_IDLE || w->state == W_BUSY || w->state == W_SLOW) ||
	    m->stopping)
		return;
	n = sched_take(m->sched, w->slot, ft_now(), picks, PICKS_MAX);
	if (n > 0)
		send_picks(m, w, picks, n);
	update_state(m, w);
}

void
registry_dispatch_all(struct master *m)
{
	int i;

	for (i = 0; i < m->nworkers; i++)
		registry_dispatch(m, &m->workers[i]);
}

/* ---- messages from a worker ---- */

static void
on_hello(struct master *m, struct worker *w, const void *p, size_t n)
{
	struct proto_hello h;
	struct proto_welcome wel = {
		.output_cap = (uint32_t)m->cfg.output_cap,
		.master_timeout = fmax(30, 10 * m->cfg.heartbeat),
	};
	struct ft_buf msg = { 0 };

	if (proto_get_hello(p, n, &h) == -1 || h.version != FT_PROTO_VERSION ||
	    (int)h.slot != w->slot || w->state != W_STARTING) {
		log_warnx("worker %d: bad hello (version %u, slot %u)", w->slot,
			  h.version, h.slot);
		registry_dead(m, w, "incompatible or malformed hello");
		return;
	}
	w->pid = (pid_t)h.pid;
	snprintf(w->host, sizeof(w->host), "%.*s", (int)h.host_len, h.host);
	proto_put_welcome(&msg, &wel);
	if (send_msg(m, w, FT_MSG_WELCOME, &msg) == -1)
		return;
	w->state = W_IDLE;
	sched_worker_up(m->sched, w->slot);
	event_worker(m, w->respawns ? "worker_respawned" : "worker_up", w);
	jsonl_str(&m->events, "host", w->host);
	jsonl_int(&m->events, "respawns", w->respawns);
	jsonl_end(&m->events);
	log_info("worker %d up on %s (%s, pid %d)", w->slot,
		 m->cfg.nodes[w->node].name, w->host, (int)w->pid);
	registry_dispatch(m, w);
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
		enum sched_verdict v = sched_done(m->sched, w->slot, r.tid,
						  r.attempt, r.seconds,
						  ft_now());

		m->results_in++;
		if (v == SCHED_ACCEPTED) {
			w->tasks_done++;
			w->failures = 0;
			results_record(m, r.tid, w->slot, &r);
		} else if (v == SCHED_DUPLICATE) {
			m->duplicates++;
		} else {
			m->bad_msgs++;
		}
	}
	if (rc == -1)
		goto bad;
	registry_dispatch(m, w);
	return;
bad:
	m->bad_msgs++;
	log_warnx("worker %d: malformed result message", w->slot);
}

static void
on_pong(struct master *m, struct worker *w, const void *p, size_t n)
{
	struct proto_pong pong;

	if (proto_get_pong(p, n, &pong) == -1) {
		m->bad_msgs++;
		return;
	}
	if (w->ping && w->ping->key == pong.seq) {
		treq_reply(w->ping);
		w->ping = NULL;
	}
}

/* One message from W: dispatch on its type. */
static void
handle(struct master *m, struct worker *w, int tag, const void *p, size_t n)
{
	if (w->state == W_STARTING && tag != FT_MSG_HELLO) {
		registry_dead(m, w, "spoke before saying hello");
		return;
	}
	switch (tag) {
	case FT_MSG_HELLO:
		on_hello(m, w, p, n);
		break;
	case FT_MSG_RESULT:
		on_results(m, w, p, n);
		break;
	case FT_MSG_PONG:
		on_pong(m, w, p, n);
		break;
	case FT_MSG_BYE:
		w->bye = 1;
		break;
	default:
		m->bad_msgs++;
		log_warnx("worker %d: unexpected message %s (%d)", w->slot,
			  proto_msg_name(tag), tag);
	}
}

static void
on_message(struct treq *t, enum treq_outcome outcome, void *arg)
{
	struct worker *w = arg;
	struct master *m = w->m;

	if (w->recv != t)
		return;
	w->recv = NULL;
	if (outcome != TREQ_DONE || !registry_live(w))
		return;
	if (t->error != MPI_SUCCESS) {
		registry_dead(m, w, "receive failed (message too long?)");
		return;
	}
	m->msgs_in++;
	w->last_heard = ft_now();
	loop_kick(m);
	/* Post the next receive first: handling may send and expect answers. */
	if (post_receive(m, w) == -1) {
		registry_dead(m, w, "cannot post a receive");
		return;
	}
	handle(m, w, t->status.MPI_TAG, t->buf, (size_t)t->count);
	if (w->bye && w->state != W_DEAD)
		w->state = W_STOPPED;
}

/* ---- pings ---- */

static void
on_ping_done(struct treq *t, enum treq_outcome outcome, void *arg)
{
	struct worker *w = arg;
	char why[96];

	if (w->ping == t)
		w->ping = NULL;
	if (outcome != TREQ_EXPIRED || !registry_live(w))
		return;
	snprintf(why, sizeof(why), "no answer to a ping in %.3g s",
		 w->m->cfg.heartbeat_timeout);
	registry_dead(w->m, w, why);
}

static void
ping(struct master *m, struct worker *w, double now)
{
	struct ft_buf msg = { 0 };
	struct treq *t;

	w->ping_seq++;
	wire_put_u64(&msg, w->ping_seq);
	t = treq_isend(&m->treqs, &msg, w->rank, FT_MSG_PING, w->comm,
		       now + m->cfg.heartbeat_timeout, 1, on_ping_done, w);
	if (t == NULL) {
		registry_dead(m, w, "MPI send failed");
		return;
	}
	t->key = w->ping_seq;
	w->ping = t;
	w->last_ping = now;
	m->msgs_out++;
}

/* ---- death and the ladder ---- */

/* SIGKILL W's process if it runs here and the MPI survives that.
 * Returns 1 if a signal was sent. */
static int
kill_worker(struct master *m, struct worker *w)
{
	char entry[64];
	int killed, strays;

	if (!m->can_kill || w->pid <= 0 || !ft_host_is_local(w->host))
		return 0;
	killed = kill(w->pid, SIGKILL) == 0;
	/* Its tasks' processes would run on beside their next attempt. */
	snprintf(entry, sizeof(entry), "%s=%d", FT_WORKER_ENV, (int)w->pid);
	strays = ft_kill_by_env(entry);
	if (strays)
		log_info("worker %d: killed %d processes its tasks left", w->slot,
			 strays);
	return killed;
}

/* Drop every MPI request of W, and its intercommunicator. */
static void
forget(struct master *m, struct worker *w)
{
	if (w->comm == MPI_COMM_NULL)
		return;
	treq_retire_peer(&m->treqs, w->comm, w->rank);
	w->recv = NULL;
	w->ping = NULL;
	if (!m->static_world) {
		MPI_Comm_free(&w->comm);
		w->comm = MPI_COMM_NULL;
	}
}

/* Common part of death and retirement. */
static void
take_down(struct master *m, struct worker *w, const char *event,
	  const char *reason, enum wstate state)
{
	int killed = kill_worker(m, w);

	/* Where killing a rank would end the job (MPICH), a hung worker is
	 * left alone and told to stop at shutdown. */
	w->lingering = !killed && m->static_world && !m->can_kill;
	w->spawning = 0;	/* a spawn still under way is dropped when done */
	event_worker(m, event, w);
	jsonl_str(&m->events, "reason", reason);
	jsonl_bool(&m->events, "killed", killed);
	jsonl_end(&m->events);
	events_flush(m);
	log_warnx("worker %d on %s (pid %d): %s: %s%s", w->slot,
		  m->cfg.nodes[w->node].name, (int)w->pid, event, reason,
		  killed ? " (killed)" : "");
	forget(m, w);
	w->state = state;
	sched_worker_down(m->sched, w->slot, reason, ft_now());
	loop_kick(m);
}

static void
schedule_respawn(struct worker *w)
{
	w->respawn_due = 1;
	w->respawn_at = ft_now() + RESPAWN_DELAY;
	w->old_pid = ft_host_is_local(w->host) ? w->pid : 0;
}

/* Has the time come to respawn W? */
static int
respawn_ready(const struct worker *w, double now)
{
	if (now < w->respawn_at)
		return 0;
	return w->old_pid <= 0 || !ft_pid_alive(w->old_pid) ||
	       now > w->respawn_at + RESPAWN_WAIT_MAX;
}

void
registry_dead(struct master *m, struct worker *w, const char *reason)
{
	if (!registry_live(w))
		return;
	take_down(m, w, "worker_dead", reason, W_DEAD);
	if (m->stopping)
		return;
	w->failures++;
	if (m->static_world) {
		log_warnx("worker %d: static launch cannot respawn; its tasks "
			  "go to the other workers", w->slot);
		return;
	}
	if (w->failures <= m->cfg.respawn_limit &&
	    m->nodes[w->node].state == N_UP)
		schedule_respawn(w);
	else
		nodes_worker_failed(m, w);
}

void
registry_retire(struct master *m, struct worker *w, const char *reason)
{
	w->respawn_due = 0;
	if (registry_live(w))
		take_down(m, w, "worker_inactive", reason, W_INACTIVE);
	else
		w->state = W_INACTIVE;
}

/* How long a spawn may take before it is given up on (it normally takes
 * a quarter of a second here). */
static double
spawn_timeout(const struct master *m)
{
	return m->cfg.start_timeout < 15 ? m->cfg.start_timeout : 15;
}

/* A spawn for W failed (ERR): count it and climb the ladder. */
static void
spawn_failed(struct master *m, struct worker *w, const char *err)
{
	log_warnx("worker %d: respawn failed: %s", w->slot, err);
	jsonl_event(&m->events, "worker_spawn_failed");
	jsonl_int(&m->events, "worker", w->slot);
	jsonl_str(&m->events, "node", m->cfg.nodes[w->node].name);
	jsonl_str(&m->events, "reason", err);
	jsonl_end(&m->events);
	w->state = W_DEAD;
	w->failures++;
	if (w->failures <= m->cfg.respawn_limit && !m->stopping)
		schedule_respawn(w);
	else if (!m->stopping)
		nodes_worker_failed(m, w);
}

/* Take the spawner thread's finished spawn, if any. */
static void
collect_spawn(struct master *m)
{
	MPI_Comm comm;
	char err[256];
	unsigned gen;
	struct worker *w = launch_async_poll(m, &comm, &gen, err, sizeof(err));

	if (w == NULL)
		return;
	if (!w->spawning || gen != w->spawn_gen) {
		/* Given up on meanwhile: the new process, never welcomed,
		 * leaves by itself. */
		if (comm != MPI_COMM_NULL)
			MPI_Comm_free(&comm);
		return;
	}
	w->spawning = 0;
	if (comm == MPI_COMM_NULL) {
		spawn_failed(m, w, err);
		return;
	}
	snprintf(w->host, sizeof(w->host), "%s", m->cfg.nodes[w->node].host);
	registry_attach(m, w, comm, 0);
}

/* Spawn W again (the first rung of the ladder), on the spawner thread
 * when there is one. */
static void
respawn(struct master *m, struct worker *w)
{
	char err[256];

	if (m->async_spawn) {
		if (launch_async_start(m, w) == -1)
			return;		/* try again at the next cron */
		w->respawn_due = 0;
		w->respawns++;
		w->spawning = 1;
		w->state = W_STARTING;
		w->pid = 0;
		w->started = ft_now();
		return;
	}
	w->respawn_due = 0;
	w->respawns++;
	if (launch_spawn(m, w, err, sizeof(err)) == -1)
		spawn_failed(m, w, err);
}

static void
on_cancel_sent(struct master *m, struct worker *w, uint64_t tid,
	       uint32_t attempt)
{
	struct ft_buf msg = { 0 };

	wire_put_u64(&msg, tid);
	wire_put_u32(&msg, attempt);
	send_msg(m, w, FT_MSG_CANCEL, &msg);
}

/* Ping W if a heartbeat is due, or sooner when it holds the last tasks. */
static void
maybe_ping(struct master *m, struct worker *w, double now)
{
	double every = m->cfg.heartbeat;

	if (w->ping != NULL || w->state == W_STARTING || !registry_live(w))
		return;
	if (sched_queued(m->sched) == 0 && sched_inflight(m->sched, w->slot) > 0)
		every /= 4;
	if (now - w->last_ping >= every)
		ping(m, w, now);
}

void
registry_cron(struct master *m, double now)
{
	int i;

	if (m->async_spawn)
		collect_spawn(m);
	for (i = 0; i < m->nworkers; i++) {
		struct worker *w = &m->workers[i];

		if (w->spawning && now - w->started > spawn_timeout(m)) {
			w->spawning = 0;	/* its end, if any, is dropped */
			spawn_failed(m, w, "MPI_Comm_spawn did not return in time");
		}
		/* A respawned worker is in MPI already when its spawn
		 * returns: it need not get the whole start timeout. */
		if (w->state == W_STARTING && !w->spawning &&
		    now - w->started > (w->respawns ? spawn_timeout(m)
						    : m->cfg.start_timeout))
			registry_dead(m, w, "no hello from the new worker in time");
		if (w->doomed) {
			const char *why = w->doomed;

			w->doomed = NULL;
			registry_dead(m, w, why);
		}
		if (w->respawn_due && !m->stopping && respawn_ready(w, now))
			respawn(m, w);
		maybe_ping(m, w, ft_now());
		update_state(m, w);
	}
}

/* A static world that lost ranks cannot finalize: Open MPI's
 * MPI_Finalize waits for every rank of the world. */
int
registry_lost_ranks(const struct master *m)
{
	int i;

	for (i = 0; m->static_world && i < m->nworkers; i++)
		if (m->workers[i].state == W_DEAD ||
		    m->workers[i].state == W_INACTIVE)
			return 1;
	return 0;
}

static uint32_t
stop_flags(const struct master *m)
{
	return registry_lost_ranks(m) ? FT_STOP_NO_FINALIZE : 0;
}

void
registry_stop_all(struct master *m)
{
	int i;

	for (i = 0; i < m->nworkers; i++) {
		struct worker *w = &m->workers[i];
		struct ft_buf msg = { 0 };

		w->respawn_due = 0;
		if (w->lingering) {
			if (w->pid > 0 && ft_host_is_local(w->host))
				kill(w->pid, SIGCONT);
			wire_put_u32(&msg, stop_flags(m));
			send_msg(m, w, FT_MSG_STOP, &msg);
			continue;
		}
		if (!registry_live(w) || w->bye || w->comm == MPI_COMM_NULL)
			continue;
		/* A stopped (SIGSTOP) worker that was not killed can still
		 * leave cleanly once it runs again. */
		if (w->pid > 0 && ft_host_is_local(w->host))
			kill(w->pid, SIGCONT);
		sched_worker_pause(m->sched, w->slot);
		wire_put_u32(&msg, stop_flags(m));
		send_msg(m, w, FT_MSG_STOP, &msg);
	}
}

int
registry_all_stopped(struct master *m)
{
	int i;

	for (i = 0; i < m->nworkers; i++)
		if (registry_live(&m->workers[i]) && !m->workers[i].bye &&
		    !m->workers[i].spawning)
			return 0;
	return 1;
}

void
registry_kill_leftovers(struct master *m)
{
	int i;

	for (i = 0; i < m->nworkers; i++) {
		struct worker *w = &m->workers[i];

		if (registry_live(w) && !w->bye)
			registry_dead(m, w, "did not stop in time");
	}
}

/* ---- the scheduler's calls ---- */

static void
sched_reassigned(void *ctx, uint64_t tid, uint32_t attempt, int worker,
		 const char *reason)
{
	struct master *m = ctx;
	const struct sched_task *t = sched_task(m->sched, tid);

	jsonl_event(&m->events, "task_reassigned");
	jsonl_int(&m->events, "batch", t->batch);
	jsonl_int(&m->events, "task", t->index);
	jsonl_int(&m->events, "attempt", attempt);
	jsonl_int(&m->events, "worker", worker);
	jsonl_str(&m->events, "reason", reason);
	jsonl_end(&m->events);
}

static void
sched_failed(void *ctx, uint64_t tid, const char *reason)
{
	results_fail(ctx, tid, reason);
}

static void
sched_cancel(void *ctx, int worker, uint64_t tid, uint32_t attempt)
{
	struct master *m = ctx;
	struct worker *w = &m->workers[worker];

	if (registry_live(w) && w->state != W_STARTING)
		on_cancel_sent(m, w, tid, attempt);
}

static void
sched_slow(void *ctx, int worker, uint64_t tid)
{
	struct master *m = ctx;
	const struct sched_task *t = sched_task(m->sched, tid);

	event_worker(m, "worker_slow", &m->workers[worker]);
	jsonl_int(&m->events, "batch", t->batch);
	jsonl_int(&m->events, "task", t->index);
	jsonl_end(&m->events);
}

static void
sched_hung(void *ctx, int worker, uint64_t tid, double seconds)
{
	struct master *m = ctx;
	char why[128];

	snprintf(why, sizeof(why), "slow for %.1f s on one task (id %llu)",
		 seconds, (unsigned long long)tid);
	registry_dead(m, &m->workers[worker], why);
}

void
registry_sched_ops(struct master *m, struct sched_ops *ops)
{
	ops->ctx = m;
	ops->reassigned = sched_reassigned;
	ops->failed = sched_failed;
	ops->cancel = sched_cancel;
	ops->slow = sched_slow;
	ops->hung = sched_hung;
}
