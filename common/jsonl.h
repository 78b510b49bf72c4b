/*
 * jsonl: append-only files of one JSON object per line (events.jsonl,
 * results.jsonl).
 *
 * Lines are built in memory and written with write(2) by jsonl_flush,
 * whole lines only; a write cut short (a full disk) is resumed from the
 * exact byte by the next flush, so a line is never duplicated or lost in
 * the middle.  The writer counts what reached the file (bytes, lines) and
 * what is known to be synced; syncing itself is the caller's (store.h).
 *
 * A file opened with JSONL_CRC ends every line with a "crc" member: the
 * CRC-32C, as 8 hex digits, of the line's bytes before ',"crc"'.  A reader
 * after a crash trusts only lines whose checksum matches (journal.h).
 */
#ifndef FT_JSONL_H
#define FT_JSONL_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define JSONL_CRC 1			/* jsonl_open flag */
/* Pending bytes past which a busy writer writes without waiting for its
 * periodic flush: the buffer stays small instead of growing (copied and
 * faulted in again) to hold a burst. */
#define JSONL_CHUNK (1 << 20)
/* The end of a checksummed line: ,"crc":"XXXXXXXX"}\n */
#define JSONL_CRC_TAIL ",\"crc\":\""
#define JSONL_CRC_TAIL_LEN 8
#define JSONL_CRC_END_LEN (JSONL_CRC_TAIL_LEN + 8 + 3)
/* The same without the newline: what ends a line as read back. */
#define JSONL_CRC_TAIL_ALL (JSONL_CRC_END_LEN - 1)

struct jsonl {
	int fd;
	struct ft_buf pending;		/* not yet written; the last line may
					 * be unfinished */
	size_t line_start;		/* of the line being built, in pending */
	int in_line;			/* between begin and end */
	int first;			/* no member written yet in this line */
	int crc;			/* JSONL_CRC */
	uint64_t written;		/* the file's size as far as we wrote it */
	uint64_t synced;		/* bytes known to be on disk */
	uint64_t lines;			/* complete lines written by us */
	uint64_t synced_lines;		/* of them, known to be on disk */
	unsigned gen;			/* bumped when the file is replaced */
};

/* Open PATH for appending (read-write: see jsonl_reopen), FLAGS 0 or
 * JSONL_CRC.  What the file already holds counts as written and synced.
 * 0, or -1 with errno. */
int jsonl_open(struct jsonl *j, const char *path, int flags);
/* Close without writing (what is pending is dropped). */
void jsonl_close(struct jsonl *j);
/* Write the complete lines pending.  The number of lines that reached the
 * file (0 when none were pending), or -1 with errno: whatever part was
 * written stays written and the rest stays pending. */
long jsonl_flush(struct jsonl *j);
/* Bytes pending in complete lines. */
size_t jsonl_pending(const struct jsonl *j);
/* Has the file been removed (no name left)? */
int jsonl_unlinked(const struct jsonl *j);
/* Open PATH again (its file was removed or replaced): a new empty file
 * there gets what the old one held first.  0, or -1 with errno. */
int jsonl_reopen(struct jsonl *j, const char *path);

void jsonl_begin(struct jsonl *j);
void jsonl_end(struct jsonl *j);
void jsonl_int(struct jsonl *j, const char *key, long long v);
void jsonl_num(struct jsonl *j, const char *key, double v);
/* A duration or time in seconds, to the microsecond. */
void jsonl_secs(struct jsonl *j, const char *key, double v);
void jsonl_str(struct jsonl *j, const char *key, const char *s);
void jsonl_strn(struct jsonl *j, const char *key, const char *s, size_t n);
void jsonl_bool(struct jsonl *j, const char *key, int v);
/* KEY with V written as is (V must be JSON). */
void jsonl_raw(struct jsonl *j, const char *key, const char *v);
/* The same with V's N bytes (V need not end with a NUL). */
void jsonl_rawn(struct jsonl *j, const char *key, const char *v, size_t n);

/* The checksum written at the end of LINE (LEN bytes, no newline), or -1
 * when it has none.  The line checks when it equals the CRC-32C of its
 * first LEN - JSONL_CRC_TAIL_ALL bytes. */
long long jsonl_written_crc(const char *line, size_t len);
/* Does LINE (LEN bytes, no newline) end with a checksum that matches? */
int jsonl_crc_ok(const char *line, size_t len);

/* An event line: {"ts": TS (epoch seconds), "event": NAME, ...}; finish
 * it with jsonl_end. */
void jsonl_event(struct jsonl *j, const char *name, double ts);

#endif
