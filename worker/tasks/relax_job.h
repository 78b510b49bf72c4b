/*
 * relax_job: the master's side of a relax job (the ft_job_ops hooks).
 *
 * The job makes its own directory in the job's "dir" (relax-KEY, KEY a
 * random 64-bit hex id) and runs in rounds of min(checkpoint_every, 1000)
 * sweeps (fewer to end at itmax).  A round is a phase of one task per
 * block: each advances its block from the round's checkpoint (the initial
 * matrix for the first) and reports the eps of every sweep, exact to the
 * bit.  The global eps of a sweep is the largest over the blocks; the first
 * sweep s whose global eps is below maxeps, or itmax, ends the job:
 *
 *   - a round that reaches itmax writes the outputs instead of a
 *     checkpoint, so that a job that runs to itmax needs no extra phase;
 *   - when s ends a checkpointing round, a phase of output tasks with no
 *     sweeps turns that checkpoint into the outputs;
 *   - when s falls inside a round, a phase of output tasks redoes the
 *     round from its checkpoint up to s.
 *
 * Then the job (in the master, reading the small row-sum files) sums S in
 * row order, renames the matrix into place and writes the output JSON
 *   {"n": N, "sweeps": S, "eps": E, "S": SUM}
 * with eps and S printed with %.17g.  The matrix file is made by the job
 * under a temp name for each output phase (a late task of an abandoned
 * phase can only write into a file nobody will use).  The checkpoint a
 * round started from is not needed once the round has ended without a
 * stop: the next round's tasks rewrite its files into their own
 * checkpoints (or the last round's remove them), so that the master's
 * loop never frees big files between two rounds.  The job's directory is
 * removed at the end.
 */
#ifndef FT_RELAX_JOB_H
#define FT_RELAX_JOB_H

#include "plugin.h"

extern const struct ft_job_ops relax_job_ops;

#endif
