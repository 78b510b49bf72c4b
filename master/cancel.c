/* cancel: a batch cancelled by its operator (see batches.h).  It sits
 * above the rest of the batches module: it closes an open batch
 * (openb.c) and fails what batches.c holds of it. */
#include <stdio.h>

#include "batch_int.h"
#include "deps.h"
#include "log.h"

/* Why batch ID (B, or NULL when not in memory) cannot be cancelled. */
static const char *
not_cancellable(const struct batches *bs, const struct batch *b, long id)
{
	int finished = 0;
	json_t *row;

	if (b)
		return b->state == B_INTAKE ? "is still being read"
					    : "has finished";
	row = batches_lookup(bs, id, &finished);
	json_decref(row);
	return row ? "has finished" : "does not exist";
}

int
batches_cancel(struct batches *bs, long id, uint64_t *queued,
	       uint64_t *running, char *err, size_t n)
{
	struct batch *b = batches_find(bs, id);

	if (b && b->state == B_WAITING) {
		*queued = b->held->ntasks;
		*running = 0;
		batch_cancel_waiting(bs, b, "cancelled");
		return 0;
	}
	if (b == NULL || b->state != B_RUNNING) {
		snprintf(err, n, "batch %ld %s", id, not_cancellable(bs, b, id));
		return -1;
	}
	b->cancelled = 1;
	sched_fail_batch(bs->sched, (uint32_t)id, "cancelled", queued,
			 running);
	if (b->open)
		batch_seal(bs, b);
	if (b->deps) {
		*queued += deps_held(b->deps);
		deps_cancel(b->deps);
		batch_drain(bs, b);
	}
	if (b->gang && bs->ops.gang_cancel) {
		(*running)++;
		bs->ops.gang_cancel(bs->ops.ctx, (uint32_t)id);
	}
	ev_batch_cancelled(bs->ev, id, (long long)*queued,
			   (long long)*running);
	log_info("batch %ld (%s) cancelled: %llu queued tasks dropped, %llu "
		 "running killed", id, b->name, (unsigned long long)*queued,
		 (unsigned long long)*running);
	return 0;
}
