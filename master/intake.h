/*
 * intake: submitted batches read, checked and planned off the loop.
 *
 * A batch's bytes go to the intake thread, which writes batch.json into
 * a directory of its own (batches/new.N: journal.h), checks the batch
 * (batchtext.h, on two threads when it is big), then asks the loop for
 * its id (the loop checks the batches it runs after: its data) and
 * renames the directory to it, so that a batch refused uses no id.  For
 * a job it then plans the job's first phase (which may walk the job's
 * inputs on a slow filesystem; a job refused there gives its id back: it
 * was the last given), and makes results.jsonl, the mark of an accepted
 * batch.  The loop meanwhile keeps
 * serving heartbeats and clients; it only queues what the thread hands
 * back (an ev_async wakes it), in the order the batches were submitted.
 */
#ifndef FT_INTAKE_H
#define FT_INTAKE_H

#include <stddef.h>
#include <stdint.h>

#include "master.h"

/* What to do with a batch once it is read: its ID, or -1 with ERR and the
 * exit status the CLI gives for it (2: bad input, 1: the master could not
 * take it).  ARG is the caller's. */
typedef void (*intake_done_fn)(struct master *m, void *arg, long id,
			       const char *err, int status);

/* Start the intake thread.  0, or -1 with ERR. */
int intake_init(struct master *m, char *err, size_t n);
/* Stop it (batches not yet read are dropped, their callers told). */
void intake_free(struct master *m);
/* Read TEXT (LEN bytes, malloc'd: taken over) as batch file FILE, sent
 * with the submitter's TOKEN (or NULL) and DEPS (the request's "after"
 * and "after_any", checked, added to the batch's own; or NULL); then
 * DONE(m, ARG, ...) from the loop. */
void intake_submit(struct master *m, const char *file, char *text,
		   size_t len, const char *token, const json_t *deps,
		   intake_done_fn done, void *arg);
/* Batches handed in and not yet queued. */
int intake_pending(struct master *m);

#endif
