/*
 * jsonl: append-only files of one JSON object per line (events.jsonl,
 * results.jsonl).
 *
 * Lines are built in memory and written with write(2) by jsonl_flush, so a
 * reader never sees half a line once a flush returned.  The master flushes
 * from its periodic timer and right after events that matter.
 */
#ifndef FT_JSONL_H
#define FT_JSONL_H

#include <stddef.h>

#include "util.h"

struct jsonl {
	int fd;
	struct ft_buf pending;
	int in_line;			/* between begin and end */
	int first;			/* no member written yet in this line */
};

/* Open PATH for appending.  0, or -1 with errno. */
int jsonl_open(struct jsonl *j, const char *path);
/* Flush and close. */
void jsonl_close(struct jsonl *j);
/* Write what is pending.  0, or -1 with errno. */
int jsonl_flush(struct jsonl *j);

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

/* An event line: {"ts": <epoch seconds>, "event": NAME, ...}; finish it
 * with jsonl_end. */
void jsonl_event(struct jsonl *j, const char *name);

#endif
