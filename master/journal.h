/*
 * journal: what a restarted master reads back from the state dir.
 *
 * The journal is the batches' own files, nothing beside them:
 *
 *   batches/<id>/batch.json     the submission, written (and synced, when
 *                               the policy syncs) before the id is given
 *   batches/<id>/results.jsonl  created when the batch is accepted; then
 *                               one checksummed line per ended task (the
 *                               completion record)
 *   batches/<id>/summary.json   once every line is on disk: the batch is
 *                               finished and is not read again
 *
 * So a batch directory without results.jsonl was never accepted, one
 * without summary.json is replayed: its tasks with a trusted line are
 * done, the others run again.  A line is trusted when it is complete (ends
 * with a newline), its checksum matches and its task is new and in range;
 * anything else (a torn tail after a crash, a flipped byte, a duplicate)
 * is cut out: the file is rewritten with the trusted lines only, the cut
 * bytes are kept in results.jsonl.damaged, and each cut is reported.
 *
 * Reading is one pass over the mapped file, checksums by the CPU's CRC
 * instruction, no JSON parser for a batch of plain tasks: a million lines
 * take a fraction of a second.
 */
#ifndef FT_JOURNAL_H
#define FT_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

/* A line cut out, at OFFSET of the file, BYTES long, for REASON. */
struct journal_cut {
	uint64_t offset, bytes;
	const char *reason;		/* static text */
};

/* A trusted line, kept in order for job batches (their plugin reads the
 * tasks' reports again). */
struct journal_line {
	uint32_t task;
	int ok;
	char *out;			/* standard output (malloc'd) */
	size_t out_len;
	char *reason;			/* why it failed, or NULL */
};

struct journal_results {
	uint8_t *done;			/* bit per task index */
	uint8_t *bad;			/* of them, failed: bit per index */
	uint32_t ndone_bits;		/* bits allocated */
	uint32_t ok, failed;		/* trusted lines */
	double cpu_s, seconds;		/* their usage, summed ... */
	uint64_t max_rss;		/* ... and the largest peak RSS */
	struct journal_line *lines;	/* job batches only, in file order */
	size_t nlines;
	struct journal_cut *cuts;
	size_t ncuts;
	uint64_t size;			/* bytes read */
};

/* Read the results file PATH of a batch whose task indexes are below
 * MAX_TASK (0: not known yet, a job), keeping each line's report when
 * KEEP is set.  A missing file reads as empty.  0, or -1 with ERR (the
 * file exists and cannot be read). */
int journal_read(const char *path, uint32_t max_task, int keep,
		 struct journal_results *r, char *err, size_t n);
/* Rewrite PATH with R's trusted lines only (R was read from it), the cut
 * bytes appended to PATH.damaged; synced.  When the cut bytes are all at
 * the end (a torn last line), PATH is truncated in place instead, which
 * needs no room on a full disk; their copy in PATH.damaged is then kept
 * if it can be, and only logged if not.  0, or -1 with ERR. */
int journal_repair(const char *path, const struct journal_results *r,
		   char *err, size_t n);
/* Is task INDEX done in R?  Done and failed? */
int journal_done(const struct journal_results *r, uint32_t index);
int journal_failed(const struct journal_results *r, uint32_t index);
void journal_results_free(struct journal_results *r);

/* Does the result line LINE (LEN bytes, without its newline) check?  Its
 * task index in *TASK and status in *OK.  A line without a checksum is
 * judged as a whole JSON object when LEGACY_OK (a file all of whose lines
 * were written before checksums), refused otherwise.  Returns NULL when
 * it checks, else why not. */
const char *journal_check_line(const char *line, size_t len, int legacy_ok,
			       uint32_t *task, int *ok);

#endif
