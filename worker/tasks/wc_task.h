/*
 * wc_task: the three task modes of a wordcount job, run on workers.
 *
 *   {"type": "wordcount", "mode": "map", "dir": D, "shard": I,
 *    "start": S, "end": E, "file": F, "offset": O, "reducers": R,
 *    ["separators": HEX]}
 *	counts the words that start in global bytes [S, E) of the files
 *	listed in D/manifest (F: index of the first file of the shard, O: the
 *	byte offset of its line) and writes D/map-I.r for r in [0, R).
 *   {"type": "wordcount", "mode": "reduce", "dir": D, "part": P,
 *    "shards": N}
 *	adds up D/map-i.P for i in [0, N) into the sorted run D/run-P.
 *   {"type": "wordcount", "mode": "merge", "dir": D, "reducers": R,
 *    "output": OUT}
 *	merges D/run-r for r in [0, R) into OUT, "word\tcount\n" lines.
 *
 * Each writes its files atomically and prints a small JSON object of
 * numbers: {"words": N, "bytes": B, "distinct": D} for a map,
 * {"words": N, "distinct": D} for the others.
 */
#ifndef WC_TASK_H
#define WC_TASK_H

#include <stddef.h>
#include <stdint.h>

#include "plugin.h"

#define WC_MAX_REDUCERS 256
#define WC_MAX_SHARDS 65536
/* The file a job puts in its directory when it has succeeded, before it
 * removes its intermediate files: a late duplicate of a task (the master
 * runs duplicates of slow tasks; the first result wins) must not leave its
 * files behind, nor write the output again. */
#define WC_DONE "done"

/* Check a wordcount task object (any mode).  0 or -1 with ERR. */
int wc_task_validate(const json_t *task, const char *path, struct jerr *err);

int wc_map_run(const struct ft_task *task, struct ft_result *res);
/* The maps of the job whose directory is DIR are over (its reduce phase
 * has begun): let go of the table kept for its next map, if any. */
void wc_map_job_done(const char *dir);
int wc_reduce_run(const struct ft_task *task, struct ft_result *res);
int wc_merge_run(const struct ft_task *task, struct ft_result *res);

/* Fail RES: the whole message goes to its stderr, the reason keeps what
 * fits.  Returns 0 (what run() returns for a failed task). */
int wc_fail(struct ft_result *res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Succeed with stdout OUT (copied). */
int wc_ok(struct ft_result *res, const char *out);

/* Has the job whose directory is DIR ended (DIR/WC_DONE exists)? */
int wc_job_ended(const char *dir);

/* Write LEN bytes of DATA as DIR/NAME atomically for attempt ATTEMPT of a
 * task, unless the job has ended; a file written as it ended is removed
 * again (the job's cleanup makes its mark first, then removes files, so
 * one of the two sees the other).  0, or -1 with RES failed. */
int wc_task_write(struct ft_result *res, const char *dir, const char *name,
		  uint32_t attempt, const void *data, size_t len);

/* The path "DIR/NAME" for job files ("map-I.P", "run-P", "manifest"). */
char *wc_job_file(const char *dir, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
