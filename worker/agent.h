/*
 * agent: the node agent's MPI side, one process per node.
 *
 * It says hello to the master, starts, stops and kills the node's slots
 * as the master's RELAY says (slots.h does the local work), carries each
 * slot's messages both ways, bundling what its slots say into one RELAY
 * per pass, and answers the master's pings at once.  It polls MPI eagerly
 * while messages flow and sleeps in growing naps when idle, woken at once
 * by any slot (doze.h), so an idle agent costs almost no CPU.  A master
 * silent for longer than the limit its welcome gave is presumed dead: the
 * agent then kills every slot and task it started and exits.
 */
#ifndef FT_AGENT_H
#define FT_AGENT_H

#include <mpi.h>

/* agent_run's answer when the master said to leave without MPI_Finalize. */
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
int agent_run(const struct agent_args *args);

#endif
