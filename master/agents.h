/*
 * agents: the node agents as the master sees them, one per node.
 *
 * A node's agent (ftfarm-worker, its one MPI process) starts, watches and
 * stops the node's worker slots (ftfarm-slot processes) and carries their
 * messages both ways in RELAY bundles (proto.h).  Here each agent has a
 * link (link.h: a standing receive, a ping every heartbeat round, timed
 * sends) and, on this machine, a pidwatch.  In dynamic launch an agent is
 * spawned when a slot of its node is to start and none runs; in static
 * launch it is rank node + 1 of the world and is never replaced.
 *
 *   NONE --want--> SPAWNING --spawned--> STARTING --hello--> UP --stop--> STOPPING --bye--> STOPPED
 *   (SPAWNING, STARTING, UP, STOPPING) --fail--> DEAD --want--> SPAWNING ...
 *
 * An agent that fails is killed (when the master can), its link closed;
 * its hello, its death and its slots' messages go up through the ops.
 * Nothing here knows workers or tasks.
 *
 * The agent of a node that joined over TCP (agents_joined) is never
 * spawned nor killed by the master: its JOIN is its hello, its death is
 * its connection's (or its pings'), and it comes back only by joining
 * again, as a new incarnation.  It may leave: asked to (agents_leave),
 * or by itself (its allocation ends); it says bye once told to stop,
 * and the node has left (ops.left).
 */
#ifndef FT_AGENTS_H
#define FT_AGENTS_H

#include <stdint.h>
#include <sys/types.h>

#include "proto.h"
#include "util.h"

struct master;

enum astate {
	A_NONE = 0,			/* never started */
	A_SPAWNING,			/* its spawn runs */
	A_STARTING,			/* its process is there, no hello yet */
	A_UP,
	A_STOPPING,			/* told to stop, no bye yet */
	A_STOPPED,			/* said bye */
	A_DEAD,				/* failed, or its spawn did */
	A_NSTATES
};

struct agent {
	int node;			/* index in cfg.nodes */
	enum astate state;
	double since;			/* when it entered its state (monotonic) */
	pid_t pid;			/* its process, 0 while unknown */
	unsigned long long start;	/* the process's start time */
	char host[64];			/* where it runs (its hello's) */
	uint64_t mem;			/* its node's memory (its hello's) */
	unsigned gen;			/* which spawn is the current one */
	int respawns;			/* times started after the first */
	int wanted;			/* a slot waits for it to be up */
	double spawn_at;		/* not spawned again before this */
	pid_t old_pid;			/* the process it replaces, here */
	int probing;			/* a probe of its host runs */
	int probed;			/* its host answered: spawn now */
	int killed;			/* its last death killed its process */
	double power_wait;		/* not spawned before its node's power
					 * is known, or this time (0: none) */
	double last_heard;		/* monotonic */
	int starved;			/* pings in a row spared (STARVED_MAX) */
	unsigned long long sched_ns;	/* its main thread's run and wait
					 * time at its last spared miss */
	struct ft_buf relay;		/* the RELAY being gathered */
	uint32_t nrelay;		/* its entries */
	/* A joined node's (TCP): */
	int tcp;			/* its agent joins over TCP */
	int incarnation;		/* joins so far */
	char alloc[32];			/* its Slurm job, "" for none */
	double alloc_end;		/* when that ends (epoch), 0: unknown */
	int leaving;			/* it leaves: no new task */
};

/* What a joined node's agent said in its JOIN (proto.h), decoded. */
struct agent_join {
	const char *name;
	const char *host;
	int slots;
	char **gpus;			/* NULL-terminated ids */
	int ngpus;
	pid_t pid;
	unsigned long long start;
	const char *alloc;		/* "" for none */
	double alloc_end;
	uint64_t mem;			/* its host's memory for tasks */
};

struct agents_ops {
	void *ctx;
	/* NODE's agent said hello: its slots may start. */
	void (*up)(void *ctx, int node);
	/* NODE's agent is gone for REASON: it died, hung (HUNG: its process
	 * was still there), or it could not be started. */
	void (*down)(void *ctx, int node, const char *reason, int hung);
	/* An entry of a RELAY from NODE's agent: a message of one of its
	 * slots. */
	void (*relay)(void *ctx, int node, const struct proto_relay *r);
	/* NODE's (joined) agent leaves by itself for WHY: no new task. */
	void (*leaving)(void *ctx, int node, const char *why);
	/* NODE's (joined) agent said bye: the node has left. */
	void (*left)(void *ctx, int node);
};

/* Set up an agent and a link per node of M's config (all NONE). */
void agents_init(struct master *m, const struct agents_ops *ops);
/* Nodes joined: an agent and a link for each node of M's config from
 * m->nagents on (NONE, joined over TCP). */
void agents_grow(struct master *m);
/* NODE's agent joined over TCP as J, on FD (taken over; the N bytes at
 * REST came after its JOIN): welcome it (its JOIN is its hello).  An
 * incarnation of it still live is failed first ("joined again").  0, or
 * -1 (FD closed). */
int agents_joined(struct master *m, int node, const struct agent_join *j,
		  int fd, const void *rest, size_t n);
/* Ask NODE's (joined) agent to leave: its running tasks go on for GRACE
 * seconds, then are interrupted.  0, or -1 when it is not up. */
int agents_leave(struct master *m, int node, double grace);
/* Tell NODE's agent to stop its slots and itself (a joined node that has
 * left: nothing of it runs any more). */
void agents_stop(struct master *m, int node);
/* NODE's place (a joined node that left) goes to another node: its
 * agent is new (NONE, nothing counted). */
void agents_renamed(struct master *m, int node);
/* Is NODE's agent one that joined over TCP? */
int agents_is_tcp(const struct master *m, int node);
void agents_free(struct master *m);
/* Static launch: find the agents among the world's ranks.  0, or -1 with
 * ERR.  (Dynamic launch spawns them when slots want them.) */
int agents_start(struct master *m, char *err, size_t n);

/* A slot of NODE is to start: 1 if NODE's agent is up (send it SPAWN),
 * 0 if it will be (ops.up says when; its spawn is asked for now), -1 if
 * it never will (static launch, its rank is gone). */
int agents_want(struct master *m, int node);
/* No slot of NODE waits for its agent any more (they were retired): a
 * spawn not begun yet is not made.  Nothing changes for an agent already
 * spawning, starting or up. */
void agents_unwant(struct master *m, int node);
/* Is NODE's agent up? */
int agents_is_up(const struct master *m, int node);
/* Send NODE's agent the message TAG, PAYLOAD (taken over) for SLOT of
 * generation GEN, in a RELAY.  Entries for one agent are gathered in one
 * RELAY until agents_flush (or until it is full, or another message goes
 * to the agent), in order.  0, or -1 when the agent cannot take it (not
 * up; or MPI refused: the agent is then failed after the current
 * callback). */
int agents_relay(struct master *m, int node, uint32_t slot, uint32_t gen,
		 int tag, struct ft_buf *payload);
/* Send every RELAY gathered: before the loop sleeps or polls MPI again. */
void agents_flush(struct master *m);
/* Hold the spawn of NODE's agent until agents_power_known(NODE), or for
 * SECONDS at most: a spawn onto a node that is off hangs, and Open MPI's
 * spawns wait for one another. */
void agents_hold_for_power(struct master *m, int node, double seconds);
void agents_power_known(struct master *m, int node);
/* NODE's agent failed for REASON: kill it, close its link, tell ops. */
void agents_fail(struct master *m, int node, const char *reason);

/* Periodic work: finished spawns, start deadlines, wanted spawns, the
 * heartbeat round's pings. */
void agents_cron(struct master *m, double now);
/* When the next heartbeat round pings the agents (monotonic). */
double agents_next_round(const struct master *m);
/* Is an agent being started or waited for? */
int agents_starting(const struct master *m);
/* Is an MPI_Comm_spawn under way on a spawner thread? */
int agents_spawn_busy(const struct master *m);

/* Shutdown: tell every agent to stop its slots and itself (FLAGS:
 * FT_STOP_*); have they all said bye; fail the rest. */
void agents_stop_all(struct master *m, uint32_t flags);
int agents_all_stopped(const struct master *m);
void agents_kill_leftovers(struct master *m);
/* Static launch: has a rank of the world died? */
int agents_lost_ranks(const struct master *m);

const char *agents_state_name(enum astate s);

#endif
