/* wc_table: the hash table of word counts (see wc_table.h). */
#include "wc_table.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util.h"

#define MIN_SLOTS 1024
#define CHUNK_BYTES (1 << 20)	/* arena chunk for long words */
#define HUGE_BYTES (2 << 20)	/* slot arrays this big get huge pages */
#define AHEAD 16			/* prefetch distance of a batch, in words */

struct wc_chunk {
	struct wc_chunk *next;
	uint64_t data[];
};

static size_t
slots_for(size_t words)
{
	size_t n = MIN_SLOTS;

	while (n / 2 < words && n < ((size_t)1 << 40))
		n *= 2;
	return n;
}

/* N zeroed slots.  Big arrays are mapped with transparent huge pages
 * asked for: the probes are random, and 4 KiB pages would cost a TLB miss
 * on most of them (and calloc's zero pages a second fault on write). */
static struct wc_slot *
slots_alloc(size_t n)
{
	size_t bytes = n * sizeof(struct wc_slot);
	void *p;

	if (bytes < HUGE_BYTES)
		return ft_calloc(n, sizeof(struct wc_slot));
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return ft_calloc(n, sizeof(struct wc_slot));	/* aborts if none */
	madvise(p, bytes, MADV_HUGEPAGE);
	return p;
}

static void
slots_free(struct wc_slot *s, size_t n)
{
	size_t bytes = n * sizeof(struct wc_slot);

	if (s == NULL)
		return;
	if (bytes < HUGE_BYTES)
		free(s);
	else
		munmap(s, bytes);
}

void
wc_table_init(struct wc_table *t, size_t hint)
{
	size_t n = slots_for(hint);

	memset(t, 0, sizeof(*t));
	t->slots = slots_alloc(n);
	t->mask = n - 1;
	t->shift = 64 - (unsigned)__builtin_ctzll(n);
	t->grow_at = n / 2;
}

void
wc_table_free(struct wc_table *t)
{
	struct wc_chunk *c, *next;

	for (c = t->chunks; c; c = next) {
		next = c->next;
		free(c);
	}
	slots_free(t->slots, t->mask + 1);
	memset(t, 0, sizeof(*t));
}

/* Double the slots of T. */
static void
grow(struct wc_table *t)
{
	size_t n = (t->mask + 1) * 2, i, j;
	struct wc_slot *old = t->slots, *s;

	t->slots = slots_alloc(n);
	for (i = 0; i <= t->mask; i++) {
		s = &old[i];
		if (s->meta == 0)
			continue;
		for (j = wc_home(wc_slot_hash(s), t->shift - 1); t->slots[j].meta;
		     j = (j + 1) & (n - 1))
			;
		t->slots[j] = *s;
	}
	slots_free(old, t->mask + 1);
	t->mask = n - 1;
	t->shift--;
	t->grow_at = n / 2;
}

void
wc_table_insert_short(struct wc_table *t, struct wc_slot *s,
		      const struct wc_word *w, uint64_t count)
{
	s->key.w[0] = w->w[0];
	s->key.w[1] = w->w[1];
	s->key.w[2] = w->w[2];
	s->meta = count << 8 | w->n;
	if (++t->used >= t->grow_at)
		grow(t);
}

/* Arena space for a long word of N bytes, zeroed. */
static struct wc_long *
arena_alloc(struct wc_table *t, size_t n)
{
	size_t need = sizeof(struct wc_long) + ((n + 7) & ~(size_t)7) + WC_PAD;
	struct wc_chunk *c;
	uint8_t *p;

	if (need > CHUNK_BYTES / 4) {
		/* A big word gets a chunk of its own. */
		c = ft_malloc(sizeof(*c) + need);
		c->next = t->chunks;
		t->chunks = c;
		p = (uint8_t *)c->data;
	} else {
		if ((size_t)(t->bump_end - t->bump) < need) {
			c = ft_malloc(sizeof(*c) + CHUNK_BYTES);
			c->next = t->chunks;
			t->chunks = c;
			t->bump = (uint8_t *)c->data;
			t->bump_end = t->bump + CHUNK_BYTES;
		}
		p = t->bump;
		t->bump += need;
	}
	memset(p, 0, need);
	return (struct wc_long *)p;
}

/* Is the long word LW the word P[0..N) once folded? */
static int
long_equal(const struct wc_long *lw, const uint8_t *p, size_t n)
{
	size_t i;

	if (lw->len != n)
		return 0;
	for (i = 0; i + 8 <= n; i += 8)
		if (wc_load(lw->key + i) != wc_fold8(wc_load(p + i)))
			return 0;
	return i == n ||
	       wc_load(lw->key + i) == (wc_fold8(wc_load(p + i)) &
					wc_mask(n - i));
}

/* Fold P[0..N) into DST (8 bytes at a time; DST is zero-padded). */
static void
fold_copy(uint8_t *dst, const uint8_t *p, size_t n)
{
	size_t i;
	uint64_t w;

	for (i = 0; i < n; i += 8) {
		w = wc_fold8(wc_load(p + i));
		if (n - i < 8)
			w &= wc_mask(n - i);
		memcpy(dst + i, &w, 8);
	}
}

void
wc_table_add_long(struct wc_table *t, const uint8_t *p, size_t n, uint64_t h,
		  uint64_t count)
{
	struct wc_slot *s;
	size_t i;

	t->words += count;
	for (i = wc_home(h, t->shift);; i = (i + 1) & t->mask) {
		s = &t->slots[i];
		if (s->meta == 0)
			break;
		if ((s->meta & 0xff) == WC_LONG && s->key.l.h == h &&
		    long_equal(s->key.l.lw, p, n)) {
			s->meta += count << 8;
			return;
		}
	}
	s->key.l.lw = arena_alloc(t, n);
	s->key.l.lw->len = n;
	s->key.l.h = h;
	s->key.w[2] = 0;
	s->meta = count << 8 | WC_LONG;
	fold_copy(s->key.l.lw->key, p, n);
	if (++t->used >= t->grow_at)
		grow(t);
}

/* The body of wc_table_add_batch, inlined twice so that the map's case
 * (COUNTS NULL: every count is 1) pays nothing for the reduce's. */
static inline __attribute__((always_inline)) void
add_batch(struct wc_table *t, const struct wc_word *w, const uint64_t *counts,
	  size_t nw)
{
	struct wc_slot *slots = t->slots, *s;
	size_t mask = t->mask, k, i;
	unsigned shift = t->shift;
	const struct wc_word *x;
	uint64_t c, total = 0;

	/* SLOTS and MASK stay in registers: the count stores cannot alias
	 * them.  Only an insertion (which may grow the table) reloads them.
	 * The map prefetches its words' slots as it finds them, so only the
	 * reduce's counted words (COUNTS) are prefetched here. */
	for (k = 0; counts && k < nw && k < AHEAD; k++)
		__builtin_prefetch(&slots[wc_home(w[k].h, shift)]);
	for (k = 0; k < nw; k++) {
		x = &w[k];
		c = counts ? counts[k] : 1;
		total += c;
		if (counts && k + AHEAD < nw)
			__builtin_prefetch(&slots[wc_home(w[k + AHEAD].h,
							  shift)]);
		if (x->n > WC_SHORT) {
			wc_table_add_long(t, x->p, x->n, x->h, c);
			t->words -= c;	/* counted below */
			slots = t->slots;
			mask = t->mask;
			shift = t->shift;
			continue;
		}
		for (i = wc_home(x->h, shift);; i = (i + 1) & mask) {
			s = &slots[i];
			if ((s->meta & 0xff) == x->n &&
			    s->key.w[0] == x->w[0] && s->key.w[1] == x->w[1] &&
			    s->key.w[2] == x->w[2]) {
				s->meta += c << 8;
				break;
			}
			if (s->meta == 0) {
				wc_table_insert_short(t, s, x, c);
				slots = t->slots;
				mask = t->mask;
				shift = t->shift;
				break;
			}
		}
	}
	t->words += total;
}

void
wc_table_add_batch(struct wc_table *t, const struct wc_word *w,
		   const uint64_t *counts, size_t nw)
{
	if (counts)
		add_batch(t, w, counts, nw);
	else
		add_batch(t, w, NULL, nw);
}

struct wc_slot **
wc_table_list(const struct wc_table *t)
{
	struct wc_slot **list = ft_malloc((t->used + 1) * sizeof(*list));
	size_t i, k = 0;

	for (i = 0; i <= t->mask; i++)
		if (t->slots[i].meta)
			list[k++] = &t->slots[i];
	return list;
}

/* A slot being sorted, with what most comparisons need at hand. */
struct sort_key {
	uint64_t count;
	uint64_t prefix;	/* first 8 word bytes, big-endian, zero-padded */
	struct wc_slot *s;
};

/* Word order (memcmp, a prefix first) of the slots of X and Y. */
static int
cmp_words(const struct wc_slot *x, const struct wc_slot *y)
{
	const uint8_t *kx, *ky;
	size_t nx, ny;
	int c;

	kx = wc_slot_word(x, &nx);
	ky = wc_slot_word(y, &ny);
	c = memcmp(kx, ky, nx < ny ? nx : ny);
	if (c)
		return c;
	return nx < ny ? -1 : nx > ny;
}

/* Does A come before B: count descending, then word bytes ascending?  The
 * zero-padded prefix orders words like memcmp-then-length except when the
 * padding meets real zero bytes, where the prefixes tie and the words
 * decide. */
static inline int
key_before(const struct sort_key *a, const struct sort_key *b)
{
	if (a->count != b->count)
		return a->count > b->count;
	if (a->prefix != b->prefix)
		return a->prefix < b->prefix;
	return cmp_words(a->s, b->s) < 0;
}

static void
insertion_sort(struct sort_key *v, size_t n)
{
	struct sort_key x;
	size_t i, j;

	for (i = 1; i < n; i++) {
		x = v[i];
		for (j = i; j > 0 && key_before(&x, &v[j - 1]); j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

static void
swap_keys(struct sort_key *a, struct sort_key *b)
{
	struct sort_key t = *a;

	*a = *b;
	*b = t;
}

/* Quicksort (median of three, the smaller side first), insertion sort
 * for short ranges.  Not stable; no two keys are equal. */
static void
sort_keys(struct sort_key *v, size_t n)
{
	size_t i, j, m;

	while (n > 16) {
		m = n / 2;
		if (key_before(&v[m], &v[0]))
			swap_keys(&v[m], &v[0]);
		if (key_before(&v[n - 1], &v[m]))
			swap_keys(&v[n - 1], &v[m]);
		if (key_before(&v[m], &v[0]))
			swap_keys(&v[m], &v[0]);
		swap_keys(&v[m], &v[n - 2]);	/* the pivot */
		for (i = 0, j = n - 2;;) {
			while (key_before(&v[++i], &v[n - 2]))
				;
			while (j > 0 && key_before(&v[n - 2], &v[--j]))
				;
			if (i >= j)
				break;
			swap_keys(&v[i], &v[j]);
		}
		swap_keys(&v[i], &v[n - 2]);
		if (i < n - i - 1) {
			sort_keys(v, i);
			v += i + 1;
			n -= i + 1;
		} else {
			sort_keys(v + i + 1, n - i - 1);
			n = i;
		}
	}
	insertion_sort(v, n);
}

void
wc_table_sort(struct wc_slot **list, size_t n)
{
	struct sort_key *v = ft_malloc((n + 1) * sizeof(*v));
	const uint8_t *w;
	size_t i, len;

	for (i = 0; i < n; i++) {
		w = wc_slot_word(list[i], &len);
		v[i].count = wc_slot_count(list[i]);
		v[i].prefix = wc_prefix(w, len);
		v[i].s = list[i];
	}
	sort_keys(v, n);
	for (i = 0; i < n; i++)
		list[i] = v[i].s;
	free(v);
}
