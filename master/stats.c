/* stats: what the master measures beside its counters (see stats.h). */
#include "stats.h"

#include <string.h>

#include "util.h"

/* A failure is seen within two heartbeats (or a task's deadline). */
static const double stats_detect_le[] = {
	0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300,
};
/* The cron runs every 10 ms; past 250 ms the loop counts as stalled. */
static const double stats_loop_lag_le[] = {
	0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5,
};
/* From no-op tasks (microseconds) to hours. */
static const double run_le[] = {
	0.0001, 0.001, 0.01, 0.1, 0.5, 1, 5, 10, 60, 300, 1800, 7200,
};

void
hist_init(struct hist *h, const double *le, int n)
{
	memset(h, 0, sizeof(*h));
	h->le = le;
	h->n = n > STATS_MAX_BUCKETS ? STATS_MAX_BUCKETS : n;
}

void
hist_observe(struct hist *h, double v)
{
	int i = 0;

	while (i < h->n && v > h->le[i])
		i++;
	h->bucket[i]++;
	h->count++;
	h->sum += v;
}

uint64_t
hist_cumulative(const struct hist *h, int i)
{
	uint64_t c = 0;
	int k;

	for (k = 0; k <= i && k <= h->n; k++)
		c += h->bucket[k];
	return c;
}

void
stats_init(struct stats *s)
{
	int i;

	memset(s, 0, sizeof(*s));
#define STATS_HIST_INIT(field, metric, help)				\
	hist_init(&s->field, stats_##field##_le,			\
		  (int)FT_ARRAY_LEN(stats_##field##_le));
	FT_HISTOGRAMS(STATS_HIST_INIT)
#undef STATS_HIST_INIT
	for (i = 0; i < STATS_MAX_TYPES; i++)
		hist_init(&s->types[i].run, run_le, (int)FT_ARRAY_LEN(run_le));
}

struct type_stats *
stats_type(struct stats *s, int kind)
{
	if (kind < 0 || kind >= STATS_MAX_TYPES)
		kind = STATS_OTHER;
	return &s->types[kind];
}

void
stats_loop_lag(struct stats *s, double lag)
{
	if (lag < 0)
		lag = 0;
	hist_observe(&s->loop_lag, lag);
	if (lag > s->lag_max)
		s->lag_max = lag;
}

double
stats_lag_max(struct stats *s)
{
	double v = s->lag_max;

	s->lag_max = 0;
	return v;
}
