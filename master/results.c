/*
 * results: batches and their results.
 *
 * A batch lives in <state_dir>/batches/<id>/: batch.json as submitted,
 * results.jsonl with one line per task (written once, when the task ends),
 * and summary.json when the batch has finished.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "log.h"
#include "master.h"
#include "proto.h"

struct batch {
	long id;
	char *name;
	char *dir;
	uint64_t first_tid;
	uint32_t total, ok, failed;
	double submitted;		/* wall clock */
	double t0, seconds;		/* monotonic start, duration */
	struct jsonl out;
	int finished;
	const struct ft_plugin *job;	/* the planner of a job batch, or NULL */
	void *job_state;
	uint32_t phase_first;		/* index of the phase's first task */
	uint32_t phase_left;		/* tasks of the phase not yet ended */
	char *error;			/* why the job failed */
	json_t *job_summary;
};

/* The next free batch id: one past the highest directory in batches/. */
static long
next_id(struct master *m)
{
	char *dir = ft_asprintf("%s/batches", m->cfg.state_dir);
	DIR *d = opendir(dir);
	struct dirent *e;
	long max = 0;

	free(dir);
	if (m->nbatches > 0)
		return m->batches[m->nbatches - 1]->id + 1;
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
results_find(struct master *m, long id)
{
	long first;

	/* Ids are handed out consecutively for the master's life. */
	if (m->nbatches == 0)
		return NULL;
	first = m->batches[0]->id;
	if (id < first || id >= first + m->nbatches)
		return NULL;
	return m->batches[id - first];
}

int
results_finished(const struct batch *b)
{
	return b->finished;
}

json_t *
results_batch_json(const struct batch *b)
{
	json_t *o = json_pack("{s:I, s:s, s:I, s:I, s:I, s:I, s:s, s:f}",
			 "id", (json_int_t)b->id, "name", b->name,
			 "total", (json_int_t)b->total,
			 "done", (json_int_t)(b->ok + b->failed),
			 "ok", (json_int_t)b->ok,
			 "failed", (json_int_t)b->failed,
			 "state", b->finished ? "finished" : "running",
			 "seconds", b->finished ? b->seconds : ft_now() - b->t0);

	if (b->job)
		json_object_set_new(o, "job", json_string(b->job->name));
	if (b->error)
		json_object_set_new(o, "error", json_string(b->error));
	if (b->job_summary)
		json_object_set(o, "result", b->job_summary);
	return o;
}

/* Create the batch's directory and files.  0 or -1 with ERR. */
static int
batch_files(struct master *m, struct batch *b, json_t *batch, char *err,
	    size_t n)
{
	char *path, *text;
	int rc;

	b->dir = ft_asprintf("%s/batches/%ld", m->cfg.state_dir, b->id);
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
	if (b->job && b->job_state)
		b->job->job->free(b->job_state);
	json_decref(b->job_summary);
	free(b->error);
	jsonl_close(&b->out);
	free(b->name);
	free(b->dir);
	free(b);
}

/* Encode every task of BATCH; each must fit in one message.  The specs
 * (NULL-terminated array), or NULL with ERR. */
static char **
encode_specs(json_t *tasks, char *err, size_t n)
{
	json_t *task;
	char **specs = ft_calloc(json_array_size(tasks) + 1, sizeof(char *));
	size_t i, k;

	json_array_foreach(tasks, i, task) {
		specs[i] = json_dumps(task, JSON_COMPACT);
		if (specs[i] != NULL && strlen(specs[i]) <= FT_SPEC_MAX)
			continue;
		snprintf(err, n, "batch: tasks[%zu]: task is %zu bytes encoded, "
			 "more than %d", i, specs[i] ? strlen(specs[i]) : 0,
			 FT_SPEC_MAX);
		for (k = 0; k <= i; k++)
			free(specs[k]);
		free(specs);
		return NULL;
	}
	return specs;
}

/* Queue TASKS as the next phase of batch B; their SPECS are taken over. */
static void
queue_tasks(struct master *m, struct batch *b, json_t *tasks, char **specs)
{
	json_t *task;
	size_t i;

	b->phase_first = b->total;
	b->phase_left = (uint32_t)json_array_size(tasks);
	json_array_foreach(tasks, i, task) {
		double timeout = ft_task_timeout(task, m->cfg.task_timeout);

		sched_add(m->sched, (uint32_t)b->id, b->total + (uint32_t)i,
			  specs[i], (uint32_t)strlen(specs[i]), timeout);
	}
	b->total += (uint32_t)json_array_size(tasks);
	free(specs);
}

/* The first phase of job batch B, planned by its plugin.  The tasks (a new
 * reference), or NULL with ERR. */
static json_t *
job_start(struct batch *b, json_t *batch, char *err, size_t n)
{
	char *dir = ft_asprintf("%s/job", b->dir);
	json_t *tasks = json_array();

	if (ft_mkdirs(dir) == -1) {
		snprintf(err, n, "%s: %s", dir, strerror(errno));
	} else {
		b->job_state = b->job->job->start(json_object_get(batch, "job"),
						  dir, tasks, err, n);
		if (b->job_state && json_array_size(tasks) == 0)
			snprintf(err, n, "the job planned no tasks");
	}
	free(dir);
	if (b->job_state == NULL || json_array_size(tasks) == 0) {
		json_decref(tasks);
		return NULL;
	}
	return tasks;
}

static void
free_specs(char **specs)
{
	char **p;

	for (p = specs; p && *p; p++)
		free(*p);
	free(specs);
}

long
results_submit(struct master *m, json_t *batch, char *err, size_t n)
{
	struct batch *b = ft_calloc(1, sizeof(*b));
	json_t *tasks = NULL;
	char **specs = NULL;

	b->out.fd = -1;
	b->id = next_id(m);
	b->name = ft_strdup(ft_batch_name(batch));
	b->job = ft_batch_job(batch, &m->plugins);
	if (batch_files(m, b, batch, err, n) == -1)
		goto fail;
	tasks = b->job ? job_start(b, batch, err, n)
		       : json_incref(json_object_get(batch, "tasks"));
	if (tasks == NULL || (specs = encode_specs(tasks, err, n)) == NULL)
		goto fail;
	b->submitted = ft_wall();
	b->t0 = ft_now();
	queue_tasks(m, b, tasks, specs);
	json_decref(tasks);
	m->batches = ft_realloc(m->batches,
				(size_t)(m->nbatches + 1) * sizeof(*m->batches));
	m->batches[m->nbatches++] = b;
	jsonl_event(&m->events, "batch_submitted");
	jsonl_int(&m->events, "batch", b->id);
	jsonl_str(&m->events, "name", b->name);
	jsonl_int(&m->events, "tasks", b->total);
	if (b->job)
		jsonl_str(&m->events, "job", b->job->name);
	jsonl_end(&m->events);
	log_info("batch %ld (%s): %u tasks", b->id, b->name, b->total);
	registry_dispatch_all(m);
	return b->id;
fail:
	json_decref(tasks);
	free_specs(specs);
	batch_free(b);
	return -1;
}

static void
finish(struct master *m, struct batch *b)
{
	char *path, *text;
	json_t *summary;

	b->finished = 1;
	b->seconds = ft_now() - b->t0;
	if (b->job && !b->error)
		b->job_summary = b->job->job->summary(b->job_state);
	jsonl_flush(&b->out);
	summary = results_batch_json(b);
	text = json_dumps(summary, JSON_COMPACT);
	path = ft_asprintf("%s/summary.json", b->dir);
	if (ft_write_file_atomic(path, text, strlen(text)) == -1)
		log_warn("%s", path);
	free(path);
	free(text);
	json_decref(summary);
	jsonl_event(&m->events, "batch_done");
	jsonl_int(&m->events, "batch", b->id);
	jsonl_int(&m->events, "total", b->total);
	jsonl_int(&m->events, "ok", b->ok);
	jsonl_int(&m->events, "failed", b->failed);
	jsonl_num(&m->events, "seconds", b->seconds);
	if (b->error)
		jsonl_str(&m->events, "error", b->error);
	jsonl_end(&m->events);
	events_flush(m);
	if (b->error)
		log_warnx("batch %ld (%s): job failed: %s", b->id, b->name,
			  b->error);
	log_info("batch %ld (%s) finished: %u ok, %u failed in %.3f s", b->id,
		 b->name, b->ok, b->failed, b->seconds);
	control_batch_done(m, b);
}

/* The job of B failed for ERR (the first reason is kept). */
static void
job_error(struct batch *b, const char *err)
{
	if (b->error == NULL)
		b->error = ft_strdup(err);
}

/* The phase of job batch B has ended: plan the next one, or finish. */
static void
next_phase(struct master *m, struct batch *b)
{
	json_t *tasks = json_array();
	char err[512] = "", **specs;

	if (b->error == NULL &&
	    b->job->job->next(b->job_state, tasks, err, sizeof(err)) == -1)
		job_error(b, err);
	if (b->error || json_array_size(tasks) == 0) {
		json_decref(tasks);
		finish(m, b);
		return;
	}
	specs = encode_specs(tasks, err, sizeof(err));
	if (specs == NULL) {
		job_error(b, err);
		json_decref(tasks);
		finish(m, b);
		return;
	}
	queue_tasks(m, b, tasks, specs);
	json_decref(tasks);
	log_info("batch %ld (%s): next phase, %u tasks in all", b->id, b->name,
		 b->total);
	registry_dispatch_all(m);
}

/* Count task INDEX of B as ended (OK, its output or REASON), finishing B
 * after its last task, or moving a job to its next phase. */
static void
count(struct master *m, struct batch *b, uint32_t index, int ok,
      const char *out, size_t out_len, const char *reason)
{
	char err[512] = "";

	if (ok)
		b->ok++;
	else
		b->failed++;
	if (b->job == NULL) {
		if (b->ok + b->failed == b->total)
			finish(m, b);
		return;
	}
	if (b->error == NULL &&
	    b->job->job->task_done(b->job_state, index - b->phase_first, ok,
				   out, out_len, reason, err,
				   sizeof(err)) == -1)
		job_error(b, err);
	if (--b->phase_left == 0)
		next_phase(m, b);
}

void
results_record(struct master *m, uint64_t tid, int worker, const void *result)
{
	const struct proto_result *r = result;
	const struct sched_task *t = sched_task(m->sched, tid);
	struct batch *b = results_find(m, t->batch);
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
	if (m->cfg.task_events) {
		jsonl_event(&m->events, "task_done");
		jsonl_int(&m->events, "batch", t->batch);
		jsonl_int(&m->events, "task", t->index);
		jsonl_int(&m->events, "attempt", r->attempt);
		jsonl_int(&m->events, "worker", worker);
		jsonl_str(&m->events, "status", r->ok ? "ok" : "failed");
		jsonl_end(&m->events);
	}
	snprintf(reason, sizeof(reason), "%.*s", (int)r->reason_len, r->reason);
	count(m, b, t->index, r->ok, r->out, r->out_len, reason);
}

void
results_fail(struct master *m, uint64_t tid, const char *reason)
{
	const struct sched_task *t = sched_task(m->sched, tid);
	struct batch *b = results_find(m, t->batch);
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
	jsonl_event(&m->events, "task_failed");
	jsonl_int(&m->events, "batch", t->batch);
	jsonl_int(&m->events, "task", t->index);
	jsonl_str(&m->events, "reason", reason);
	jsonl_end(&m->events);
	log_warnx("batch %ld task %u failed: %s", b->id, t->index, reason);
	count(m, b, t->index, 0, "", 0, reason);
}

void
results_flush(struct master *m)
{
	int i;

	for (i = 0; i < m->nbatches; i++)
		if (!m->batches[i]->finished)
			jsonl_flush(&m->batches[i]->out);
}

void
results_close(struct master *m)
{
	int i;

	for (i = 0; i < m->nbatches; i++)
		batch_free(m->batches[i]);
	free(m->batches);
	m->batches = NULL;
	m->nbatches = 0;
}
