/*
 * wire: the byte layout of messages between master and workers.
 *
 * Writers append little-endian integers, doubles and length-prefixed byte
 * strings to a growing buffer.  Readers decode strictly: reading past the
 * end sets an error that sticks, and wire_end() fails on leftover bytes, so
 * a malformed message is refused whole instead of half-used.
 */
#ifndef FT_WIRE_H
#define FT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

void wire_put_u8(struct ft_buf *b, uint8_t v);
void wire_put_u32(struct ft_buf *b, uint32_t v);
void wire_put_i32(struct ft_buf *b, int32_t v);
void wire_put_u64(struct ft_buf *b, uint64_t v);
void wire_put_f64(struct ft_buf *b, double v);
/* A byte string: u32 length, then the bytes. */
void wire_put_bytes(struct ft_buf *b, const void *p, size_t n);
void wire_put_str(struct ft_buf *b, const char *s);

struct wire_r {
	const unsigned char *p;
	size_t len;
	size_t off;
	int bad;		/* set once any read failed */
};

void wire_reader(struct wire_r *r, const void *p, size_t len);
uint8_t wire_get_u8(struct wire_r *r);
uint32_t wire_get_u32(struct wire_r *r);
int32_t wire_get_i32(struct wire_r *r);
uint64_t wire_get_u64(struct wire_r *r);
double wire_get_f64(struct wire_r *r);
/* A byte string, pointing into the message (not NUL-terminated); *N gets
 * its length.  NULL (and bad set) when it runs past the end. */
const char *wire_get_bytes(struct wire_r *r, size_t *n);
/* 0 if every read succeeded and nothing is left over, else -1. */
int wire_end(const struct wire_r *r);

#endif
