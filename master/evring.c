/* evring: recent lines in memory, oldest dropped first (see evring.h). */
#include "evring.h"

#include <string.h>

void
evring_init(struct evring *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	r->cap = cap;
	/* The buffer's whole room at once (memory is only used as it is
	 * touched): grown by doubling, it was copied into fresh pages
	 * again and again while the first busy batch filled it. */
	ft_buf_reserve(&r->buf, cap + cap / 4 + 4096);
}

void
evring_free(struct evring *r)
{
	ft_buf_free(&r->buf);
	memset(r, 0, sizeof(*r));
}

uint64_t
evring_head(const struct evring *r)
{
	return r->head;
}

uint64_t
evring_end(const struct evring *r)
{
	return r->base + r->buf.len;
}

uint64_t
evring_get(const struct evring *r, uint64_t pos, struct evrec *rec,
	   const char **line)
{
	const char *p = r->buf.data + (pos - r->base);

	memcpy(rec, p, sizeof(*rec));
	*line = p + sizeof(*rec);
	return pos + sizeof(*rec) + rec->len;
}

/* Drop the oldest record. */
static void
drop_oldest(struct evring *r)
{
	struct evrec rec;
	const char *line;

	r->head = evring_get(r, r->head, &rec, &line);
	r->head_ord++;
}

/* Move the kept records to the front of the buffer once the dropped ones
 * take more room than a quarter of the cap: the buffer stays within 1.25
 * times the cap, and each byte is moved O(1) times (at most four). */
static void
compact(struct evring *r)
{
	size_t gone = (size_t)(r->head - r->base);

	if (gone <= r->cap / 4)
		return;
	memmove(r->buf.data, r->buf.data + gone, r->buf.len - gone);
	r->buf.len -= gone;
	r->base = r->head;
}

void
evring_add(struct evring *r, uint64_t seq, double ts, int type,
	   const char *line, size_t len)
{
	struct evrec rec = {
		.seq = seq, .ord = r->nadded, .ts = ts, .len = (uint32_t)len,
		.type = type,
	};
	size_t size = sizeof(rec) + len;

	while (r->head < evring_end(r) &&
	       evring_end(r) - r->head + size > r->cap)
		drop_oldest(r);
	compact(r);
	ft_buf_add(&r->buf, &rec, sizeof(rec));
	ft_buf_add(&r->buf, line, len);
	r->nadded++;
}
