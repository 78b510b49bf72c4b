/*
 * evring: recent lines in memory, oldest dropped first.
 *
 * Records (a line with its sequence number, time and type) sit back to
 * back in one buffer; past the byte cap the oldest go.  A record is found
 * by its absolute position, which never changes while it is kept: readers
 * hold positions as cursors, and a cursor below evring_head() has lost the
 * records in between (evring_ord says how many).
 */
#ifndef FT_EVRING_H
#define FT_EVRING_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct evrec {
	uint64_t seq;			/* the caller's sequence number */
	uint64_t ord;			/* its rank in this ring: 0, 1, ... */
	double ts;			/* the caller's time */
	uint32_t len;			/* bytes of the line */
	int type;			/* the caller's type */
};

struct evring {
	struct ft_buf buf;		/* records back to back */
	uint64_t base;			/* the position of buf.data[0] */
	uint64_t head;			/* the position of the oldest record */
	uint64_t head_ord;		/* its ord (= records dropped so far) */
	uint64_t nadded;		/* records added so far */
	size_t cap;			/* bytes of records kept at most */
};

void evring_init(struct evring *r, size_t cap);
void evring_free(struct evring *r);
/* Add LINE (LEN bytes) as the newest record, dropping the oldest ones past
 * the cap (a record bigger than the cap is kept alone). */
void evring_add(struct evring *r, uint64_t seq, double ts, int type,
		const char *line, size_t len);
/* The position of the oldest record, and the one after the newest. */
uint64_t evring_head(const struct evring *r);
uint64_t evring_end(const struct evring *r);
/* The record at POS (head <= POS < end, a record's start): its header in
 * *REC, its line in *LINE (valid until the next add).  The position of
 * the next record. */
uint64_t evring_get(const struct evring *r, uint64_t pos, struct evrec *rec,
		    const char **line);

#endif
