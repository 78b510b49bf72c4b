/* batches: submitted batches and their results (see batches.h). */
#include "batches.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "ctl.h"
#include "jobs.h"
#include "jsonl.h"
#include "log.h"
#include "util.h"

struct batch {
	long id;
	char *name;
	char *dir;
	uint32_t total, ok, failed;
	double t0, seconds;		/* monotonic start, duration */
	struct jsonl out;		/* results.jsonl */
	int finished;
	const struct ft_plugin *plugin;	/* the planner of a job batch, or NULL */
	struct job *job;
};

void
batches_init(struct batches *bs, const struct ft_config *cfg,
	     const struct ft_plugins *pl, struct sched *sched,
	     struct events *ev, const struct batches_ops *ops)
{
	memset(bs, 0, sizeof(*bs));
	bs->cfg = cfg;
	bs->pl = pl;
	bs->sched = sched;
	bs->ev = ev;
	bs->ops = *ops;
}

/* The next free batch id: one past the last one, or past the highest
 * directory in batches/ at the master's first submission. */
static long
next_id(const struct batches *bs)
{
	char *dir;
	DIR *d;
	struct dirent *e;
	long max = 0;

	if (bs->n > 0)
		return bs->v[bs->n - 1]->id + 1;
	dir = ft_asprintf("%s/batches", bs->cfg->state_dir);
	d = opendir(dir);
	free(dir);
	if (d == NULL)
		return 1;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long v = strtol(e->d_name, &end, 10);

		if (*end == '\0' && v > max)
			max = v;
	}
	closedir(d);
	return max + 1;
}

struct batch *
batches_find(const struct batches *bs, long id)
{
	long first;

	/* Ids are handed out consecutively for the master's life. */
	if (bs->n == 0)
		return NULL;
	first = bs->v[0]->id;
	if (id < first || id >= first + bs->n)
		return NULL;
	return bs->v[id - first];
}

long
batch_id(const struct batch *b)
{
	return b->id;
}

int
batch_finished(const struct batch *b)
{
	return b->finished;
}

json_t *
batch_json(const struct batch *b)
{
	const struct ctl_col *c = ctl_batch_cols;
	json_t *o = json_object();
	const char *error = b->job ? job_error(b->job) : NULL;

	ctl_row_int(o, &c[CTL_B_ID], b->id);
	ctl_row_str(o, &c[CTL_B_NAME], b->name);
	ctl_row_int(o, &c[CTL_B_TOTAL], b->total);
	ctl_row_int(o, &c[CTL_B_DONE], b->ok + b->failed);
	ctl_row_int(o, &c[CTL_B_OK], b->ok);
	ctl_row_int(o, &c[CTL_B_FAILED], b->failed);
	ctl_row_str(o, &c[CTL_B_STATE], b->finished ? "finished" : "running");
	ctl_row_num(o, &c[CTL_B_SECONDS],
		    b->finished ? b->seconds : ft_now() - b->t0);
	if (b->plugin)
		json_object_set_new(o, "job", json_string(b->plugin->name));
	if (error)
		json_object_set_new(o, "error", json_string(error));
	if (b->job && job_summary(b->job))
		json_object_set(o, "result", job_summary(b->job));
	return o;
}

/* Create the batch's directory and files.  0 or -1 with ERR. */
static int
batch_files(struct batches *bs, struct batch *b, json_t *batch, char *err,
	    size_t n)
{
	char *path, *text;
	int rc;

	b->dir = ft_asprintf("%s/batches/%ld", bs->cfg->state_dir, b->id);
	if (ft_mkdirs(b->dir) == -1) {
		snprintf(err, n, "%s: %s", b->dir, strerror(errno));
		return -1;
	}
	path = ft_asprintf("%s/batch.json", b->dir);
	/* One string and one write: json_dump_file writes token by token. */
	text = json_dumps(batch, JSON_COMPACT);
	rc = text ? ft_write_file_atomic(path, text, strlen(text)) : -1;
	free(text);
	free(path);
	if (rc == -1) {
		snprintf(err, n, "%s/batch.json: cannot write", b->dir);
		return -1;
	}
	path = ft_asprintf("%s/results.jsonl", b->dir);
	rc = jsonl_open(&b->out, path);
	if (rc == -1)
		snprintf(err, n, "%s: %s", path, strerror(errno));
	free(path);
	return rc;
}

static void
batch_free(struct batch *b)
{
	if (b == NULL)
		return;
	job_free(b->job);
	jsonl_close(&b->out);
	free(b->name);
	free(b->dir);
	free(b);
}

static void
free_specs(char **specs)
{
	char **p;

	for (p = specs; p && *p; p++)
		free(*p);
	free(specs);
}

/* Encode every task of TASKS; each must fit in one message.  The specs
 * (NULL-terminated array), or NULL with ERR. */
static char **
encode_specs(json_t *tasks, char *err, size_t n)
{
	json_t *task;
	char **specs = ft_calloc(json_array_size(tasks) + 1, sizeof(char *));
	size_t i;

	json_array_foreach(tasks, i, task) {
		specs[i] = json_dumps(task, JSON_COMPACT);
		if (specs[i] != NULL && strlen(specs[i]) <= FT_SPEC_MAX)
			continue;
		snprintf(err, n, "batch: tasks[%zu]: task is %zu bytes encoded, "
			 "more than %d", i, specs[i] ? strlen(specs[i]) : 0,
			 FT_SPEC_MAX);
		free_specs(specs);
		return NULL;
	}
	return specs;
}

/* Queue TASKS (their SPECS taken over) after the tasks B has. */
static void
queue_tasks(struct batches *bs, struct batch *b, json_t *tasks, char **specs)
{
	json_t *task;
	size_t i;

	json_array_foreach(tasks, i, task) {
		double timeout = ft_task_timeout(task, bs->cfg->task_timeout);

		sched_add(bs->sched, (uint32_t)b->id, b->total + (uint32_t)i,
			  specs[i], (uint32_t)strlen(specs[i]), timeout);
	}
	b->total += (uint32_t)json_array_size(tasks);
	free(specs);
}

/* The tasks of BATCH: its own, or the first phase of its job.  A new
 * reference, or NULL with ERR. */
static json_t *
first_tasks(struct batches *bs, struct batch *b, json_t *batch, char *err,
	    size_t n)
{
	char *dir;
	json_t *tasks = NULL;

	if (b->plugin == NULL)
		return json_incref(json_object_get(batch, "tasks"));
	dir = ft_asprintf("%s/job", b->dir);
	if (ft_mkdirs(dir) == -1)
		snprintf(err, n, "%s: %s", dir, strerror(errno));
	else
		b->job = job_start(b->plugin, bs->pl,
				   json_object_get(batch, "job"), dir, &tasks,
				   err, n);
	free(dir);
	return b->job ? tasks : NULL;
}

long
batches_submit(struct batches *bs, json_t *batch, char *err, size_t n)
{
	struct batch *b = ft_calloc(1, sizeof(*b));
	json_t *tasks = NULL;
	char **specs = NULL;

	b->out.fd = -1;
	b->id = next_id(bs);
	b->name = ft_strdup(ft_batch_name(batch));
	b->plugin = ft_batch_job(batch, bs->pl);
	if (batch_files(bs, b, batch, err, n) == -1 ||
	    (tasks = first_tasks(bs, b, batch, err, n)) == NULL ||
	    (specs = encode_specs(tasks, err, n)) == NULL) {
		json_decref(tasks);
		batch_free(b);
		return -1;
	}
	b->t0 = ft_now();
	queue_tasks(bs, b, tasks, specs);
	json_decref(tasks);
	bs->v = ft_realloc(bs->v, (size_t)(bs->n + 1) * sizeof(*bs->v));
	bs->v[bs->n++] = b;
	ev_batch_submitted(bs->ev, b->id, b->name, b->total,
			   b->plugin ? b->plugin->name : NULL);
	log_info("batch %ld (%s): %u tasks", b->id, b->name, b->total);
	bs->ops.queued(bs->ops.ctx);
	return b->id;
}

static void
write_summary(struct batch *b)
{
	json_t *summary = batch_json(b);
	char *text = json_dumps(summary, JSON_COMPACT);
	char *path = ft_asprintf("%s/summary.json", b->dir);

	if (text == NULL || ft_write_file_atomic(path, text, strlen(text)) == -1)
		log_warn("%s", path);
	free(path);
	free(text);
	json_decref(summary);
}

static void
finish(struct batches *bs, struct batch *b)
{
	const char *error = b->job ? job_error(b->job) : NULL;

	b->finished = 1;
	b->seconds = ft_now() - b->t0;
	jsonl_flush(&b->out);
	write_summary(b);
	ev_batch_done(bs->ev, b->id, b->total, b->ok, b->failed, b->seconds,
		      error);
	if (error)
		log_warnx("batch %ld (%s): job failed: %s", b->id, b->name,
			  error);
	log_info("batch %ld (%s) finished: %u ok, %u failed in %.3f s", b->id,
		 b->name, b->ok, b->failed, b->seconds);
	bs->ops.finished(bs->ops.ctx, b);
}

/* Queue the next phase of B's job (TASKS taken over); a phase that cannot
 * be queued fails the job. */
static void
next_phase(struct batches *bs, struct batch *b, json_t *tasks)
{
	char err[512] = "";
	char **specs = encode_specs(tasks, err, sizeof(err));

	if (specs == NULL) {
		json_decref(tasks);
		if (job_fail(b->job, err) == JOB_FAILED)
			finish(bs, b);
		return;
	}
	queue_tasks(bs, b, tasks, specs);
	json_decref(tasks);
	log_info("batch %ld (%s): next phase, %u tasks in all", b->id, b->name,
		 b->total);
	bs->ops.queued(bs->ops.ctx);
}

/* Count task INDEX of B as ended (OK, its output or REASON), finishing B
 * after its last task, or moving a job to its next phase. */
static void
count(struct batches *bs, struct batch *b, uint32_t index, int ok,
      const char *out, size_t out_len, const char *reason)
{
	json_t *tasks = NULL;

	if (ok)
		b->ok++;
	else
		b->failed++;
	if (b->job == NULL) {
		if (b->ok + b->failed == b->total)
			finish(bs, b);
		return;
	}
	switch (job_task_ended(b->job, index, ok, out, out_len, reason,
			       &tasks)) {
	case JOB_PHASE:
		next_phase(bs, b, tasks);
		break;
	case JOB_COMPLETE:
	case JOB_FAILED:
		finish(bs, b);
		break;
	case JOB_RUNNING:
		break;
	}
}

void
batches_record(struct batches *bs, uint64_t tid, int worker,
	       const struct proto_result *r)
{
	const struct sched_task *t = sched_task(bs->sched, tid);
	struct batch *b = batches_find(bs, t->batch);
	struct jsonl *o = &b->out;
	char reason[256];

	jsonl_begin(o);
	jsonl_int(o, "task", t->index);
	jsonl_int(o, "attempt", r->attempt);
	jsonl_int(o, "worker", worker);
	jsonl_str(o, "status", r->ok ? "ok" : "failed");
	jsonl_int(o, "exit", r->exit_code);
	jsonl_secs(o, "seconds", r->seconds);
	jsonl_strn(o, "stdout", r->out, r->out_len);
	jsonl_strn(o, "stderr", r->err, r->err_len);
	if (!r->ok)
		jsonl_strn(o, "reason", r->reason, r->reason_len);
	jsonl_end(o);
	ev_task_done(bs->ev, t->batch, t->index, r->attempt, worker,
		     r->ok ? "ok" : "failed");
	snprintf(reason, sizeof(reason), "%.*s", (int)r->reason_len, r->reason);
	count(bs, b, t->index, r->ok, r->out, r->out_len, reason);
}

void
batches_fail(struct batches *bs, uint64_t tid, const char *reason)
{
	const struct sched_task *t = sched_task(bs->sched, tid);
	struct batch *b = batches_find(bs, t->batch);
	struct jsonl *o = &b->out;

	jsonl_begin(o);
	jsonl_int(o, "task", t->index);
	jsonl_int(o, "attempt", t->attempts);
	jsonl_int(o, "worker", -1);
	jsonl_str(o, "status", "failed");
	jsonl_int(o, "exit", -1);
	jsonl_str(o, "stdout", "");
	jsonl_str(o, "reason", reason);
	jsonl_end(o);
	ev_task_failed(bs->ev, t->batch, t->index, reason);
	log_warnx("batch %ld task %u failed: %s", b->id, t->index, reason);
	count(bs, b, t->index, 0, "", 0, reason);
}

void
batches_flush(struct batches *bs)
{
	int i;

	for (i = 0; i < bs->n; i++)
		if (!bs->v[i]->finished)
			jsonl_flush(&bs->v[i]->out);
}

void
batches_close(struct batches *bs)
{
	int i;

	for (i = 0; i < bs->n; i++)
		batch_free(bs->v[i]);
	free(bs->v);
	bs->v = NULL;
	bs->n = 0;
}
