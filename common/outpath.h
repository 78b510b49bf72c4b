/*
 * outpath: the files a task's standard output and error go to.
 *
 * A task's "stdout" and "stderr" (and the config's "task_stdout",
 * "task_stderr", `submit --stdout/--stderr`) are path patterns:
 *
 *   %b  the batch id        %t  the task's index in its batch
 *   %a  the attempt (1, 2, ...)   %n  the name of the node it runs on
 *   %%  a %
 *
 * Each attempt writes a file of its own: a pattern without %a gives
 * attempt 1 the path itself and attempt N > 1 the path with ".N" after
 * it, so that a retried task never writes into the file of the attempt
 * before it (which may still be running: a straggler's copy, a node cut
 * off).
 */
#ifndef FT_OUTPATH_H
#define FT_OUTPATH_H

#include <stddef.h>
#include <stdint.h>

/* The longest pattern, and the longest path one gives. */
#define OUTPATH_MAX 4096

/* Is PATTERN one?  0, or -1 with WHY ("%x" is no placeholder, empty,
 * too long). */
int outpath_check(const char *pattern, char *why, size_t n);
/* PATTERN for task INDEX of batch BATCH, attempt ATTEMPT on node NODE
 * (NLEN bytes), into OUT (OUTPATH_MAX bytes).  0, or -1 when it is too
 * long. */
int outpath_expand(const char *pattern, uint32_t batch, uint32_t index,
		   uint32_t attempt, const char *node, size_t nlen, char *out);

#endif
