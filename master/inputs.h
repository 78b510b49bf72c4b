/*
 * inputs: the values a task is given from the tasks it runs after.
 *
 * A python task with "after_values": true (worker/tasks/python.c) is
 * sent, once the tasks of its "after" have succeeded, with their values
 * in its spec: "inputs": [VALUE, ...] in the order of its "after" (each
 * the "value" of that task's result line, or null), or, when that would
 * make the spec longer than FT_SPEC_MAX, "inputs_file": PATH of a file in
 * the batch's directory holding that array.  The values are never kept in
 * memory: the batch keeps where each of its result lines starts in
 * results.jsonl (8 bytes a task, with its outcome), and the value is read
 * back from there (or from the lines not yet written) when a waiter is
 * released.  A batch replayed by a restarted master learns where its old
 * lines are from one scan of its file, the first time it needs one.
 *
 * So Python's futures passed as arguments (python/ftfarm/executor.py) run
 * in the cluster after the call they name, with its value, without a
 * round trip through the client.  No I/O but the batch's own results file
 * and inputs files; no MPI.
 */
#ifndef FT_INPUTS_H
#define FT_INPUTS_H

#include <stddef.h>
#include <stdint.h>

struct batch;
struct inputs;

/* Does batch B keep where its lines are (an open batch, or one whose
 * tasks wait for others)? */
int inputs_wanted(const struct batch *b);
/* B's result line for task INDEX (OK or not) is about to be begun in its
 * results file: remember where. */
void inputs_line(struct batch *b, uint32_t index, int ok);
/* Has task INDEX of B ended as far as its result lines tell?  1 (*OK its
 * outcome), 0 not, or -1 when they cannot be read (ERR). */
int inputs_ended(struct batch *b, uint32_t index, int *ok, char *err,
		 size_t n);
/* The spec to send for task INDEX of B, whose spec is SPEC (*LEN bytes):
 * SPEC itself when it wants no values, else a new text (kept by B until
 * the task ends: inputs_done) with its "inputs" or "inputs_file", *LEN
 * its length.  When the values cannot be read or written, the task gets
 * "inputs_error": why, and fails in its slot. */
const char *inputs_spec(struct batch *b, uint32_t index, const char *spec,
			uint32_t *len);
/* Task INDEX of B ended: the spec made for it goes. */
void inputs_done(struct batch *b, uint32_t index);
/* Free what B keeps here. */
void inputs_free(struct batch *b);

#endif
