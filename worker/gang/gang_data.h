/*
 * gang_data: the data gang jobs read, generate and write.
 *
 * Generated inputs come from splitmix64 over a counter, so that a test
 * (or any other language) can rebuild them exactly:
 *
 *   z_i = mix(seed + (i + 1) * 0x9E3779B97F4A7C15)   (uint64 arithmetic)
 *   mix(z): z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9;
 *           z = (z ^ z >> 27) * 0x94D049BB133111EB; z ^ z >> 31
 *
 *   double i = ldexp((z_i >> 11) * 2^-53 - 0.5, (z_i & 31) - 10)
 *              (exact: values of many magnitudes, so that the order of a
 *              sum shows in its bits)
 *   byte k   = bits 8*(k % 8) .. 8*(k % 8) + 7 of z_{k / 8}
 *
 * Files hold little-endian doubles; this code assumes a little-endian
 * host (checked at compile time).
 */
#ifndef FT_GANG_DATA_H
#define FT_GANG_DATA_H

#include <stddef.h>
#include <stdint.h>

uint64_t gdata_z(uint64_t seed, uint64_t i);
/* Doubles FIRST .. FIRST+N-1 of the stream SEED into OUT. */
void gdata_doubles(uint64_t seed, uint64_t first, double *out, size_t n);
/* Bytes FIRST .. FIRST+N-1 of the stream SEED into OUT. */
void gdata_bytes(uint64_t seed, uint64_t first, unsigned char *out, size_t n);

/* 64-bit FNV-1a of N bytes at P: the digest ranks report for their
 * output, so that the master sees that they agree. */
uint64_t gdata_digest(const void *p, size_t n);

/* Read N bytes of PATH at offset OFF into BUF.  0, or -1 with ERR (a short
 * file is an error). */
int gdata_read_at(const char *path, uint64_t off, void *buf, size_t n,
		  char *err, size_t en);

#endif
