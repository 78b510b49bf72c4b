/* memsize: amounts of memory as users write them (memsize.h). */
#include "memsize.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* The multiple of unit letter C (any case), or 0 when it is none. */
static uint64_t
unit_of(char c)
{
	switch (tolower((unsigned char)c)) {
	case 'k': return 1ULL << 10;
	case 'm': return 1ULL << 20;
	case 'g': return 1ULL << 30;
	case 't': return 1ULL << 40;
	default: return 0;
	}
}

/* Is REST (after the unit letter) empty, "b" or "ib" (any case)? */
static int
unit_tail(const char *rest)
{
	return *rest == '\0' || strcasecmp(rest, "b") == 0 ||
	       strcasecmp(rest, "ib") == 0;
}

/* The end of the number at S: digits with at most one point among or
 * after them (no sign, exponent or hexadecimal), or S when there is
 * none. */
static const char *
number_end(const char *s)
{
	const char *p = s;
	int digits = 0, points = 0;

	for (; isdigit((unsigned char)*p) || (*p == '.' && !points); p++) {
		digits += *p != '.';
		points += *p == '.';
	}
	return digits ? p : s;
}

int
memsize_parse(const char *s, uint64_t *bytes)
{
	const char *end;
	double v, mult = 1;

	if (s == NULL || (end = number_end(s)) == s)
		return -1;
	errno = 0;
	v = strtod(s, NULL);
	if (errno != 0 || !isfinite(v) || v <= 0)
		return -1;
	if (*end != '\0') {
		mult = (double)unit_of(*end);
		if (mult == 0 || !unit_tail(end + 1))
			return -1;
	} else if (v != floor(v)) {
		return -1;		/* a fraction of a byte */
	}
	v = ceil(v * mult);
	if (v > (double)MEMSIZE_MAX)
		return -1;
	*bytes = (uint64_t)v;
	return 0;
}

int
memsize_json(const json_t *v, uint64_t *bytes)
{
	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);

		if (i <= 0 || (uint64_t)i > MEMSIZE_MAX)
			return -1;
		*bytes = (uint64_t)i;
		return 0;
	}
	return memsize_parse(json_string_value(v), bytes);
}

const char *
memsize_format(uint64_t bytes, char *buf, size_t n)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB",
					     "PiB" };
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(buf, n, v >= 100 ? "%.0f %s" : "%.3g %s", v, units[u]);
	return buf;
}
