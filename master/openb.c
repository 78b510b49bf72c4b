/* openb: open batches, their adds and their close (see batches.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adds.h"
#include "batch.h"
#include "batch_int.h"
#include "journal.h"
#include "log.h"
#include "store.h"
#include "util.h"

/* Open B's tasks.jsonl for appending, if not yet.  0, or -1 with ERR. */
static int
open_adds(struct batch *b, char *err, size_t n)
{
	char *path;

	if (b->adds.fd >= 0)
		return 0;
	path = ft_asprintf("%s/tasks.jsonl", b->dir);
	if (jsonl_open(&b->adds, path, JSONL_CRC) == -1) {
		snprintf(err, n, "%s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	free(path);
	return 0;
}

/* Write B's add records now: its tasks go out only once they are. */
static void
write_adds(struct batches *bs, struct batch *b)
{
	char *path = ft_asprintf("%s/tasks.jsonl", b->dir);

	store_write(bs->store, &b->adds, path);
	free(path);
}

/* Keep TEXT (the specs of B's tasks FIRST .. FIRST + COUNT - 1, LEFT of
 * them still to end). */
static void
chunk_keep(struct batch *b, char *text, uint32_t first, uint32_t count,
	   uint32_t left)
{
	if (left == 0) {
		free(text);
		return;
	}
	if (b->nchunks == b->capchunks) {
		b->capchunks = b->capchunks ? 2 * b->capchunks : 16;
		b->chunks = ft_realloc(b->chunks, (size_t)b->capchunks *
				       sizeof(*b->chunks));
	}
	b->chunks[b->nchunks++] = (struct chunk){ text, first, count, left };
}

/* The open batch ID, or NULL with ERR. */
static struct batch *
open_batch(struct batches *bs, long id, char *err, size_t n)
{
	struct batch *b = batches_find(bs, id);
	int finished = 0;
	json_t *row;

	if (b && b->state == B_RUNNING && b->open)
		return b;
	if (b && b->state == B_RUNNING) {
		snprintf(err, n, "batch %ld is not open: its tasks were all "
			 "given at submit (\"open\": true takes more)", id);
	} else if (b && b->state == B_INTAKE) {
		snprintf(err, n, "batch %ld is still being read", id);
	} else if (b && b->state == B_WAITING) {
		snprintf(err, n, "batch %ld waits for the batches it runs "
			 "after: tasks are added once it runs", id);
	} else if (b) {
		snprintf(err, n, "batch %ld is closed: it has ended", id);
	} else {
		row = batches_lookup(bs, id, &finished);
		snprintf(err, n, row ? "batch %ld is closed: it has ended"
				     : "no batch %ld", id);
		json_decref(row);
	}
	return NULL;
}

/* Queue the tasks of BT (an add of B, checked) but those DONE has
 * (NULL: none), keeping its text. */
void
batch_queue_add(struct batches *bs, struct batch *b, struct batch_text *bt,
	  const struct journal_results *done)
{
	uint32_t first = b->total, left = bt->ntasks, i;

	for (i = 0; done && i < bt->ntasks; i++)
		left -= (uint32_t)journal_done(done, first + i);
	batch_queue_text(bs, b, bt, done);
	chunk_keep(b, bt->text, first, bt->ntasks, left);
	bt->text = NULL;
}

int
batches_add(struct batches *bs, long id, uint32_t first, char *text,
	    size_t len, struct batches_added *out, char *err, size_t n)
{
	struct batch *b = open_batch(bs, id, err, n);
	struct batch_text bt;

	memset(out, 0, sizeof(*out));
	out->status = 2;
	if (b == NULL) {
		free(text);
		return -1;
	}
	adds_flatten(text, len);
	if (batch_text_scan(&bt, "add", text, len, bs->pl, err, n) == -1)
		return -1;
	bt.base = first;		/* its tasks wait for earlier ones only */
	if (batch_text_check(&bt, "add", bs->pl, 1, NULL, 0, err, n) == -1)
		return -1;
	if (bt.job || bt.open || bt.after || bt.after_any ||
	    batch_text_fit(&bt, "add", bs->cfg, err, n) == -1) {
		if (bt.job || bt.open || bt.after || bt.after_any)
			snprintf(err, n, "add: only \"tasks\" may be added "
				 "to a batch");
		batch_text_free(&bt);
		return -1;
	}
	out->total = b->total;
	if ((uint64_t)first + bt.ntasks <= b->total) {
		batch_text_free(&bt);	/* a resend of tasks it has */
		out->lines = b->records;
		return 0;
	}
	if (first != b->total) {
		snprintf(err, n, "add: batch %ld has %u tasks; tasks come in "
			 "order, so this add of tasks %u.. must start at %u",
			 id, b->total, first, b->total);
		batch_text_free(&bt);
		return -1;
	}
	if (bt.ntasks > FT_BATCH_MAX_TASKS - b->total) {
		snprintf(err, n, "add: batch %ld would pass %d tasks", id,
			 FT_BATCH_MAX_TASKS);
		batch_text_free(&bt);
		return -1;
	}
	out->status = 1;
	if (open_adds(b, err, n) == -1) {
		batch_text_free(&bt);
		return -1;
	}
	adds_put(&b->adds, first, bt.text, bt.len);
	write_adds(bs, b);
	out->added = bt.ntasks;
	batch_queue_add(bs, b, &bt, NULL);
	batch_text_free(&bt);
	/* Its tasks after a task that failed already fail now, not at the
	 * next task's end (there may be none). */
	if (b->deps)
		batch_drain(bs, b);
	out->total = b->total;
	out->lines = ++b->records;
	b->touched = ft_now();
	log_debug("batch %ld: %u tasks added (%u in all)", id, out->added,
		  b->total);
	bs->ops.queued(bs->ops.ctx);
	return 0;
}

int
batches_add_done(const struct batches *bs, long id, uint64_t lines)
{
	struct batch *b = batches_find(bs, id);

	if (b == NULL || b->state != B_RUNNING || b->adds.fd < 0)
		return 1;	/* ended: nothing more to wait for */
	return store_done_lines(bs->store, &b->adds) >= lines;
}

/* Close B: no more tasks; it ends once they have.  The record goes to
 * its tasks.jsonl (written now, or with the next flush on a failing
 * disk). */
void
batch_seal(struct batches *bs, struct batch *b)
{
	char err[256];

	b->open = 0;
	if (open_adds(b, err, sizeof(err)) == -1) {
		log_warnx("batch %ld: %s: its close is not recorded", b->id,
			  err);
	} else {
		adds_put_close(&b->adds, b->total);
		b->records++;
		write_adds(bs, b);
	}
	log_info("batch %ld (%s) closed with %u tasks", b->id, b->name,
		 b->total);
	if (b->ok + b->failed == b->total)
		batch_ending(bs, b);
}

int
batches_seal(struct batches *bs, long id, uint32_t *total, char *err,
	     size_t n)
{
	struct batch *b = open_batch(bs, id, err, n);

	if (b == NULL)
		return -1;
	*total = b->total;
	batch_seal(bs, b);
	return 0;
}

void
batches_watch(struct batches *bs, long id, int delta)
{
	struct batch *b = batches_find(bs, id);

	if (b == NULL)
		return;
	b->watchers += delta;
	if (b->watchers < 0)
		b->watchers = 0;
	b->touched = ft_now();
}

uint64_t
batches_results_done(const struct batches *bs, long id, int *over)
{
	struct batch *b = batches_find(bs, id);

	*over = b == NULL || batch_finished(b);
	if (b == NULL || b->state == B_FINISHED || b->state == B_INTAKE ||
	    b->out.fd < 0)
		return b && b->state == B_INTAKE ? 0 : UINT64_MAX;
	return store_done_bytes(bs->store, &b->out);
}

void
batches_flush_eager(struct batches *bs)
{
	int i, n = bs->neager;

	if (n == 0)
		return;
	bs->neager = 0;
	for (i = 0; i < n; i++) {
		struct batch *b = batches_find(bs, bs->eager[i]);

		if (b == NULL)
			continue;
		b->eager = 0;
		batch_settle(bs, b);
	}
}

void
batches_open_tick(struct batches *bs, double now)
{
	long id, last = bs->first + bs->n;
	double idle = bs->cfg->open_idle;

	for (id = bs->first; id < last; id++) {
		struct batch *b = batches_find(bs, id);

		if (b == NULL || b->state != B_RUNNING || !b->open)
			continue;
		if (b->watchers > 0)
			b->touched = now;
		else if (now - b->touched >= idle) {
			log_info("batch %ld (%s): open, untouched for %.0f s "
				 "(open_idle_s): closed", id, b->name, idle);
			batch_seal(bs, b);
		}
	}
}

