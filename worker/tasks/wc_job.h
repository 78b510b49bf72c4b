/*
 * wc_job: the wordcount job, planned and followed in the master.
 *
 *   {"type": "wordcount", "inputs": ["/abs/file-or-dir", ...],
 *    "output": "/abs/result", "shards": N | "shard_bytes": B,
 *    "reducers": R, "delimiters": "/abs/file"}
 *
 * Phases: map (one task per shard), reduce (R tasks), merge (one task);
 * see wc_task.h for what each does.  The job keeps its state in the object
 * start() returns, so that any number of jobs can run in one master.
 */
#ifndef WC_JOB_H
#define WC_JOB_H

#include "plugin.h"

extern const struct ft_job_ops wc_job_ops;

#endif
