/*
 * expo: the Prometheus text exposition format (version 0.0.4).
 *
 * A family is its "# HELP" and "# TYPE" lines, then its samples, one per
 * line: NAME{LABEL="VALUE",...} NUMBER.  Label values are escaped
 * (backslash, double quote, newline), help text too (backslash, newline);
 * numbers are written exactly (integers without a fraction, others with
 * 17 significant digits, +Inf, -Inf, NaN).  Names are the caller's and
 * must already be valid ([a-zA-Z_:][a-zA-Z0-9_:]*).
 */
#ifndef FT_EXPO_H
#define FT_EXPO_H

#include "stats.h"
#include "util.h"

struct expo_label {
	const char *name;
	const char *value;
};

/* Begin family NAME of TYPE ("counter", "gauge", "histogram"). */
void expo_family(struct ft_buf *b, const char *name, const char *type,
		 const char *help);
/* One sample of NAME with the NL labels L (L may be NULL when NL is 0). */
void expo_sample(struct ft_buf *b, const char *name,
		 const struct expo_label *l, int nl, double v);
/* Family NAME of TYPE with its one sample V, without labels. */
void expo_single(struct ft_buf *b, const char *name, const char *type,
		 const char *help, double v);
/* Histogram H as NAME_bucket{...,le="..."} (cumulative, +Inf last),
 * NAME_sum and NAME_count, each with the NL labels L. */
void expo_histogram(struct ft_buf *b, const char *name,
		    const struct expo_label *l, int nl, const struct hist *h);
/* V as the format writes numbers, into OUT (at least 32 bytes). */
void expo_number(char *out, size_t n, double v);

#endif
