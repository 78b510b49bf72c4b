/*
 * spawn: starting node agents (ftfarm-worker, one MPI process per node).
 *
 * Dynamic launch spawns each node's agent with its own MPI_Comm_spawn, so
 * that each has its own intercommunicator and a dead agent breaks only
 * that one.  Static launch finds the agents already running as ranks 1..N
 * of MPI_COMM_WORLD (for MPIs that cannot spawn, such as Debian 12's
 * MPICH).  The agents start the slots themselves (agents.h).
 *
 * A spawn either runs in the caller (spawn_one) or, when MPI allows
 * threads (MPI_THREAD_MULTIPLE), on a thread of its own (spawn_async_*):
 * under a stream of kills Open MPI's spawn has been seen to hang in PMIx
 * until its 300 s timeout, and on a thread that costs one node, not the
 * loop that serves every other worker.  Nothing here knows the registry:
 * what a spawn produced is handed back by node index.
 */
#ifndef FT_SPAWN_H
#define FT_SPAWN_H

#include <mpi.h>
#include <stddef.h>

/* What an agent process is started with. */
struct spawn_args {
	const char *exe;		/* the ftfarm-worker program */
	const char *host;		/* MPI's "host" info */
	int add_host;			/* ... given as "add-host": the host is
					 * not in mpirun's hostfile */
	int node_index;			/* its node (argv: --node-index) */
	const char *node;		/* its node's name (argv: --node) */
	const char *state_dir;		/* the cluster's (argv: --state-dir) */
};

/* The MPI library's version (its first line) into VERSION; 1 if it can
 * spawn processes, else 0. */
int spawn_probe(char *version, size_t n);
/* Spawn a worker as A says.  0 with *COMM its intercommunicator, or -1
 * with ERR. */
int spawn_one(const struct spawn_args *a, MPI_Comm *comm, char *err,
	      size_t n);
/* Static launch: does the world hold 1 master + NAGENTS agents?  0, or
 * -1 with ERR. */
int spawn_static_check(int nagents, char *err, size_t n);

/* Spawning on threads: is any spawn under way; start one as A says (GEN
 * is handed back with it): 0, or -1 (spawn in the loop instead, or try
 * later); take a finished one: 1 with its node index *ID, *GEN and *COMM (or
 * MPI_COMM_NULL with ERR), 0 if none has finished. */
int spawn_async_busy(void);
int spawn_async_start(const struct spawn_args *a, unsigned gen);
int spawn_async_poll(int *id, unsigned *gen, MPI_Comm *comm, char *err,
		     size_t n);

#endif
