/*
 * batches: submitted batches and their results.
 *
 * A batch lives in <state_dir>/batches/<id>/: batch.json as submitted,
 * results.jsonl with one line per task (written once, when the task ends),
 * and summary.json when the batch has finished.  A job batch's tasks come
 * from its plugin, phase by phase (jobs.h).  The scheduler holds the
 * tasks; this module owns their specs (the batch's bytes, or each phase's
 * printed tasks) until the batch ends, turns the tasks' outcomes into
 * result lines, and tells its owner when tasks were queued and when a
 * batch has finished.
 *
 * A finished batch keeps only its counts in memory, and only the most
 * recent ones; older ones are read back from their summary.json when asked
 * for.  A batch id is reserved when its bytes arrive and the batch is
 * accepted (or the id released) once they have been read (intake.h).
 */
#ifndef FT_BATCHES_H
#define FT_BATCHES_H

#include <jansson.h>
#include <stdint.h>

#include "batchtext.h"
#include "config.h"
#include "events.h"
#include "plugins.h"
#include "proto.h"
#include "sched.h"
#include "stats.h"

struct batch;
struct job;

struct batches_ops {
	void *ctx;
	/* New tasks are in the scheduler's queue. */
	void (*queued)(void *ctx);
	/* Batch B has finished (every result line written). */
	void (*finished)(void *ctx, struct batch *b);
};

struct batches {
	const struct ft_config *cfg;
	const struct ft_plugins *pl;
	struct sched *sched;
	struct events *ev;
	struct batches_ops ops;
	struct batch **v;		/* ids first, first+1, ...; NULL: gone */
	long first;			/* the id of v[0] */
	int n, cap;
	long next;			/* the next id to hand out, 0: not known */
	int nfinished;			/* finished batches in memory */
	struct stats *stats;		/* counts by task type, or NULL */
};

void batches_init(struct batches *bs, const struct ft_config *cfg,
		  const struct ft_plugins *pl, struct sched *sched,
		  struct events *ev, const struct batches_ops *ops);
/* Reserve the next id for a batch being read; *DIR its directory (a new
 * string, not yet made). */
long batches_reserve(struct batches *bs, char **dir);
/* The batch reserved as ID was refused: forget it and its directory. */
void batches_release(struct batches *bs, long id);
/* Accept the batch reserved as ID: BT read and checked (taken over), with
 * its JOB and the job's first TASKS when it is a job batch (taken over on
 * success).  0, or -1 with ERR (BT still the caller's). */
int batches_accept(struct batches *bs, long id, struct batch_text *bt,
		   struct job *job, json_t *tasks, char *err, size_t n);
/* Reserve, read and accept BATCH (a checked object) in the caller: its id,
 * or -1 with ERR. */
long batches_submit(struct batches *bs, json_t *batch, char *err, size_t n);

/* Task TID ended with result R, run by WORKER. */
void batches_record(struct batches *bs, uint64_t tid, int worker,
		    const struct proto_result *r);
/* Task INDEX of batch BATCH failed for good after ATTEMPTS, for REASON. */
void batches_fail(struct batches *bs, uint32_t batch, uint32_t index,
		  uint32_t attempts, const char *reason);
/* An instance of task INDEX of batch BATCH was lost and queued again. */
void batches_reassigned(struct batches *bs, uint32_t batch);
/* The batch with id ID still in memory, or NULL. */
struct batch *batches_find(const struct batches *bs, long id);
/* The status row of batch ID, from memory or its summary.json (a new
 * reference), or NULL when there is no such finished batch. */
json_t *batches_lookup(const struct batches *bs, long id, int *finished);
/* Write pending result lines of unfinished batches. */
void batches_flush(struct batches *bs);
void batches_close(struct batches *bs);

long batch_id(const struct batch *b);
int batch_finished(const struct batch *b);
/* Its tasks in all so far, and those ended. */
uint32_t batch_total(const struct batch *b);
uint32_t batch_ended(const struct batch *b);
/* Accepted (not a reservation still being read)? */
int batch_listed(const struct batch *b);
/* The batch's row of the status answer (a new reference). */
json_t *batch_json(const struct batch *b);

#endif
