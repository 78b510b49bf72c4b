/*
 * relax_block: one relax task on a worker, i.e. one block of rows advanced
 * by a few sweeps from a checkpoint.
 *
 * The task reads its block's rows after FROM sweeps plus a halo of SWEEPS
 * rows on each side (from the neighbours' checkpoint files; FROM == 0 is
 * the initial matrix, computed, not read), and sweeps the trapezoid: sweep
 * t recomputes the rows that are still exact after t sweeps, one fewer on
 * each side every time, so that after SWEEPS sweeps its own rows hold
 * exactly what a serial run holds.  Its eps of sweep t is the largest
 * change over its own rows.  Then it writes either its rows as the
 * checkpoint of FROM + SWEEPS, or the job's outputs: the verification sums
 * of its rows and, when asked, its rows of the final matrix.  A task may
 * also be told its block's checkpoint of the round before, which the job
 * no longer needs: a checkpointing task rewrites that file into its new
 * checkpoint (its pages exist: cheaper than new ones, and than freeing
 * them), an output task removes it.  Either way the cost is paid here, on
 * every worker at once, not in the master's loop between two rounds.
 *
 * The same spec always produces the same bytes, so a task may run twice, or
 * late, or die half-way: files appear whole or not at all, and the first
 * file to get a name keeps it (see relax_io.h).  A late attempt that finds
 * its input taken over or gone fails, and its result is not wanted.
 *
 * A worker keeps the last block it computed: when its next task is the
 * same block of the same job one round on, its own rows are not read back
 * from the checkpoint it just wrote (only the halo is).  A checkpointing
 * task that took an old checkpoint over maps that file and sweeps its
 * last sweep straight into it, with no copy into the page cache; the
 * worker keeps the file mapped, reads the rows there in the next round,
 * and finds the pages writable when the round after takes the file over
 * again.  A worker that gets no relax task for FTFARM_RELAX_KEEP_S
 * seconds (30) lets go of all it keeps, so that a job that ended or
 * failed while it was idle holds neither its memory nor, through a
 * mapping, the disk space of its removed files.
 */
#ifndef FT_RELAX_BLOCK_H
#define FT_RELAX_BLOCK_H

#include <stddef.h>

/* Most sweeps in one task: the halo is this deep at most, and the task's
 * stdout lists one eps per sweep. */
#define RELAX_ROUND_MAX 1000

/* What a relax task does (the task object, decoded). */
struct relax_spec {
	long n;			/* order of the matrix, boundary included */
	long blocks;		/* blocks the interior rows are cut into */
	long block;		/* this task's block */
	long from;		/* sweeps done in the checkpoint read */
	long sweeps;		/* sweeps to do, 0..RELAX_ROUND_MAX */
	const char *dir;	/* the job's directory */
	int output;		/* 1: write outputs; 0: write a checkpoint */
	const char *matrix;	/* output: existing file for the final rows */
	long drop;		/* > 0: the block's checkpoint of this many
				 * sweeps is not needed: reuse or remove it */
};

/* Where the time went. */
struct relax_stats {
	double read_s;		/* reading checkpoints or computing init */
	double compute_s;	/* sweeping */
	double write_s;		/* writing files */
	int cached;		/* the own rows were in memory already */
	double started, ended;	/* wall clock, around the whole task */
};

/* Run SPEC.  EPS receives SPEC->sweeps values (eps of each sweep over the
 * block's own rows).  0, or -1 with ERR (also when *CANCEL turns non-zero,
 * which is looked at between sweeps). */
int relax_block_run(const struct relax_spec *spec, const volatile int *cancel,
		    double *eps, struct relax_stats *st, char *err, size_t n);

#endif
