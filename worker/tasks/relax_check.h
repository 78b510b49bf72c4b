/*
 * relax_check: what a relax job and a relax task may say.
 *
 * A job (the batch's "job" object):
 *   {"type": "relax", "n": 4098, "itmax": 100, "maxeps": 1e-8,
 *    "blocks": 2, "checkpoint_every": 10, "dir": "/shared/relax",
 *    "output": "/shared/out.json", "matrix": "/shared/a.bin"}
 * n, itmax, blocks, dir and output are required; maxeps defaults to 1e-8
 * (the seed's 0.1e-7), checkpoint_every to 10; matrix is optional.  Paths
 * are absolute; dir must be a writable directory, output's and matrix's
 * directories writable (each is probed by creating and removing a file).
 *
 * A task (planned by the job; see relax_block.h for what it does):
 *   {"type": "relax", "n": N, "blocks": B, "block": b, "from": S,
 *    "sweeps": K, "dir": JOBDIR, "save": "checkpoint" | "output",
 *    "matrix": FILE, "drop": S}
 */
#ifndef FT_RELAX_CHECK_H
#define FT_RELAX_CHECK_H

#include <jansson.h>

#include "jcheck.h"
#include "relax_block.h"

#define RELAX_N_MAX 1000000L		/* order of the matrix */
#define RELAX_MAXEPS_DEFAULT 0.1e-7
#define RELAX_EVERY_DEFAULT 10

/* Check the job object JOB at PATH.  0, or -1 with ERR. */
int relax_check_job(const json_t *job, const char *path, struct jerr *err);
/* Check the task object TASK at PATH (no filesystem access).  0, or -1
 * with ERR. */
int relax_check_task(const json_t *task, const char *path, struct jerr *err);
/* Decode a checked TASK into SPEC (whose strings point into TASK). */
void relax_spec_get(const json_t *task, struct relax_spec *spec);

#endif
