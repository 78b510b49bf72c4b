/*
 * agent_mpi: the agent of a node the master started itself, over MPI
 * (ftfarm-worker: spawned by the master, or a rank of its static world).
 *
 * It polls MPI eagerly while messages flow and sleeps in growing naps
 * when idle, woken at once by any slot (doze.h), so an idle agent costs
 * almost no CPU.  A master silent for longer than the limit its welcome
 * gave is presumed dead: the agent then kills every slot and task it
 * started and exits.
 */
#ifndef FT_AGENT_MPI_H
#define FT_AGENT_MPI_H

#include <mpi.h>

/* agent_mpi_run's answer when the master said to leave without
 * MPI_Finalize. */
#define AGENT_NO_FINALIZE (-1)

struct agent_args {
	MPI_Comm comm;
	int rank;			/* the master's in COMM */
	int index;			/* this node's index (its HELLO's slot) */
	const char *node;		/* --node, or NULL: the welcome's */
	const char *state_dir;		/* --state-dir, or NULL */
};

/* Serve the master until told to stop.  Returns the process exit status,
 * or AGENT_NO_FINALIZE. */
int agent_mpi_run(const struct agent_args *args);

#endif
