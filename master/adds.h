/*
 * adds: the journal of the tasks added to an open batch.
 *
 * An open batch (common/batch.h) takes tasks while it runs: each add
 * request brings {"tasks": [...]} as the batch's tasks FIRST on.  Its
 * record is one line of <batch dir>/tasks.jsonl, written before the tasks
 * are queued and acknowledged once it is as durable as the fsync policy
 * wants (store.h); closing the batch is a record too:
 *
 *   {"first":N,"add":{"tasks":[...]},"crc":"XXXXXXXX"}
 *   {"close":N,"crc":"XXXXXXXX"}          closed with N tasks in all
 *
 * The add's bytes are the client's, with their newlines made spaces
 * (adds_flatten: in JSON only whitespace can hold a raw newline), so each
 * task's spec is a span of the record as it was of the request, never
 * printed again.  A restarted master reads the records back in order
 * (adds_read); a record that is torn or fails its checksum ends what is
 * trusted, and the caller cuts the file there, as the results' journal
 * cuts a torn tail (journal.h).
 */
#ifndef FT_ADDS_H
#define FT_ADDS_H

#include <stddef.h>
#include <stdint.h>

#include "jsonl.h"

/* Make each newline of TEXT (LEN bytes of JSON) a space, in place: the
 * same value, on one line. */
void adds_flatten(char *text, size_t len);
/* Append to J the record of an add of tasks FIRST on, BODY (LEN bytes,
 * flattened, NUL-terminated). */
void adds_put(struct jsonl *j, uint32_t first, const char *body, size_t len);
/* Append to J the record that closes the batch with TOTAL tasks. */
void adds_put_close(struct jsonl *j, uint32_t total);

/* What adds_read hands its caller, record by record. */
struct adds_ops {
	void *ctx;
	/* An add of tasks FIRST on: TEXT (LEN bytes, malloc'd and
	 * NUL-terminated: taken over).  0, or -1 to stop reading there (the
	 * record is then not trusted). */
	int (*add)(void *ctx, uint32_t first, char *text, size_t len);
	/* The batch was closed with TOTAL tasks. */
	void (*close)(void *ctx, uint32_t total);
};

/* Read the records of PATH (a missing file has none) in order, handing
 * each to OPS.  *GOOD: the bytes of the trusted records at its start
 * (the file's size when all are); *SIZE: the file's size.  0, or -1 with
 * ERR when the file exists and cannot be read. */
int adds_read(const char *path, const struct adds_ops *ops, uint64_t *good,
	      uint64_t *size, char *err, size_t n);

#endif
