/* registry: the master's workers (see registry.h). */
#include "registry.h"

#include <math.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "hosts.h"
#include "log.h"
#include "parked.h"
#include "spawn.h"

#define SEND_TIMEOUT_MIN 5.0	/* seconds a send to a live worker may take */
#define PICKS_MAX 256
/* A spawn right after a kill raced Open MPI's handling of the dead
 * process: once in a few hundred respawns MPI_Comm_spawn hung for its
 * 300 s timeout.  Respawn only once the old process is gone, and a moment
 * later. */
#define RESPAWN_DELAY 0.2
#define RESPAWN_WAIT_MAX 5.0
#define START_PARALLEL 8	/* first spawns under way at once */
#define IDLE_NAP_MAX 0.5	/* longest nap of an idle worker */
#define EXIT_DRAIN_ROUNDS 4	/* MPI progress rounds for a dead worker's
				 * last messages */

static struct registry_ops ops;
static struct master *lm;		/* for the probes' callbacks */
static struct parked *parked;		/* signal-9 reports held back */

/* ---- set-up ---- */

static void on_link_message(void *ctx, int id, int tag, const void *p,
			    size_t n);
static void on_link_failed(void *ctx, int id, const char *reason);
static void on_exited(void *ctx, int id);

void
registry_init(struct master *m, const struct registry_ops *o)
{
	struct link_ops lo = {
		.ctx = m, .message = on_link_message, .failed = on_link_failed,
	};
	int i, k, slot = 0;

	lm = m;
	ops = *o;
	parked = parked_new();
	m->nworkers = m->cfg.nworkers;
	m->workers = ft_calloc((size_t)m->nworkers, sizeof(*m->workers));
	for (i = 0; i < m->cfg.nnodes; i++)
		for (k = 0; k < m->cfg.nodes[i].workers; k++, slot++)
			worker_init(&m->workers[slot], slot, i,
				    m->cfg.nodes[i].name);
	links_init(&m->links, m->nworkers, &m->treqs, &lo, !m->static_world,
		   fmax(SEND_TIMEOUT_MIN, 2 * m->cfg.heartbeat_timeout),
		   m->cfg.heartbeat_timeout);
	pidwatches_init(&m->exits, m->nworkers, on_exited, m);
}

void
registry_free(struct master *m)
{
	links_close_all(&m->links);
	links_free(&m->links);
	pidwatches_free(&m->exits);
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

/* Begin W's process's life on COMM/RANK: wait for its hello. */
static void
attach(struct master *m, struct worker *w, MPI_Comm comm, int rank)
{
	snprintf(w->host, sizeof(w->host), "%s", m->cfg.nodes[w->node].host);
	w->pid = 0;
	w->start = 0;
	w->bye = 0;
	w->killed = 0;
	worker_set(w, W_STARTING, NULL, &m->events);
	if (link_open(&m->links, w->id, comm, rank) == -1)
		registry_fail(m, w, "cannot post a receive");
}

static void
spawn_args(const struct master *m, const struct worker *w,
	   struct spawn_args *a)
{
	a->exe = m->worker_exe;
	a->host = m->cfg.nodes[w->node].host;
	a->add_host = m->nodes[w->node].outside;
	a->slot = w->id;
	a->node = w->node_name;
	a->state_dir = m->cfg.state_dir;
}

/* Spawn W in the loop: STARTING, or DEAD with the spawn's error. */
static void
spawn_now(struct master *m, struct worker *w)
{
	struct spawn_args a;
	MPI_Comm comm;
	char err[256];

	spawn_args(m, w, &a);
	w->spawn_gen++;
	worker_set(w, W_SPAWNING, NULL, &m->events);
	if (spawn_one(&a, &comm, err, sizeof(err)) == 0) {
		attach(m, w, comm, 0);
		return;
	}
	down(m, w, W_DEAD, err);
}

/* Start W's first spawn on a spawner thread.  0, or -1 (no thread). */
static int
first_spawn(struct master *m, struct worker *w)
{
	struct spawn_args a;

	spawn_args(m, w, &a);
	if (spawn_async_start(&a, w->spawn_gen + 1) == -1)
		return -1;
	w->spawn_gen++;
	worker_set(w, W_SPAWNING, NULL, &m->events);
	return 0;
}

/* The first spawns, START_PARALLEL at a time: each costs the master
 * little and mostly waits for the new process's MPI_Init, so that
 * several at once start a cluster in a fraction of the time.  Called
 * again from the cron until every worker has been spawned once. */
static void
start_more(struct master *m)
{
	int i, running = 0;

	for (i = 0; i < m->nworkers; i++)
		running += m->workers[i].state == W_SPAWNING;
	for (i = 0; i < m->nworkers && running < START_PARALLEL; i++) {
		struct worker *w = &m->workers[i];

		if (w->state != W_NEW || m->stopping)
			continue;
		if (first_spawn(m, w) == -1) {
			spawn_now(m, w);	/* no thread: in the loop */
			continue;
		}
		running++;
	}
}

int
registry_start(struct master *m, char *err, size_t n)
{
	int i, up = 0, tried = 0;

	if (m->static_world) {
		if (spawn_static_check(m->nworkers, err, n) == -1)
			return -1;
		for (i = 0; i < m->nworkers; i++)
			attach(m, &m->workers[i], MPI_COMM_WORLD, i + 1);
		return 0;
	}
	if (m->async_spawn) {
		start_more(m);
		return 0;
	}
	for (i = 0; i < m->nworkers; i++) {
		if (m->workers[i].state != W_NEW)
			continue;	/* its host was left out */
		spawn_now(m, &m->workers[i]);
		up += m->workers[i].state == W_STARTING;
		tried++;
	}
	if (tried > 0 && up == 0)
		snprintf(err, n, "no worker could be spawned (see master.log)");
	return tried > 0 && up == 0 ? -1 : 0;
}

/* ---- sending ---- */

/* Send MSG (taken over) with TAG to W.  0, or -1: W is doomed (the caller
 * may be in the middle of the scheduler). */
static int
send_msg(struct master *m, struct worker *w, int tag, struct ft_buf *msg)
{
	if (link_send(&m->links, w->id, tag, msg) == -1) {
		registry_doom(m, w, "MPI send failed");
		return -1;
	}
	master_kick(m);
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
		};

		pt.gpus_len = picks[i].gpus ? gpu_ids(m, w, picks[i].gpus, gpus,
						      sizeof(gpus)) : 0;
		pt.cpuset_len = cpu_set_of(m, w, cpuset, sizeof(cpuset));
		if (count > 0 && msg.len + pt.spec_len + pt.gpus_len +
		    pt.cpuset_len + 48 > FT_MSG_MAX) {
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

/* Send W up to MAX tasks (as many as its window takes). */
static void
dispatch(struct master *m, struct worker *w, int max)
{
	struct sched_pick picks[PICKS_MAX];
	int n;

	/* No new task while the state dir cannot take their results. */
	if (!worker_up(w) || m->stopping || !store_ok(&m->store))
		return;
	n = sched_take(m->sched, w->id, ft_now(), picks, max);
	if (n > 0)
		send_picks(m, w, picks, n);
	update_state(m, w);
}

void
registry_dispatch(struct master *m, struct worker *w)
{
	dispatch(m, w, PICKS_MAX);
}

/* Every idle worker gets a task before any worker gets a second: a window
 * of two (short tasks) must not let the first worker in the list take
 * both tasks of a job's phase while the second stays idle. */
void
registry_dispatch_all(struct master *m)
{
	int i;

	for (i = 0; i < m->nworkers; i++)
		if (sched_inflight(m->sched, i) == 0)
			dispatch(m, &m->workers[i], 1);
	for (i = 0; i < m->nworkers; i++)
		dispatch(m, &m->workers[i], PICKS_MAX);
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

/* The longest nap of an idle worker: a ping must be answered within
 * TIMEOUT.  Half of it, for the usual heartbeats; a quarter for fast ones
 * (they ask for fast detection and pay for it). */
static double
idle_nap(double timeout)
{
	return timeout >= 0.5 ? fmin(IDLE_NAP_MAX, timeout / 2) : timeout / 4;
}

static void
on_hello(struct master *m, struct worker *w, const void *p, size_t n)
{
	struct proto_hello h;
	struct proto_welcome wel = {
		.output_cap = (uint32_t)m->cfg.output_cap,
		.master_timeout = m->cfg.master_silence,
		.idle_nap = idle_nap(m->cfg.heartbeat_timeout),
		.node = w->node_name,
		.node_len = strlen(w->node_name),
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
	if (ft_host_is_local(w->host))
		pidwatch_start(&m->exits, m->loop, w->id, w->pid, w->start);
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
		if (parked_is_kill(&r) && !m->stopping)
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
on_pong(struct master *m, struct worker *w, const void *p, size_t n)
{
	struct proto_pong pong;

	if (proto_get_pong(p, n, &pong) == -1) {
		m->counters.bad_msgs++;
		return;
	}
	link_pong(&m->links, w->id, pong.seq);
}

static void
on_bye(struct master *m, struct worker *w, const void *p, size_t n)
{
	if (proto_get_bye(p, n) == -1)
		m->counters.bad_msgs++;
	w->bye = 1;
	worker_set(w, W_STOPPED, "said bye", &m->events);
}

/* One message from worker ID: dispatch on its type. */
static void
on_link_message(void *ctx, int id, int tag, const void *p, size_t n)
{
	struct master *m = ctx;
	struct worker *w = &m->workers[id];

	if (!worker_live(w))
		return;
	if (w->state == W_STARTING && tag != FT_MSG_HELLO) {
		registry_fail(m, w, "spoke before saying hello");
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
		on_bye(m, w, p, n);
		break;
	default:
		m->counters.bad_msgs++;
		log_warnx("worker %d: unexpected message %s (%d)", w->id,
			  proto_msg_name(tag), tag);
	}
}

static void
on_link_failed(void *ctx, int id, const char *reason)
{
	struct master *m = ctx;

	registry_fail(m, &m->workers[id], reason);
}

/* Worker ID's process on this machine has exited (pidwatch.h).  After a
 * bye, or once told to stop, that is its way out; before, a death seen
 * at once instead of at its next deadline. */
static void
on_exited(void *ctx, int id)
{
	struct master *m = ctx;
	struct worker *w = &m->workers[id];

	if (!worker_up(w))
		return;
	m->counters.exits_seen++;
	/* What it sent before it died comes first: a result still in MPI's
	 * hands names a task it finished, and the task it died running is
	 * the one after (blame must not depend on which is seen first). */
	for (int i = 0; i < EXIT_DRAIN_ROUNDS && worker_up(w); i++)
		treq_test(&m->treqs, ft_now());
	if (worker_up(w))
		registry_fail(m, w, "its process exited");
}

/* ---- death ---- */

static void
remote_killed(void *arg, const struct child_result *r)
{
	char what[CHILD_OUT_MAX + 64];

	child_describe(r, what, sizeof(what));
	log_info("worker %d: kill over ssh %s", (int)(intptr_t)arg, what);
}

/* SIGKILL the process of W, on another host, over ssh (in the
 * background: the host may not answer, and the pid means nothing here).
 * Only the very process W was: its start time must match there. */
static void
kill_remote(struct master *m, struct worker *w)
{
	char cmd[160], **argv;
	struct child *c;

	snprintf(cmd, sizeof(cmd), "[ \"$(cut -d' ' -f22 /proc/%d/stat)\" = "
		 "%llu ] && kill -9 %d", (int)w->pid, w->start, (int)w->pid);
	argv = hosts_remote_argv(&m->cfg, w->host, cmd);
	c = child_start(m->loop, argv, m->cfg.dir, HOSTS_PROBE_BOUND,
			remote_killed, (void *)(intptr_t)w->id);
	hosts_argv_free(argv);
	(void)c;		/* it ends by itself within the bound */
	log_info("worker %d: killing pid %d on %s over ssh", w->id,
		 (int)w->pid, w->host);
}

/* SIGKILL W's process if the MPI survives that; only the very process W
 * was (pid and start time), never one that reused its pid.  On another
 * host, over ssh, in the background.  Returns 1 if a signal was sent
 * here. */
static int
kill_worker(struct master *m, struct worker *w)
{
	char entry[64], entry2[64];
	int killed, strays;

	if (!m->can_kill || w->pid <= 0)
		return 0;
	if (!ft_host_is_local(w->host)) {
		if (w->start)
			kill_remote(m, w);
		return 0;
	}
	killed = ft_proc_is(w->pid, w->start) && kill(w->pid, SIGKILL) == 0;
	/* Its tasks' processes would run on beside their next attempt. */
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
	pidwatch_stop(&m->exits, w->id);
	w->died_on = to == W_DEAD ? sched_oldest(m->sched, w->id) : 0;
	w->died_hung = to == W_DEAD && still_there(w);
	w->killed = kill_worker(m, w);
	/* Where killing a rank would end the job (MPICH), a hung worker is
	 * left alone and told to stop at shutdown. */
	w->lingering = !w->killed && m->static_world && !m->can_kill;
	link_close(&m->links, w->id);
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
		hist_observe(&m->stats.detect,
			     ft_now() - m->links.v[w->id].last_heard);
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

void
registry_retire(struct master *m, struct worker *w, const char *reason)
{
	w->respawn_due = 0;
	if (worker_live(w)) {
		take_down(m, w, W_INACTIVE, reason);
		return;
	}
	if (w->state == W_SPAWNING)
		w->spawn_gen++;		/* its spawn's end is dropped */
	w->killed = 0;
	down(m, w, W_INACTIVE, reason);
}

void
registry_revive(struct master *m, struct worker *w)
{
	if (w->state != W_INACTIVE && w->state != W_DEAD)
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

/* W's host probe has ended with R: respawn W at the next cron, or fail
 * the respawn (node health takes it from there). */
static void
probed(void *arg, const struct child_result *r)
{
	struct worker *w = arg;
	struct master *m = lm;
	char what[CHILD_OUT_MAX + 64], why[CHILD_OUT_MAX + 160];

	w->probing = 0;
	if (m->stopping || !w->respawn_due ||
	    (w->state != W_DEAD && w->state != W_INACTIVE))
		return;
	if (r->started && r->exit == 0 && !r->timed_out && !r->signal) {
		w->probed = 1;
		master_kick(m);
		return;
	}
	child_describe(r, what, sizeof(what));
	snprintf(why, sizeof(why), "host %s does not answer: %s", w->host,
		 what);
	w->respawn_due = 0;
	w->spawn_gen++;
	worker_set(w, W_SPAWNING, NULL, &m->events);
	down(m, w, W_DEAD, why);
}

/* Must W's host answer a probe before W is spawned there again? */
static int
needs_probe(const struct master *m, const struct worker *w)
{
	return m->async_spawn && !w->probed &&
	       !ft_host_is_local(m->cfg.nodes[w->node].host);
}

static void
start_probe(struct master *m, struct worker *w)
{
	char *cmd = hosts_probe_cmd(m->worker_exe);
	char **argv = hosts_remote_argv(&m->cfg, m->cfg.nodes[w->node].host,
					cmd);

	w->probing = 1;
	child_start(m->loop, argv, m->cfg.dir, HOSTS_PROBE_BOUND, probed, w);
	hosts_argv_free(argv);
	free(cmd);
}

/* Spawn W again, on a spawner thread when there is one. */
static void
respawn(struct master *m, struct worker *w)
{
	struct spawn_args a;

	if (w->probing)
		return;
	if (needs_probe(m, w)) {
		start_probe(m, w);
		return;
	}
	w->probed = 0;
	if (!m->async_spawn) {
		spawn_now(m, w);
		return;
	}
	spawn_args(m, w, &a);
	if (spawn_async_start(&a, w->spawn_gen + 1) == -1)
		return;		/* try again at the next cron */
	w->spawn_gen++;
	w->pid = 0;
	worker_set(w, W_SPAWNING, NULL, &m->events);
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
	int slot;

	while (spawn_async_poll(&slot, &gen, &comm, err, sizeof(err)) == 1) {
		struct worker *w = &m->workers[slot];

		if (w->state != W_SPAWNING || gen != w->spawn_gen) {
			/* Given up on meanwhile: the new process, never
			 * welcomed, leaves by itself. */
			if (comm != MPI_COMM_NULL)
				MPI_Comm_free(&comm);
			continue;
		}
		if (comm == MPI_COMM_NULL)
			down(m, w, W_DEAD, err);
		else
			attach(m, w, comm, 0);
	}
}

/* ---- cron ---- */

/* Ping W in a heartbeat round, or every quarter heartbeat when it holds
 * the last tasks. */
static void
maybe_ping(struct master *m, struct worker *w, int round, double now)
{
	const struct link *l = &m->links.v[w->id];
	int last_tasks;

	if (l->ping != NULL || !worker_up(w) || !l->open)
		return;
	last_tasks = sched_queued(m->sched) == 0 &&
		     sched_inflight(m->sched, w->id) > 0;
	if (!round && !(last_tasks && now - l->last_ping >= m->cfg.heartbeat / 4))
		return;
	if (link_ping(&m->links, w->id, now) == -1)
		registry_fail(m, w, "MPI send failed");
}

/* Is a heartbeat round due?  All workers are pinged in the same round,
 * so that an idle master wakes once for the pings and once for their
 * deadlines, and their answers come in one burst. */
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
registry_next_round(const struct master *m)
{
	return m->ping_round;
}

/* Deadlines of W's start: its spawn, then its hello. */
static void
check_start(struct master *m, struct worker *w, double now)
{
	if (w->state == W_SPAWNING && m->async_spawn &&
	    now - w->since > spawn_timeout(m)) {
		/* Its end, if any, is dropped by collect_spawns. */
		w->spawn_gen++;
		w->spawn_hung = 1;
		down(m, w, W_DEAD, "MPI_Comm_spawn did not return in time");
	}
	/* A respawned worker is in MPI already when its spawn returns: it
	 * need not get the whole start timeout. */
	if (w->state == W_STARTING &&
	    now - w->since > (w->respawns ? spawn_timeout(m)
					  : m->cfg.start_timeout))
		registry_fail(m, w, "no hello from the new worker in time");
}

void
registry_cron(struct master *m, double now)
{
	int i, round = ping_round_due(m, now);

	if (m->async_spawn) {
		collect_spawns(m);
		start_more(m);
	}
	settle_parked(m, now);
	for (i = 0; i < m->nworkers; i++) {
		struct worker *w = &m->workers[i];

		check_start(m, w, now);
		if ((w->state == W_DEAD || w->state == W_INACTIVE) &&
		    !m->stopping && respawn_ready(w, now))
			respawn(m, w);
		maybe_ping(m, w, round, ft_now());
		update_state(m, w);
	}
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
	return 0;
}

int
registry_spawn_busy(const struct master *m)
{
	return m->async_spawn && spawn_async_busy();
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
	int i;

	for (i = 0; m->static_world && i < m->nworkers; i++)
		if (m->workers[i].state == W_DEAD ||
		    m->workers[i].state == W_INACTIVE)
			return 1;
	return 0;
}

static void
send_stop(struct master *m, struct worker *w)
{
	struct ft_buf msg = { 0 };

	/* A stopped (SIGSTOP) worker that was not killed can still leave
	 * cleanly once it runs again. */
	if (w->pid > 0 && ft_host_is_local(w->host) &&
	    ft_proc_is(w->pid, w->start))
		kill(w->pid, SIGCONT);
	proto_put_stop(&msg, registry_lost_ranks(m) ? FT_STOP_NO_FINALIZE : 0);
	send_msg(m, w, FT_MSG_STOP, &msg);
}

void
registry_stop_all(struct master *m)
{
	int i;

	for (i = 0; i < m->nworkers; i++) {
		struct worker *w = &m->workers[i];

		w->respawn_due = 0;
		if (w->lingering) {
			send_stop(m, w);
			continue;
		}
		if (!worker_live(w) || w->bye || !m->links.v[i].open)
			continue;
		sched_worker_pause(m->sched, w->id);
		send_stop(m, w);
		worker_set(w, W_STOPPING, "stop", &m->events);
	}
}

int
registry_all_stopped(const struct master *m)
{
	int i;

	for (i = 0; i < m->nworkers; i++)
		if (worker_live(&m->workers[i]) && !m->workers[i].bye)
			return 0;
	return 1;
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
}
