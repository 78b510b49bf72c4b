/* expo: the Prometheus text exposition format (see expo.h). */
#include "expo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LABELS 8

void
expo_number(char *out, size_t n, double v)
{
	if (isnan(v))
		snprintf(out, n, "NaN");
	else if (isinf(v))
		snprintf(out, n, "%sInf", v > 0 ? "+" : "-");
	else if (v == floor(v) && fabs(v) < 9007199254740992.0)
		snprintf(out, n, "%.0f", v);
	else {
		/* The shortest of the two that reads back as V. */
		snprintf(out, n, "%.15g", v);
		if (strtod(out, NULL) != v)
			snprintf(out, n, "%.17g", v);
	}
}

/* S with backslash and newline escaped, and double quotes if QUOTES. */
static void
escaped(struct ft_buf *b, const char *s, int quotes)
{
	for (; *s; s++) {
		if (*s == '\\')
			ft_buf_add(b, "\\\\", 2);
		else if (*s == '\n')
			ft_buf_add(b, "\\n", 2);
		else if (*s == '"' && quotes)
			ft_buf_add(b, "\\\"", 2);
		else
			ft_buf_add(b, s, 1);
	}
}

void
expo_family(struct ft_buf *b, const char *name, const char *type,
	    const char *help)
{
	ft_buf_printf(b, "# HELP %s ", name);
	escaped(b, help, 0);
	ft_buf_printf(b, "\n# TYPE %s %s\n", name, type);
}

static void
labels(struct ft_buf *b, const struct expo_label *l, int nl)
{
	int i;

	if (nl == 0)
		return;
	ft_buf_add(b, "{", 1);
	for (i = 0; i < nl; i++) {
		ft_buf_printf(b, "%s%s=\"", i ? "," : "", l[i].name);
		escaped(b, l[i].value ? l[i].value : "", 1);
		ft_buf_add(b, "\"", 1);
	}
	ft_buf_add(b, "}", 1);
}

void
expo_sample(struct ft_buf *b, const char *name, const struct expo_label *l,
	    int nl, double v)
{
	char num[40];

	ft_buf_adds(b, name);
	labels(b, l, nl);
	expo_number(num, sizeof(num), v);
	ft_buf_printf(b, " %s\n", num);
}

void
expo_single(struct ft_buf *b, const char *name, const char *type,
	    const char *help, double v)
{
	expo_family(b, name, type, help);
	expo_sample(b, name, NULL, 0, v);
}

void
expo_histogram(struct ft_buf *b, const char *name, const struct expo_label *l,
	       int nl, const struct hist *h)
{
	struct expo_label all[MAX_LABELS + 1];
	char le[40], sub[160];
	int i;

	if (nl > MAX_LABELS)
		nl = MAX_LABELS;
	memcpy(all, l, (size_t)nl * sizeof(*l));
	all[nl].name = "le";
	snprintf(sub, sizeof(sub), "%s_bucket", name);
	for (i = 0; i <= h->n; i++) {
		if (i < h->n)
			expo_number(le, sizeof(le), h->le[i]);
		else
			snprintf(le, sizeof(le), "+Inf");
		all[nl].value = le;
		expo_sample(b, sub, all, nl + 1,
			    (double)hist_cumulative(h, i));
	}
	snprintf(sub, sizeof(sub), "%s_sum", name);
	expo_sample(b, sub, l, nl, h->sum);
	snprintf(sub, sizeof(sub), "%s_count", name);
	expo_sample(b, sub, l, nl, (double)h->count);
}
