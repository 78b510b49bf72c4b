/*
 * wc_table: counts of words, in an open-addressing hash table.
 *
 * Linear probing over 32-byte slots, at most half full.  A word of up to
 * WC_SHORT bytes lives in its slot (folded, zero-padded) next to its count,
 * so that counting a known word touches one cache line; a longer word
 * lives in a bump arena and its slot points to it.  Words are folded (A-Z
 * to a-z) as they are added.  Nothing is allocated per word but long
 * words' arena space.
 */
#ifndef WC_TABLE_H
#define WC_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "wc_tok.h"

#define WC_SHORT 24		/* longest word kept in its slot */
#define WC_LONG 0xff		/* the length byte of a long word's slot */

/* A long word in the arena: its length, then its folded bytes padded
 * with zeros to a multiple of 8, then WC_PAD zero bytes. */
struct wc_long {
	uint64_t len;
	uint8_t key[];
};

struct wc_slot {
	union {
		uint64_t w[3];		/* a short word, folded, zero-padded */
		struct {
			struct wc_long *lw;
			uint64_t h;	/* its hash */
		} l;
	} key;
	uint64_t meta;		/* count << 8 | length (WC_LONG: long); 0: empty */
};

struct wc_chunk;

struct wc_table {
	struct wc_slot *slots;
	size_t mask;		/* number of slots - 1 (a power of 2 minus 1) */
	unsigned shift;		/* 64 - log2(number of slots) */
	size_t used;		/* distinct words */
	size_t grow_at;		/* grow when used reaches this */
	uint64_t words;		/* sum of all counts */
	struct wc_chunk *chunks;	/* the arena of long words */
	uint8_t *bump, *bump_end;	/* free space of the current chunk */
};

/* A word ready to be counted: its folded first WC_SHORT bytes and its
 * hash, computed ahead so that its slot can be prefetched. */
struct wc_word {
	const uint8_t *p;	/* the word as read */
	size_t n;
	uint64_t h;
	uint64_t w[3];		/* folded, masked; only when n <= WC_SHORT */
};

/* An empty table sized for about HINT distinct words. */
void wc_table_init(struct wc_table *t, size_t hint);
void wc_table_free(struct wc_table *t);

/* Out-of-line parts of the adds. */
void wc_table_insert_short(struct wc_table *t, struct wc_slot *s,
			   const struct wc_word *w, uint64_t count);
void wc_table_add_long(struct wc_table *t, const uint8_t *p, size_t n,
		       uint64_t h, uint64_t count);

/* Prepare the word P[0..N) (N >= 1; WC_PAD readable bytes after it),
 * which is already folded when FOLDED. */
static inline void
wc_word_prep(struct wc_word *w, const uint8_t *p, size_t n, int folded)
{
	const uint64_t *m = wc_masks24[n <= WC_SHORT ? n : 0];

	w->p = p;
	w->n = n;
	if (n > WC_SHORT) {
		w->h = wc_hash(p, n);
		return;
	}
	if (folded) {
		w->w[0] = wc_load(p) & m[0];
		w->w[1] = wc_load(p + 8) & m[1];
		w->w[2] = wc_load(p + 16) & m[2];
	} else {
		w->w[0] = wc_fold8(wc_load(p)) & m[0];
		w->w[1] = wc_fold8(wc_load(p + 8)) & m[1];
		w->w[2] = wc_fold8(wc_load(p + 16)) & m[2];
	}
	w->h = wc_hash24(w->w, n);
}

/* The slot where the search for hash H begins, in a table of 2^(64 -
 * SHIFT) slots: the hash's top bits, the ones that its every input bit
 * reaches. */
static inline size_t
wc_home(uint64_t h, unsigned shift)
{
	return (size_t)(h >> shift);
}

/* Add COUNT to the prepared word W. */
static inline void
wc_table_add_word(struct wc_table *t, const struct wc_word *w, uint64_t count)
{
	struct wc_slot *s;
	size_t i;

	if (w->n > WC_SHORT) {
		wc_table_add_long(t, w->p, w->n, w->h, count);
		return;
	}
	t->words += count;
	for (i = wc_home(w->h, t->shift);; i = (i + 1) & t->mask) {
		s = &t->slots[i];
		if ((s->meta & 0xff) == w->n && s->key.w[0] == w->w[0] &&
		    s->key.w[1] == w->w[1] && s->key.w[2] == w->w[2]) {
			s->meta += count << 8;
			return;
		}
		if (s->meta == 0) {
			wc_table_insert_short(t, s, w, count);
			return;
		}
	}
}

/* Add COUNTS[k] (1 when COUNTS is NULL) to each of the NW prepared words
 * W[k].  With COUNTS, each word's slot is prefetched a few words ahead of
 * its probe; without, the caller has prefetched them. */
void wc_table_add_batch(struct wc_table *t, const struct wc_word *w,
			const uint64_t *counts, size_t nw);

/* Add COUNT to the word P[0..N), folding it (N >= 1; WC_PAD readable
 * bytes after it). */
static inline void
wc_table_add(struct wc_table *t, const uint8_t *p, size_t n, uint64_t count)
{
	struct wc_word w;

	wc_word_prep(&w, p, n, 0);
	wc_table_add_word(t, &w, count);
}

/* The folded word of a used slot S and its length. */
static inline const uint8_t *
wc_slot_word(const struct wc_slot *s, size_t *len)
{
	if ((s->meta & 0xff) != WC_LONG) {
		*len = s->meta & 0xff;
		return (const uint8_t *)s->key.w;
	}
	*len = (size_t)s->key.l.lw->len;
	return s->key.l.lw->key;
}

static inline uint64_t
wc_slot_count(const struct wc_slot *s)
{
	return s->meta >> 8;
}

/* Set the count of used slot S to 0: its word stays, stale. */
static inline void
wc_slot_clear_count(struct wc_slot *s)
{
	s->meta &= 0xff;
}

/* The hash of the word of used slot S. */
static inline uint64_t
wc_slot_hash(const struct wc_slot *s)
{
	if ((s->meta & 0xff) == WC_LONG)
		return s->key.l.h;
	return wc_hash24(s->key.w, s->meta & 0xff);
}

/* The used slots of T, in no order, into a new array (T->used entries). */
struct wc_slot **wc_table_list(const struct wc_table *t);

/* Sort LIST (N slots) by count descending, then word bytes ascending
 * (memcmp order, a prefix first). */
void wc_table_sort(struct wc_slot **list, size_t n);

#endif
