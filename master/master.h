/*
 * master: the state of ftfarm-master, shared by its modules.
 *
 * The modules in layers; each calls only modules below it and hears from
 * those above through the callbacks (ops) they registered, or through the
 * deferred queue:
 *
 *   main.c      the program: arguments, MPI, set-up, the run
 *   loop.c      the libev loop: adaptive MPI polling, cron, deferred work
 *   farm.c      the wiring of the parts below and the periodic work
 *   commands.c  the control commands and the status answer
 *   subs.c      subscriptions: events and status pushed to clients
 *   remote.c    control clients over TCP, authenticated by MUNGE
 *   mdecode.c   MUNGE credentials decoded on threads, off the loop
 *   control.c   the control socket and its clients
 *   http.c      the HTTP listener (/metrics, /status.json, the page),
 *               on its own thread, fed snapshots by the loop
 *   metrics.c   the Prometheus exposition of the master's figures
 *   health.c    node health: the ladder's decisions, blame, drain, reboot
 *   ladder.c    a node's reboot or probe, step by step
 *   blame.c     who is charged with a worker's death: its task or node
 *   bmc.c       each node's BMC through ipmitool (one command at a time)
 *   child.c     watched child processes (ipmitool, ready commands)
 *   registry.c  the workers (slots): messages, death, respawn, dispatch
 *   batches.c   batches: submission, results.jsonl, completion,
 *               batches after batches
 *   openb.c     open batches: their adds and their close
 *   retain.c    ended batches forgotten (retain_s, ftfarm forget)
 *   cancel.c    a batch cancelled by its operator
 *   replay.c    batches rebuilt from the state dir at a start
 *   deps.c      tasks that wait for others of their batch
 *   adds.c      the journal of an open batch's added tasks
 *   reaper.c    forgotten batches' directories removed off the loop
 *   journal.c   reading results.jsonl back after a restart
 *   opstate.c   the nodes' state (drains, the ladder) for the next master
 *   store.c     every write into the state dir: fencing, fsync, failures
 *   jobs.c      the phase engine of job batches
 *   gangs.c     gang tasks: their queue, attempts and results
 *   grun.c      one attempt of a gang task (spawn, watch, notices, stop)
 *   agents.c    the node agents: spawn or join, hello, pings, relay,
 *               death, leave
 *   link.c      each agent's connection, one interface; MPI behind it in
 *               link_mpi.c (timed requests), TCP in link_tcp.c (frames)
 *   join.c      a joining agent's connection until its JOIN is taken
 *   pidwatch.c  an agent process here seen to exit at once (pidfds)
 *   parked.c    "signal 9" results held a moment: lost if the worker dies
 *   spawn.c     starting agents (MPI_Comm_spawn, or a static world)
 *   worker.c    the state machine of a worker
 *   node.c      the state machine of a node
 *   sched.c     the scheduler (no MPI, no I/O); its queues in
 *               sched_queue.c, placement in sched_place.c, instances
 *               (rings, memory charged, starts) in sched_inst.c
 *   events.c    events.jsonl, one typed emitter per event
 *   stats.c     histograms and per-type task counts
 *   defer.c     work queued by a callback, run after it
 */
#ifndef FT_MASTER_H
#define FT_MASTER_H

#include <ev.h>
#include <jansson.h>
#include <stdint.h>

#include "agents.h"
#include "batches.h"
#include "config.h"
#include "defer.h"
#include "events.h"
#include "lease.h"
#include "link.h"
#include "node.h"
#include "pidwatch.h"
#include "plugins.h"
#include "sched.h"
#include "store.h"
#include "stats.h"
#include "treq.h"
#include "worker.h"

/* The counters of status --json and of /metrics, declared once:
 * X(name, metric, help); the metric is ftfarm_<metric>_total. */
#define FT_COUNTERS(X)							\
	X(msgs_in, "messages_received", "MPI messages received from workers") \
	X(msgs_out, "messages_sent", "MPI messages sent to workers")	\
	X(results_in, "results_received", "Task results received")	\
	X(duplicates, "duplicate_results", "Results dropped as duplicates") \
	X(bad_msgs, "bad_messages", "Unexpected or malformed messages") \
	X(exits_seen, "worker_exits_seen",				\
	  "Workers declared dead the moment their process exited")	\
	X(agents_starved, "agent_pings_spared",				\
	  "Late pongs of agents of this host that waited for a CPU")

struct counters {
#define FT_COUNTER_FIELD(name, metric, help) uint64_t name;
	FT_COUNTERS(FT_COUNTER_FIELD)
#undef FT_COUNTER_FIELD
};

struct master;
struct control;
struct remote;
struct subs;
struct http;
struct ft_buf;

/* What the control layer's upper modules lend the lower ones, set when
 * they are made (commands_init, subs_new), so that subs.c, http.c and
 * metrics.c never call up the layers above. */
struct master_up {
	/* The status answer's keys (commands.c: commands_status). */
	json_t *(*status)(struct master *m, int max_finished);
	/* The last N events as a JSON array's text (subs.c: subs_recent). */
	void (*recent)(const struct subs *s, int n, struct ft_buf *out);
	/* Subscribers now; events skipped for slow ones (subs.c). */
	int (*subscribers)(const struct subs *s);
	uint64_t (*dropped)(const struct subs *s);
};

struct master {
	struct ft_config cfg;
	struct ft_plugins plugins;
	char *worker_exe;
	int lock_fd;			/* the state dir's lock, held for life */
	struct lease lease;		/* the state dir's lease (lease.h) */
	unsigned long long epoch;	/* ours: we write while it is the lease's */
	const char *restart_reason;	/* why the supervisor restarted us */
	char mpi_version[160];
	int static_world;		/* launch == static */
	int can_kill;			/* may SIGKILL hung workers (not MPICH static) */
	int async_spawn;		/* respawns run on spawner threads */
	double started;			/* monotonic */
	double ping_round;		/* the next heartbeat round, monotonic */

	struct ev_loop *loop;
	struct treq_set treqs;
	struct defer defer;
	struct events events;
	struct sched *sched;
	struct worker *workers;		/* one per slot */
	int nworkers;
	int pass_next;			/* where an unfinished dispatch pass
					 * goes on (registry_pass_more), 0 */
	struct agent *agents;		/* one per node: its agent */
	int nagents;
	struct links links;		/* parallel to agents */
	struct pidwatches exits;	/* parallel to agents */
	struct node *nodes;		/* one per cfg.nodes */
	struct batches batches;
	struct store store;
	struct control *control;
	struct remote *remote;		/* control over TCP, or NULL */
	struct counters counters;
	struct stats stats;
	struct subs *subs;		/* the control socket's subscriptions */
	struct http *http;		/* the HTTP listener, or NULL */
	struct master_up up;		/* lent by the control layer's top */

	int lost_ranks;			/* static world: ranks died (no finalize) */
	int stopping;			/* 1: stopping workers, 2: leave the loop */
	char stop_reason[160];		/* why, set with stopping = 1 */
	double stop_deadline;
	/* Something was sent: poll MPI eagerly for a while (set by the
	 * loop; see master_kick). */
	void (*kick)(struct master *m);
};

/* M's counters now (those the links keep included). */
static inline struct counters
master_counters(const struct master *m)
{
	struct counters k = m->counters;

	k.msgs_in = m->links.msgs_in;
	k.msgs_out = m->links.msgs_out;
	return k;
}

static inline void
master_kick(struct master *m)
{
	if (m->kick)
		m->kick(m);
}

#endif
