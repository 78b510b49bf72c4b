/*
 * ftar_job: the ftallreduce job object, its checks and its data.
 *
 *   {"type": "ftallreduce", "ranks": 8, "spares": 2, "length": N,
 *    "input": PATH | "seed": S, "output": PATH, "step_delay_ms": 0}
 *
 * "input": ranks x length little-endian doubles, rank-major (exactly that
 * size); without it, value j of rank i is double number i*length + j of
 * the stream "seed" (default 1, gang_data.h).  "output" receives the
 * length doubles of the sum.  "timeout" (seconds) is the master's.
 * "bench_rounds": R (default 0) timed fault-free rounds before the run, on
 * the same vectors, for benchmarks (their median and fastest time go in
 * the report; a death during them fails the job).
 */
#ifndef FT_FTAR_JOB_H
#define FT_FTAR_JOB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "jcheck.h"

#define FTAR_MAX_RANKS 1024
#define FTAR_MAX_LENGTH (1LL << 27)	/* doubles: 1 GiB per vector */

struct ftar_params {
	int ranks, spares;
	size_t length;
	const char *input;		/* NULL: generated */
	const char *output;
	uint64_t seed;
};

/* The job's validate hook. */
int ftar_validate(const json_t *job, const char *path, struct jerr *err);
/* Read the parameters of JOB (checked). */
void ftar_params(const json_t *job, struct ftar_params *p);

/* The vector of active rank I into OUT.  0, or -1 with ERR. */
int ftar_load_row(const struct ftar_params *p, int i, double *out,
		  char *err, size_t n);
/* node(0, B) of the summation tree (ftar_plan.h) into OUT, rebuilt from
 * the input.  0, or -1 with ERR. */
int ftar_load_leaf(const struct ftar_params *p, int b, double *out,
		   char *err, size_t n);
/* OUT = LO + HI elementwise, LO always the left operand; OUT may be LO
 * or HI. */
void ftar_add(const double *lo, const double *hi, double *out, size_t n);

#endif
