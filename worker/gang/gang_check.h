/*
 * gang_check: checks shared by the gang job types' validate hooks.
 *
 * Like jcheck, each returns 0 or -1 with ERR naming the key
 * ("job.input") and the problem.  They may look at the files named (a
 * job's validate hook may), never change them.
 */
#ifndef FT_GANG_CHECK_H
#define FT_GANG_CHECK_H

#include <jansson.h>
#include <stdint.h>

#include "jcheck.h"

/* The string member KEY of JOB (at PATH), when present, is an absolute
 * path. */
int gcheck_abs(const json_t *job, const char *path, const char *key,
	       struct jerr *err);
/* ... and names a regular file of exactly SIZE bytes. */
int gcheck_input(const json_t *job, const char *path, const char *key,
		 uint64_t size, struct jerr *err);
/* ... of at least SIZE bytes. */
int gcheck_input_min(const json_t *job, const char *path, const char *key,
		     uint64_t size, struct jerr *err);
/* ... whose directory exists and is not itself a directory. */
int gcheck_output(const json_t *job, const char *path, const char *key,
		  struct jerr *err);
/* KEY_A and KEY_B are not both present. */
int gcheck_exclusive(const json_t *job, const char *path, const char *key_a,
		     const char *key_b, struct jerr *err);

#endif
