/*
 * stats: what the master measures beside its counters (master.h), for
 * /metrics: histograms (failure detection, loop lag, task run time) and
 * task counts by task type.
 *
 * Everything here is touched by the loop's thread only, in O(1) per
 * observation (a histogram finds its bucket among at most
 * STATS_MAX_BUCKETS bounds); the HTTP listener sees copies (http.h).
 */
#ifndef FT_STATS_H
#define FT_STATS_H

#include <stdint.h>

#define STATS_MAX_BUCKETS 16
/* Task types counted apart: a plugin's index in the master's plugins; the
 * last slot counts every type past it and tasks of no known type. */
#define STATS_MAX_TYPES 32
#define STATS_OTHER (STATS_MAX_TYPES - 1)

/* A Prometheus-style histogram: per-bucket counts (not cumulative), the
 * last bucket +Inf. */
struct hist {
	const double *le;		/* upper bounds, ascending */
	int n;				/* how many (at most STATS_MAX_BUCKETS) */
	uint64_t bucket[STATS_MAX_BUCKETS + 1];
	uint64_t count;
	double sum;
};

/* Bounds of H: the first N of LE (ascending). */
void hist_init(struct hist *h, const double *le, int n);
void hist_observe(struct hist *h, double v);
/* Observations at or below bound I (cumulative), or all for I == n. */
uint64_t hist_cumulative(const struct hist *h, int i);

/* The master's histograms, declared once: X(field, metric, help); the
 * metric is ftfarm_<metric>, its bounds stats_<field>_le. */
#define FT_HISTOGRAMS(X)						\
	X(detect, "failure_detection_seconds",				\
	  "Seconds from a worker's last sign of life to its declared failure") \
	X(loop_lag, "loop_lag_seconds",					\
	  "Lateness of the master's periodic timer, seconds")

/* Counts of the tasks of one type. */
struct type_stats {
	uint64_t submitted;		/* queued (a job's tasks as planned) */
	uint64_t done;			/* ended ok */
	uint64_t failed;		/* ended failed, with a result or without */
	uint64_t reassigned;		/* instances lost and queued again */
	struct hist run;		/* seconds a task ran, from its result */
};

struct stats {
#define STATS_HIST_FIELD(field, metric, help) struct hist field;
	FT_HISTOGRAMS(STATS_HIST_FIELD)
#undef STATS_HIST_FIELD
	double lag_max;			/* the worst loop lag since stats_lag_max */
	struct type_stats types[STATS_MAX_TYPES];
	uint64_t batches_submitted;
	uint64_t batches_finished;
};

/* Empty stats with the histograms' bounds. */
void stats_init(struct stats *s);
/* The counts of task type KIND (STATS_OTHER for any unknown kind). */
struct type_stats *stats_type(struct stats *s, int kind);
/* The loop was LAG seconds late. */
void stats_loop_lag(struct stats *s, double lag);
/* The worst lag since the last call, and start again from 0. */
double stats_lag_max(struct stats *s);

#endif
