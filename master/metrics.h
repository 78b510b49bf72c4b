/*
 * metrics: the master's figures in the Prometheus text format (expo.h),
 * for GET /metrics.
 *
 * Every name starts with ftfarm_; counters end in _total, times are in
 * seconds, sizes in bytes.  Labels are bounded: a task type, a worker or
 * node state, a node, a batch id (only the batches running and the
 * RECENT latest finished ones): never a task or a worker process.  All
 * comes from what the master keeps anyway (its counters, stats, states,
 * batch counts): building it reads no file and walks no task.
 *
 * Built on the loop's thread (it reads the master's state); the HTTP
 * thread serves copies (http.h).
 */
#ifndef FT_METRICS_H
#define FT_METRICS_H

#include "util.h"

struct master;

/* Finished batches with metrics of their own. */
#define METRICS_RECENT_BATCHES 16

/* Append the exposition of M's figures to OUT. */
void metrics_write(struct master *m, struct ft_buf *out);

#endif
