/*
 * batches: submitted batches and their results.
 *
 * A batch lives in <state_dir>/batches/<id>/: batch.json as submitted,
 * results.jsonl with one line per task (written once, when the task ends),
 * and summary.json when the batch has finished.  A job batch's tasks come
 * from its plugin, phase by phase (jobs.h).  The scheduler holds the
 * tasks; this module turns their outcomes into result lines and tells its
 * owner when tasks were queued and when a batch has finished.
 */
#ifndef FT_BATCHES_H
#define FT_BATCHES_H

#include <jansson.h>
#include <stdint.h>

#include "config.h"
#include "events.h"
#include "plugins.h"
#include "proto.h"
#include "sched.h"

struct batch;

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
	struct batch **v;		/* in id order, consecutive ids */
	int n;
};

void batches_init(struct batches *bs, const struct ft_config *cfg,
		  const struct ft_plugins *pl, struct sched *sched,
		  struct events *ev, const struct batches_ops *ops);
/* Accept BATCH (checked): files, tasks queued.  Its id, or -1 with ERR. */
long batches_submit(struct batches *bs, json_t *batch, char *err, size_t n);
/* Task TID ended with result R, run by WORKER. */
void batches_record(struct batches *bs, uint64_t tid, int worker,
		    const struct proto_result *r);
/* Task TID failed for good, for REASON (no worker result). */
void batches_fail(struct batches *bs, uint64_t tid, const char *reason);
/* The batch with id ID, or NULL. */
struct batch *batches_find(const struct batches *bs, long id);
/* Write pending result lines of unfinished batches. */
void batches_flush(struct batches *bs);
void batches_close(struct batches *bs);

long batch_id(const struct batch *b);
int batch_finished(const struct batch *b);
/* The batch's row of the status answer (a new reference). */
json_t *batch_json(const struct batch *b);

#endif
