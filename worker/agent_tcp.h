/*
 * agent_tcp: the agent of a node that joins a running master over TCP
 * (ftfarm-agent, started by `ftfarm join` on any host: srun inside an
 * allocation, ssh, or by hand).
 *
 * It connects to the address the master published in its state dir,
 * greets as an agent with a MUNGE credential of the cluster's owner
 * (rdial.h), says JOIN (its name, slots, GPUs, Slurm job and the job's
 * end) and then serves as an MPI node's agent does, its messages in
 * frames (frame.h).  It sleeps in poll(2) on its connection, its slots
 * and its signals: an idle agent costs nothing.
 *
 * The connection lost (the master killed or restarted, a standby taking
 * over, the network cut for longer than the master waits): every slot and
 * task it started is killed (the master has given their tasks to others)
 * and it joins again, as a new incarnation, for as long as
 * --reconnect-timeout allows.  STOP ends it (exit 0); so does the end of
 * a leave.  SIGTERM (its allocation ends) or SIGINT: it tells the master
 * it leaves, its tasks are interrupted and given back, then it exits.
 * A refusal (the master's reason) ends it with exit 2.
 */
#ifndef FT_AGENT_TCP_H
#define FT_AGENT_TCP_H

#include "config.h"

struct agent_tcp_args {
	const struct ft_config *cfg;	/* the cluster's config */
	const char *name;		/* the node's name */
	int slots;			/* its worker slots */
	const char *gpus;		/* its GPU ids, comma-separated, or "" */
	const char *alloc;		/* its Slurm job id, or "" */
	double alloc_end;		/* when it leaves by itself (epoch): its
					 * job's end less a reserve, or its
					 * --time-limit; 0: never */
	double reconnect;		/* seconds to keep trying to join */
};

/* Join and serve until stopped.  The process's exit status. */
int agent_tcp_run(const struct agent_tcp_args *args);

#endif
