/* frame: messages over a stream socket (see frame.h). */
#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_CHUNK 65536
#define BIG_QUEUE 65536

static uint32_t
get_u32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void
put_u32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

void
frame_reader_init(struct frame_reader *r, size_t max)
{
	r->buf = NULL;
	r->len = r->off = r->cap = 0;
	r->max = max;
}

void
frame_reader_free(struct frame_reader *r)
{
	free(r->buf);
	r->buf = NULL;
	r->len = r->off = r->cap = 0;
}

/* Drop consumed bytes and make room for a read. */
static void
make_room(struct frame_reader *r)
{
	if (r->off > 0) {
		memmove(r->buf, r->buf + r->off, r->len - r->off);
		r->len -= r->off;
		r->off = 0;
	}
	if (r->cap - r->len < READ_CHUNK) {
		r->cap = r->len + READ_CHUNK;
		r->buf = ft_realloc(r->buf, r->cap);
	}
}

enum frame_rc
frame_fill(struct frame_reader *r, int fd)
{
	ssize_t n;

	make_room(r);
	do
		n = read(fd, r->buf + r->len, r->cap - r->len);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		r->len += (size_t)n;
		return FRAME_READ;
	}
	if (n == 0)
		return FRAME_EOF;
	return errno == EAGAIN || errno == EWOULDBLOCK ? FRAME_AGAIN
						       : FRAME_ERROR;
}

void
frame_reader_feed(struct frame_reader *r, const void *p, size_t n)
{
	make_room(r);
	if (r->cap - r->len < n) {
		r->cap = r->len + n;
		r->buf = ft_realloc(r->buf, r->cap);
	}
	memcpy(r->buf + r->len, p, n);
	r->len += n;
}

int
frame_next(struct frame_reader *r, struct frame *f)
{
	size_t have = r->len - r->off;
	const unsigned char *h = r->buf + r->off;
	uint32_t n;

	if (have == 0 && r->buf) {
		/* Nothing held: an idle peer keeps no buffer. */
		frame_reader_free(r);
		return 0;
	}
	if (have < FRAME_HEADER)
		return 0;
	n = get_u32(h);
	if (n > r->max)
		return -1;
	if (have - FRAME_HEADER < n)
		return 0;
	f->tag = get_u32(h + 4);
	f->p = h + FRAME_HEADER;
	f->n = n;
	r->off += FRAME_HEADER + n;
	return 1;
}

void
frame_put(struct frame_writer *w, uint32_t tag, const void *p, size_t n)
{
	unsigned char h[FRAME_HEADER];

	if (w->off > 0 && w->off >= w->q.len / 2) {
		memmove(w->q.data, w->q.data + w->off, w->q.len - w->off);
		w->q.len -= w->off;
		w->off = 0;
	}
	put_u32(h, (uint32_t)n);
	put_u32(h + 4, tag);
	ft_buf_add(&w->q, h, sizeof(h));
	if (n)
		ft_buf_add(&w->q, p, n);
}

int
frame_flush(struct frame_writer *w, int fd)
{
	while (w->off < w->q.len) {
		ssize_t n = send(fd, w->q.data + w->off, w->q.len - w->off,
				 MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 1 : -1;
		w->off += (size_t)n;
	}
	w->q.len = w->off = 0;
	if (w->q.cap > BIG_QUEUE)
		ft_buf_free(&w->q);	/* a burst's room goes back */
	return 0;
}

size_t
frame_pending(const struct frame_writer *w)
{
	return w->q.len - w->off;
}

void
frame_writer_free(struct frame_writer *w)
{
	ft_buf_free(&w->q);
	w->off = 0;
}
