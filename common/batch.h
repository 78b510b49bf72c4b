/*
 * batch: what a submitted batch may contain.
 *
 *   {"name": "...", "tasks": [{"type": "exec", ...}, ...]}
 *   {"name": "...", "job": {"type": "wordcount", ...}}
 *
 * The CLI checks a batch file before sending it (so errors carry the file's
 * line:column) and the master checks again whatever a client sends.
 */
#ifndef FT_BATCH_H
#define FT_BATCH_H

#include <jansson.h>
#include <stdint.h>

#include "jcheck.h"
#include "plugins.h"

#define FT_BATCH_MAX_TASKS 10000000
/* A batch's "priority" and a task's "cpus" and "gpus" (any task type). */
#define FT_BATCH_PRIO_MIN (-128)
#define FT_BATCH_PRIO_MAX 127
#define FT_TASK_CPUS_MAX 256
#define FT_TASK_GPUS_MAX 64

/* The directory no job may write into (the cluster's state dir), for the
 * checks below; set once, before they run.  NULL: none. */
void ft_batch_protect(const char *dir);

/*
 * An open batch ({"open": true, "tasks": [...]}, its tasks may be none)
 * takes more tasks while it runs (the control requests add and close):
 * it ends once it is closed and every task has ended.
 */

/*
 * Dependencies.  A batch's "after": [IDS] runs once every task of those
 * batches has succeeded (else it is cancelled without running a task),
 * "after_any": [IDS] once they have ended, whatever their results.  A
 * task's "after": [INDEXES] runs once those tasks of its batch have
 * succeeded (else it fails without running); a cycle, or an index the
 * batch does not have, is refused (taskgraph.h).
 */

/* Is KEY one a batch's top level may have? */
int ft_batch_top_key(const char *key);
/* OBJ's member KEY (at PATH), when present, must be an array of integers
 * from LO to UINT32_MAX (ids, task indexes).  0, or -1 with ERR. */
int ft_check_ids(const json_t *obj, const char *path, const char *key,
		 long long lo, struct jerr *err);

/* Check BATCH against the task types in PL.  0, or -1 with ERR. */
int ft_batch_check(const json_t *batch, const struct ft_plugins *pl,
		   struct jerr *err);

/* Check BATCH but for its tasks, which are NTASKS: its keys, its job or
 * the size of its "tasks".  0, or -1 with ERR. */
int ft_batch_check_top(const json_t *batch, size_t ntasks,
		       const struct ft_plugins *pl, struct jerr *err);

/* Check one task at PATH: an object with a known "type", then whatever
 * its plugin requires.  (Its encoded size is checked by the master, which
 * encodes it anyway.)  The index of its type in PL, or -1 with ERR. */
int ft_batch_check_task(const json_t *task, const char *path,
			const struct ft_plugins *pl, struct jerr *err);

/* What a task asks of its node, beside its type's own keys. */
struct ft_need {
	int cpus;			/* "cpus": slots, default 1 */
	int gpus;			/* "gpus", default 0 */
	uint64_t mem;			/* "mem": bytes (memsize.h), 0: none
					 * asked */
	int files;			/* it names output files ("stdout",
					 * "stderr") */
	uint32_t time_request;		/* "time_request": seconds its node must
					 * have left (rounded up), 0: none */
};

/*
 * Every task may also carry "stdout" and "stderr", path patterns of the
 * files its outputs go to (outpath.h), when its type runs processes
 * whose outputs can go to files (FT_PLUGIN_OUTPUT_FILES).
 */

/* TASK's needs (checked) into NEED.  Returns 1 when it needs more than
 * one slot or a GPU. */
int ft_task_need(const json_t *task, struct ft_need *need);

/* ft_batch_check_task, which also gives the task's needs in NEED. */
int ft_batch_check_task_need(const json_t *task, const char *path,
			     const struct ft_plugins *pl, struct ft_need *need,
			     struct jerr *err);

/* The plugin planning BATCH if it is a job (checked), else NULL. */
const struct ft_plugin *ft_batch_job(const json_t *batch,
				     const struct ft_plugins *pl);

/* The batch's name ("batch" when it has none). */
const char *ft_batch_name(const json_t *batch);

#endif
