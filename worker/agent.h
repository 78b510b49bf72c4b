/*
 * agent: the worker's thread that owns MPI.
 *
 * It says hello to the master, receives tasks, pings and cancels, hands
 * tasks to the runner and sends results back in batches, and answers every
 * ping at once even while a task runs.  It polls MPI eagerly while work
 * flows and sleeps on the runner in growing naps when idle, so an idle
 * worker costs almost no CPU.  A master silent for longer than the limit it
 * gave in its welcome is presumed dead: the worker then exits.
 */
#ifndef FT_AGENT_H
#define FT_AGENT_H

#include <mpi.h>

#include "plugins.h"

/* agent_run's answer when the master said to leave without MPI_Finalize. */
#define AGENT_NO_FINALIZE (-1)

/* Serve the master at RANK on COMM as worker SLOT until told to stop.
 * Returns the process exit status, or AGENT_NO_FINALIZE. */
int agent_run(MPI_Comm comm, int rank, int slot, const struct ft_plugins *pl);

#endif
