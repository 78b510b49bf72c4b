/*
 * batchtext: a batch file's bytes, checked and cut into task specs.
 *
 * A batch of many tasks is read once: a light scan of the top-level object
 * finds each element of "tasks" as a span of the text, each span is parsed
 * and checked on its own (on several threads for big batches), and the
 * spans are the specs the workers get.  Nothing is printed again: the text
 * as written is batch.json and the bytes of every task.
 *
 * Errors are those of a batch file anywhere in ftfarm: one line
 * "FILE:LINE:COL: KEY: MESSAGE" (FILE: the name the caller gives).
 */
#ifndef FT_BATCHTEXT_H
#define FT_BATCHTEXT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "plugins.h"
#include "taskgraph.h"

/* One task's bytes in the text, its "timeout" (0: none given; float as
 * in the scheduler's task table), its type (the index of its plugin, -1
 * unknown), what it needs ("cpus", "gpus", "mem" in MiB rounded up,
 * "time_request" in seconds rounded up, 0 for none) and whether it names output files. */
struct bt_span {
	uint32_t off;
	uint32_t len;
	float timeout;
	int8_t kind;
	uint8_t gpus : 7;		/* at most FT_TASK_GPUS_MAX */
	uint8_t files : 1;
	uint16_t cpus;
	uint32_t mem;
	uint32_t treq;			/* "time_request", seconds, 0: none */
};

struct batch_text {
	char *text;			/* the batch's bytes (owned) */
	size_t len;
	char *name;			/* "name", or "batch" */
	json_t *job;			/* the "job" object, or NULL */
	int priority;			/* "priority", default 0 */
	int open;			/* "open": more tasks may come */
	json_t *after, *after_any;	/* the batches it runs after, or NULL */
	struct taskgraph graph;		/* its tasks' "after" (n 0: none) */
	uint32_t base;			/* its first task's index in its batch
					 * (an add's): set before the check */
	struct bt_span *spans;		/* the tasks, in order */
	size_t spans_mapped;		/* bytes of their own mapping, or 0 */
	uint32_t ntasks;
};

/* Take TEXT (LEN bytes, malloc'd: taken over, also on failure) as the
 * batch file FILE, check it against the task types of PL with up to
 * THREADS threads, and fill BT.  0, or -1 with ERR set and BT empty. */
int batch_text_read(struct batch_text *bt, const char *file, char *text,
		    size_t len, const struct ft_plugins *pl, int threads,
		    char *err, size_t n);
/* batch_text_read in two steps, for a batch read back from the state dir:
 * the scan (the top level, the spans), then the check of each task but
 * those whose bit is set in SKIP (NSKIP bits; their kind is left -1):
 * tasks already done need no second look.  Each: 0, or -1 with ERR set
 * and BT emptied. */
int batch_text_scan(struct batch_text *bt, const char *file, char *text,
		    size_t len, const struct ft_plugins *pl, char *err,
		    size_t n);
int batch_text_check(struct batch_text *bt, const char *file,
		     const struct ft_plugins *pl, int threads,
		     const uint8_t *skip, uint32_t nskip, char *err, size_t n);
/* Can some node of CFG give each task of BT the slots ("cpus"), GPUs
 * ("gpus") and memory ("mem") it asks?  A node without "mem" counts as
 * having what this host has (hostmem.h).  0, or -1 with ERR
 * ("FILE:LINE:COL: tasks[I].cpus: ...", the first task none can). */
struct ft_config;
int batch_text_fit(const struct batch_text *bt, const char *file,
		   const struct ft_config *cfg, char *err, size_t n);
/* The spec of task I (not NUL-terminated). */
static inline const char *
batch_text_spec(const struct batch_text *bt, uint32_t i, uint32_t *len)
{
	*len = bt->spans[i].len;
	return bt->text + bt->spans[i].off;
}
void batch_text_free(struct batch_text *bt);
/* Add the lists of DEPS ({"after": [IDS], "after_any": [IDS]}, checked,
 * or NULL: a request's own, beside the batch's) to BT's.  0, or -1 when
 * BT is a job's batch (a job does not wait: put it in a batch after). */
int batch_text_merge_after(struct batch_text *bt, const json_t *deps);
/* TASK (checked) without its "after" (a fan-in's list may make a task
 * too long to send; its worker does not read the list): 1 when that fits
 * in FT_SPEC_MAX, with *TEXT (when TEXT is not NULL) the compact JSON,
 * malloc'd; 0 when TASK has no "after" or is too long even so. */
int batch_text_strip(const json_t *task, char **text);

#endif
