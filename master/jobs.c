/* jobs: the phase engine of job batches (see jobs.h). */
#include "jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "util.h"

struct job {
	const struct ft_plugin *p;
	const struct ft_job_ops *ops;
	const struct ft_plugins *pl;
	void *state;
	uint32_t planned;		/* tasks planned over every phase */
	uint32_t phase_first;		/* batch index of the phase's first task */
	uint32_t phase_size;
	uint32_t phase_left;		/* tasks of the phase not yet ended */
	int phases;
	char *error;			/* the first reason it failed */
	int cleaned;
	json_t *summary;
};

/* J failed for WHY (the first reason is kept): clean up at once. */
static void
failed(struct job *j, const char *why)
{
	if (j->error == NULL)
		j->error = ft_strdup(why);
	if (!j->cleaned) {
		j->cleaned = 1;
		j->ops->cleanup(j->state, 0);
	}
}

/* Check every task the plugin planned, as submitted ones are.  0, or -1
 * with ERR. */
static int
check_planned(struct job *j, const json_t *tasks, char *err, size_t n)
{
	const json_t *t;
	struct jerr jerr;
	char path[64];
	size_t i;

	json_array_foreach(tasks, i, t) {
		jpath_index(path, sizeof(path), "tasks", i);
		if (ft_batch_check_task(t, path, j->pl, &jerr) == -1) {
			(void)ft_snprintf(err, n, "%s job planned an invalid "
					  "task: %s: %s", j->p->name, jerr.path,
					  jerr.msg);
			return -1;
		}
	}
	return 0;
}

/* Plan J's next phase into *TASKS.  JOB_PHASE, JOB_COMPLETE or
 * JOB_FAILED. */
static enum job_step
plan(struct job *j, json_t **tasks)
{
	char err[512] = "";
	json_t *t = json_array();

	if (j->ops->plan(j->state, t, err, sizeof(err)) == -1 ||
	    check_planned(j, t, err, sizeof(err)) == -1) {
		json_decref(t);
		failed(j, err[0] ? err : "the job could not plan its next phase");
		return JOB_FAILED;
	}
	if (json_array_size(t) == 0) {
		json_decref(t);
		j->summary = j->ops->summary(j->state);
		j->cleaned = 1;
		j->ops->cleanup(j->state, 1);
		return JOB_COMPLETE;
	}
	j->phase_first = j->planned;
	j->phase_size = j->phase_left = (uint32_t)json_array_size(t);
	j->planned += j->phase_size;
	j->phases++;
	*tasks = t;
	return JOB_PHASE;
}

struct job *
job_start(const struct ft_plugin *p, const struct ft_plugins *pl,
	  const json_t *spec, const char *dir, json_t **tasks, char *err,
	  size_t n)
{
	struct job *j = ft_calloc(1, sizeof(*j));

	j->p = p;
	j->ops = p->job;
	j->pl = pl;
	j->state = j->ops->init(spec, dir, err, n);
	if (j->state == NULL) {
		free(j);
		return NULL;
	}
	*tasks = NULL;
	if (plan(j, tasks) == JOB_PHASE)
		return j;
	snprintf(err, n, "%s", j->error ? j->error : "the job planned no tasks");
	job_free(j);
	return NULL;
}

/* Hand task I of the phase to the plugin.  0, or -1 (J failed). */
static int
report(struct job *j, uint32_t i, int ok, const char *out, size_t len,
       const char *reason)
{
	char err[512] = "";
	json_t *r;
	int rc;

	if (!ok) {
		j->ops->failed(j->state, i, reason ? reason : "", err,
			       sizeof(err));
		failed(j, err[0] ? err : "a task of the job failed");
		return -1;
	}
	r = json_loadb(out, len, 0, NULL);
	rc = j->ops->report(j->state, i, r, err, sizeof(err));
	json_decref(r);
	if (rc == -1)
		failed(j, err[0] ? err : "a task's report was refused");
	return rc;
}

enum job_step
job_task_ended(struct job *j, uint32_t index, int ok, const char *out,
	       size_t len, const char *reason, json_t **tasks)
{
	if (index < j->phase_first || index - j->phase_first >= j->phase_size
	    || j->phase_left == 0)
		return JOB_RUNNING;	/* not of this phase: cannot happen */
	if (j->error == NULL)
		report(j, index - j->phase_first, ok, out, len, reason);
	if (--j->phase_left > 0)
		return JOB_RUNNING;
	if (j->error)
		return JOB_FAILED;
	return plan(j, tasks);
}

enum job_step
job_fail(struct job *j, const char *err)
{
	failed(j, err);
	/* The tasks just planned were not queued: nothing of it runs. */
	j->phase_left = 0;
	return JOB_FAILED;
}

const char *
job_error(const struct job *j)
{
	return j->error;
}

json_t *
job_summary(const struct job *j)
{
	return j->summary;
}

uint32_t
job_planned(const struct job *j)
{
	return j->planned;
}

void
job_free(struct job *j)
{
	if (j == NULL)
		return;
	if (j->state)
		j->ops->free(j->state);
	json_decref(j->summary);
	free(j->error);
	free(j);
}
