/*
 * gangs: gang tasks, MPI jobs of several ranks inside the farm.
 *
 * A batch whose job is a gang job ("ftallreduce", "pipeline": plugins in
 * bin/gangs/, worker/gang/README.md) is one gang task.  Its attempts run
 * one after another, each on fresh processes (grun.h: one MPI_Comm_spawn
 * of ranks + spares of ftfarm-gang); a failed attempt is run again until
 * the config's max_attempts, and the task ends once, with one result
 * (batches_gang_ended).  Gang tasks wait in a queue of their own and run
 * one at a time beside the workers, which are never touched: the normal
 * tasks go on while a gang runs.  The master stays outside the gang's
 * traffic; it is its failure detector (pings with deadlines, notices of
 * the dead).
 *
 * Dynamic launch only: a static world (MPICH) has no MPI_Comm_spawn, so
 * gang jobs are refused when the batch is checked.
 */
#ifndef FT_GANGS_H
#define FT_GANGS_H

#include <jansson.h>
#include <stdint.h>

#include "jcheck.h"

struct master;

/* What gangs tell their owner. */
struct gangs_ops {
	void *ctx;
	/* Task INDEX of batch BATCH ended (see batches_gang_ended). */
	void (*ended)(void *ctx, uint32_t batch, uint32_t index,
		      uint32_t attempt, int ok, double seconds, json_t *figures,
		      const char *reason);
};

/* Set up for M (the gang program and plugins beside the master) and make
 * M's plugins check gang jobs (ft_plugins.other_jobs). */
void gangs_init(struct master *m, const struct gangs_ops *o);
/* Queue gang task INDEX of batch BATCH, job JOB (checked; copied). */
void gangs_submit(struct master *m, uint32_t batch, uint32_t index,
		  const json_t *job);
/* End the gang tasks of BATCH as failed ("cancelled"). */
void gangs_cancel(struct master *m, uint32_t batch);
/* Move the gangs on: the running attempt, the next one. */
void gangs_cron(struct master *m, double now);
/* Any gang task queued or running? */
int gangs_busy(void);
/* The running gangs as status --json lists them under "gangs" (a new
 * array). */
json_t *gangs_status(void);
/* The master is leaving: kill every gang process.  Returns 1 if MPI may
 * not be finalized (a gang was running, or a spawn hangs). */
int gangs_leave(void);

#endif
