/*
 * agent: a node's agent, whatever carries its messages to the master.
 *
 * The agent says hello to the master, starts, stops and kills the node's
 * slots as the master's RELAY says (slots.h does the local work), carries
 * each slot's messages both ways, bundling what its slots say into one
 * RELAY per pass, and answers the master's pings at once.  A master
 * silent for longer than the limit its welcome gave is presumed dead.
 *
 * This is the part both kinds of agent share: the messages and what they
 * do.  How they travel is the wire's: MPI for the agent the master spawns
 * or starts in its world (agent_mpi.h, ftfarm-worker), a TCP connection
 * for the agent of a node that joins from anywhere (agent_tcp.h,
 * ftfarm-agent, started by `ftfarm join`).
 *
 * A joined node's agent may also leave (agent_leave): its slots start
 * nothing more and give back what waits; the tasks that run go on for a
 * grace, then get SIGTERM, so that their results say they were
 * interrupted, not failed; the master then says STOP.
 */
#ifndef FT_AGENT_H
#define FT_AGENT_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct slots;

/* How the agent's messages go out: SEND queues the message TAG, B (taken
 * over) to the master. */
struct agent_wire {
	void *ctx;
	void (*send)(void *ctx, int tag, struct ft_buf *b);
};

struct agent {
	struct agent_wire wire;
	struct slots *ss;
	int index;			/* this node's index (HELLO's slot) */
	const char *node;		/* --node, or NULL: the welcome's */
	const char *state_dir;		/* --state-dir, or NULL */
	struct ft_buf relay;		/* the RELAY being gathered */
	uint32_t nrelay;		/* its entries */
	double last_heard;		/* the master's last message */
	double master_timeout;		/* silence that means it is gone */
	double idle_nap;		/* longest nap when idle (the welcome's) */
	double stop_until;		/* the slots' time to stop, then reaping */
	int welcomed;
	int stopping;			/* the master said stop */
	int killed_all;			/* stopping: the slots left were killed */
	int no_finalize;		/* leave without MPI_Finalize */
	int leaving;			/* agent_leave: no new tasks */
	double term_at;			/* when the running tasks get SIGTERM */
	int termed;			/* ... they did */
};

/* Seconds to wait for the master's welcome. */
#define AGENT_HELLO_TIMEOUT 60.0

/* Set A up: slots of ftfarm-slot (beside this program), its messages out
 * through W.  0, or -1 with WHY. */
int agent_init(struct agent *a, const struct agent_wire *w, int index,
	       const char *node, const char *state_dir, char *why, size_t n);
/* Free what A holds (its slots must be gone: agent_stopped, or
 * slots_kill_everything). */
void agent_fini(struct agent *a);
/* Leave at once for WHY, with every slot and task this agent started:
 * nobody would collect their results, and the master may run their
 * tasks elsewhere already. */
void agent_die(const struct agent *a, const char *why)
	__attribute__((noreturn));

/* A message of TAG from the master (a malformed or unexpected one ends
 * the agent: agent_die).  Returns 1 for a ping (answered: no sign of
 * work to come), 2 for any other message. */
int agent_handle(struct agent *a, int tag, const void *p, size_t n);
/* Send the RELAY gathered so far.  Returns 1 if there was one. */
int agent_flush(struct agent *a);
/* The slots' and the leave's work due at NOW.  1 if anything happened. */
int agent_work(struct agent *a, double now);
/* When agent_work is due next without news. */
double agent_next(const struct agent *a);
/* Stopping: are the slots all gone, or given up on?  Past the stop's
 * time the slots left are killed, and reaped for a while. */
int agent_stopped(struct agent *a, double now);
/* Leave within GRACE seconds (see above); 0 once it has begun. */
void agent_leave(struct agent *a, double grace, double now);

#endif
