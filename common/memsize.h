/*
 * memsize: amounts of memory as users write them.
 *
 * A node's and a task's "mem", `submit --mem`: a whole number of bytes
 * (a JSON integer, or a string of digits), or a number with K, M, G or T
 * after it, binary multiples as Slurm's --mem reads them ("2G" is 2 GiB,
 * "1.5G" 1.5 GiB, "512M" 512 MiB); a "B" or "iB" after the letter is
 * taken too ("2GiB", "64KB").  Case does not matter.
 */
#ifndef FT_MEMSIZE_H
#define FT_MEMSIZE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* The largest amount accepted: 1 PiB (more is a typo). */
#define MEMSIZE_MAX (1ULL << 50)

/* S as bytes into *BYTES: 0, or -1 when it is not an amount, is 0 or is
 * more than MEMSIZE_MAX. */
int memsize_parse(const char *s, uint64_t *bytes);
/* The same for a JSON value: an integer or a string.  0 or -1. */
int memsize_json(const json_t *v, uint64_t *bytes);
/* BYTES for people: "300 MiB", "1.5 GiB", "4096 B" (at most 3 significant
 * digits past a binary unit).  BUF, for printf's sake. */
const char *memsize_format(uint64_t bytes, char *buf, size_t n);
/* The mebibytes BYTES takes, rounded up (the scheduler's unit). */
static inline uint32_t
memsize_mib(uint64_t bytes)
{
	return (uint32_t)((bytes + (1 << 20) - 1) >> 20);
}

#endif
