/*
 * jobs: the phase engine of job batches.
 *
 * A job batch is planned by its plugin's job hooks (plugin.h, struct
 * ft_job_ops) one phase at a time.  The engine calls the hooks in their
 * order, checks every planned task as a submitted one is checked, parses
 * each task's report once, counts the phase's tasks, plans the next phase
 * when the last one has ended, and cleans up once: after the first failure
 * or after the last phase.  A failed job's batch ends when the tasks of
 * the phase under way have all ended.  No MPI, no I/O of its own.
 */
#ifndef FT_JOBS_H
#define FT_JOBS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "plugins.h"

enum job_step {
	JOB_RUNNING = 1,		/* the phase goes on */
	JOB_PHASE,			/* the next phase's tasks are planned */
	JOB_COMPLETE,			/* the last phase has ended */
	JOB_FAILED,			/* failed, and its phase has drained */
};

struct job;

/* Start the job SPEC (checked) of plugin P, with PL to check what it
 * plans and DIR for its files.  The job, with its first phase's tasks in
 * *TASKS (a new array) whose batch indexes start at 0; or NULL with ERR. */
struct job *job_start(const struct ft_plugin *p, const struct ft_plugins *pl,
		      const json_t *spec, const char *dir, json_t **tasks,
		      char *err, size_t n);
/* Task INDEX of the job's batch ended: OK with standard output OUT (LEN
 * bytes), or failed for REASON.  On JOB_PHASE *TASKS holds the next
 * phase's tasks (a new array), numbered on from the batch's last index. */
enum job_step job_task_ended(struct job *j, uint32_t index, int ok,
			     const char *out, size_t len, const char *reason,
			     json_t **tasks);
/* The tasks just planned cannot be queued (ERR): the job fails.  Returns
 * JOB_FAILED when nothing of it is left running. */
enum job_step job_fail(struct job *j, const char *err);
/* Why the job failed, or NULL. */
const char *job_error(const struct job *j);
/* What a complete job produced (a borrowed reference), or NULL. */
json_t *job_summary(const struct job *j);
/* Tasks planned so far, over every phase. */
uint32_t job_planned(const struct job *j);
void job_free(struct job *j);

#endif
