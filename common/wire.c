/* wire: the byte layout of messages between master and workers. */
#include "wire.h"

#include <string.h>

void
wire_put_u8(struct ft_buf *b, uint8_t v)
{
	ft_buf_add(b, &v, 1);
}

void
wire_put_u32(struct ft_buf *b, uint32_t v)
{
	unsigned char x[4] = { v, v >> 8, v >> 16, v >> 24 };

	ft_buf_add(b, x, 4);
}

void
wire_put_i32(struct ft_buf *b, int32_t v)
{
	wire_put_u32(b, (uint32_t)v);
}

void
wire_put_u64(struct ft_buf *b, uint64_t v)
{
	wire_put_u32(b, (uint32_t)v);
	wire_put_u32(b, (uint32_t)(v >> 32));
}

void
wire_put_f64(struct ft_buf *b, double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	wire_put_u64(b, u);
}

void
wire_put_bytes(struct ft_buf *b, const void *p, size_t n)
{
	wire_put_u32(b, (uint32_t)n);
	if (n)
		ft_buf_add(b, p, n);
}

void
wire_put_str(struct ft_buf *b, const char *s)
{
	wire_put_bytes(b, s, strlen(s));
}

void
wire_reader(struct wire_r *r, const void *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->off = 0;
	r->bad = 0;
}

/* The next N bytes, or NULL (and bad set) when fewer are left. */
static const unsigned char *
take(struct wire_r *r, size_t n)
{
	const unsigned char *p;

	if (r->bad || r->len - r->off < n) {
		r->bad = 1;
		return NULL;
	}
	p = r->p + r->off;
	r->off += n;
	return p;
}

uint8_t
wire_get_u8(struct wire_r *r)
{
	const unsigned char *p = take(r, 1);

	return p ? p[0] : 0;
}

uint32_t
wire_get_u32(struct wire_r *r)
{
	const unsigned char *p = take(r, 4);

	if (p == NULL)
		return 0;
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

int32_t
wire_get_i32(struct wire_r *r)
{
	return (int32_t)wire_get_u32(r);
}

uint64_t
wire_get_u64(struct wire_r *r)
{
	uint64_t lo = wire_get_u32(r);
	uint64_t hi = wire_get_u32(r);

	return lo | hi << 32;
}

double
wire_get_f64(struct wire_r *r)
{
	uint64_t u = wire_get_u64(r);
	double v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

const char *
wire_get_bytes(struct wire_r *r, size_t *n)
{
	uint32_t len = wire_get_u32(r);
	const unsigned char *p = take(r, len);

	*n = p ? len : 0;
	return (const char *)p;
}

int
wire_end(const struct wire_r *r)
{
	return (r->bad || r->off != r->len) ? -1 : 0;
}
