/*
 * pipe_job: the pipeline job object, its checks and its data.
 *
 *   {"type": "pipeline", "width": 8, "height": 8, "bytes": L, "chunks": K,
 *    "routes": 2, "mode": "pipelined" | "store_forward",
 *    "input": PATH | "seed": S, "output": PATH, "step_delay_ms": 0}
 *
 * Sends the first L bytes of "input" (or L bytes of the stream "seed",
 * default 1, gang_data.h) from corner (0,0) to corner (W-1,H-1) and writes
 * what that corner received to "output".  Defaults: 8 x 8, 2 routes, 32
 * chunks (at most L), pipelined.  "timeout" (seconds) is the master's.
 */
#ifndef FT_PIPE_JOB_H
#define FT_PIPE_JOB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "jcheck.h"
#include "pipe_route.h"

#define PIPE_MAX_SIDE 64
#define PIPE_MAX_BYTES 2147483647LL
#define PIPE_MAX_CHUNKS 65535

struct pipe_params {
	struct pipe_grid grid;
	uint64_t bytes;
	int chunks;
	int store_forward;		/* "mode": "store_forward" */
	const char *input;		/* NULL: generated */
	const char *output;
	uint64_t seed;
};

int pipe_validate(const json_t *job, const char *path, struct jerr *err);
void pipe_params(const json_t *job, struct pipe_params *p);
/* The gang plugin's size hook. */
void pipe_size(const json_t *job, int *active, int *spares);
/* Bytes OFF..OFF+LEN of the L bytes to send into OUT.  0, or -1 with
 * ERR. */
int pipe_load(const struct pipe_params *p, uint64_t off, unsigned char *out,
	      size_t len, char *err, size_t n);

#endif
