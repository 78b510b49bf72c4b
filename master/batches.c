/* batches: submitted batches and their results (see batches.h). */
#include "batches.h"

#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "ctl.h"
#include "jobs.h"
#include "jsonl.h"
#include "log.h"
#include "util.h"

#define KEEP_FINISHED 256	/* finished batches kept in memory */

enum bstate { B_INTAKE = 1, B_RUNNING, B_FINISHED };

struct batch {
	long id;
	enum bstate state;
	char *name;
	char *dir;
	uint32_t total, ok, failed;
	uint32_t reassigned;		/* instances lost and queued again */
	double t0, seconds;		/* monotonic start, duration */
	struct jsonl out;		/* results.jsonl, while running */
	char *text;			/* the specs of a batch of tasks */
	char **phases;			/* the specs of each phase of a job */
	int nphases;
	const struct ft_plugin *plugin;	/* the planner of a job batch, or NULL */
	struct job *job;		/* while running */
	char *error;			/* why its job failed, once finished */
	json_t *result;			/* its job's summary, once finished */
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

/* One past the highest batch directory in the state dir. */
static long
first_free_id(const struct batches *bs)
{
	char *dir = ft_asprintf("%s/batches", bs->cfg->state_dir);
	DIR *d = opendir(dir);
	struct dirent *e;
	long max = 0;

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
	if (id < bs->first || id >= bs->first + bs->n)
		return NULL;
	return bs->v[id - bs->first];
}

long
batch_id(const struct batch *b)
{
	return b->id;
}

int
batch_finished(const struct batch *b)
{
	return b->state == B_FINISHED;
}

uint32_t
batch_total(const struct batch *b)
{
	return b->total;
}

uint32_t
batch_ended(const struct batch *b)
{
	return b->ok + b->failed;
}

int
batch_listed(const struct batch *b)
{
	return b->state != B_INTAKE;
}

static const char *
batch_error(const struct batch *b)
{
	return b->job ? job_error(b->job) : b->error;
}

static json_t *
batch_result(const struct batch *b)
{
	return b->job ? job_summary(b->job) : b->result;
}

json_t *
batch_json(const struct batch *b)
{
	const struct ctl_col *c = ctl_batch_cols;
	json_t *o = json_object();

	ctl_row_int(o, &c[CTL_B_ID], b->id);
	ctl_row_str(o, &c[CTL_B_NAME], b->name);
	ctl_row_int(o, &c[CTL_B_TOTAL], b->total);
	ctl_row_int(o, &c[CTL_B_DONE], b->ok + b->failed);
	ctl_row_int(o, &c[CTL_B_OK], b->ok);
	ctl_row_int(o, &c[CTL_B_FAILED], b->failed);
	ctl_row_int(o, &c[CTL_B_REASSIGNED], b->reassigned);
	ctl_row_str(o, &c[CTL_B_STATE], batch_finished(b) ? "finished"
							  : "running");
	ctl_row_num(o, &c[CTL_B_SECONDS],
		    batch_finished(b) ? b->seconds : ft_now() - b->t0);
	if (b->plugin)
		json_object_set_new(o, "job", json_string(b->plugin->name));
	if (batch_error(b))
		json_object_set_new(o, "error", json_string(batch_error(b)));
	if (batch_result(b))
		json_object_set(o, "result", batch_result(b));
	return o;
}

json_t *
batches_lookup(const struct batches *bs, long id, int *finished)
{
	struct batch *b = batches_find(bs, id);
	json_t *row;
	char *path;

	if (b && batch_listed(b)) {
		*finished = batch_finished(b);
		return batch_json(b);
	}
	if (b || id <= 0 || (bs->next > 0 && id >= bs->next))
		return NULL;
	path = ft_asprintf("%s/batches/%ld/summary.json", bs->cfg->state_dir,
			   id);
	row = json_load_file(path, 0, NULL);
	free(path);
	if (row && !json_is_object(row)) {
		json_decref(row);
		row = NULL;
	}
	*finished = row != NULL;
	return row;
}

/* ---- reservation ---- */

long
batches_reserve(struct batches *bs, char **dir)
{
	struct batch *b = ft_calloc(1, sizeof(*b));

	if (bs->next == 0)
		bs->next = first_free_id(bs);
	if (bs->n == 0)
		bs->first = bs->next;
	if (bs->first + bs->n != bs->next) {
		/* Cannot happen: ids are handed out one after another. */
		log_warnx("batch ids out of step (%ld, %ld)", bs->first + bs->n,
			  bs->next);
	}
	b->id = bs->next++;
	b->state = B_INTAKE;
	b->out.fd = -1;
	b->dir = ft_asprintf("%s/batches/%ld", bs->cfg->state_dir, b->id);
	if (bs->n == bs->cap) {
		bs->cap = bs->cap ? bs->cap * 2 : 64;
		bs->v = ft_realloc(bs->v, (size_t)bs->cap * sizeof(*bs->v));
	}
	bs->v[bs->n++] = b;
	*dir = ft_strdup(b->dir);
	return b->id;
}

static void
batch_free(struct batch *b)
{
	int i;

	if (b == NULL)
		return;
	job_free(b->job);
	jsonl_close(&b->out);
	free(b->text);
	for (i = 0; i < b->nphases; i++)
		free(b->phases[i]);
	free(b->phases);
	free(b->error);
	json_decref(b->result);
	free(b->name);
	free(b->dir);
	free(b);
}

/* Drop the slots of BS that are gone from its front. */
static void
trim(struct batches *bs)
{
	int k = 0;

	while (k < bs->n && bs->v[k] == NULL)
		k++;
	if (k == 0)
		return;
	memmove(bs->v, bs->v + k, (size_t)(bs->n - k) * sizeof(*bs->v));
	bs->n -= k;
	bs->first += k;
}

void
batches_release(struct batches *bs, long id)
{
	struct batch *b = batches_find(bs, id);

	if (b == NULL)
		return;
	if (ft_rmtree(b->dir) == -1)
		log_warn("%s", b->dir);
	bs->v[id - bs->first] = NULL;
	batch_free(b);
	trim(bs);
}

/* ---- queueing ---- */

/* Task TID is of type KIND (a plugin's index, -1 unknown): label it and
 * count it. */
static void
kind_of(struct batches *bs, uint64_t tid, int kind)
{
	if (kind < 0 || kind >= STATS_MAX_TYPES)
		kind = STATS_OTHER;
	sched_set_kind(bs->sched, tid, (uint8_t)kind);
	if (bs->stats)
		stats_type(bs->stats, kind)->submitted++;
}

/* Queue the tasks of BT, whose specs are spans of its text. */
static void
queue_text(struct batches *bs, struct batch *b, struct batch_text *bt)
{
	uint32_t i;

	for (i = 0; i < bt->ntasks; i++) {
		const struct bt_span *sp = &bt->spans[i];
		uint64_t tid;

		tid = sched_add(bs->sched, (uint32_t)b->id, b->total + i,
				bt->text + sp->off, sp->len,
				sp->timeout > 0 ? sp->timeout :
				bs->cfg->task_timeout);
		kind_of(bs, tid, sp->kind);
	}
	b->total += bt->ntasks;
}

/* Queue TASKS (a phase of B's job), printed into one buffer that B keeps
 * until it ends.  0, or -1 with ERR when a task is too big to send. */
static int
queue_phase(struct batches *bs, struct batch *b, json_t *tasks, char *err,
	    size_t n)
{
	size_t count = json_array_size(tasks), i, *off;
	struct ft_buf buf = { 0 };
	json_t *t;

	off = ft_calloc(count + 1, sizeof(*off));
	json_array_foreach(tasks, i, t) {
		char *s = json_dumps(t, JSON_COMPACT);
		size_t len = s ? strlen(s) : 0;

		if (s == NULL || len > FT_SPEC_MAX) {
			snprintf(err, n, "tasks[%zu]: task is %zu bytes encoded, "
				 "more than %d", i, len, FT_SPEC_MAX);
			free(s);
			free(off);
			ft_buf_free(&buf);
			return -1;
		}
		off[i] = buf.len;
		ft_buf_add(&buf, s, len);
		free(s);
	}
	off[count] = buf.len;
	json_array_foreach(tasks, i, t)
		kind_of(bs, sched_add(bs->sched, (uint32_t)b->id,
				      b->total + (uint32_t)i, buf.data + off[i],
				      (uint32_t)(off[i + 1] - off[i]),
				      ft_task_timeout(t, bs->cfg->task_timeout)),
			ft_plugins_index(bs->pl, json_string_value(
						 json_object_get(t, "type"))));
	b->total += (uint32_t)count;
	b->phases = ft_realloc(b->phases,
			       (size_t)(b->nphases + 1) * sizeof(*b->phases));
	b->phases[b->nphases++] = buf.data;
	free(off);
	return 0;
}

int
batches_accept(struct batches *bs, long id, struct batch_text *bt,
	       struct job *job, json_t *tasks, char *err, size_t n)
{
	struct batch *b = batches_find(bs, id);
	char *path;
	int rc;

	if (b == NULL || b->state != B_INTAKE) {
		snprintf(err, n, "batch %ld was not reserved", id);
		return -1;
	}
	path = ft_asprintf("%s/results.jsonl", b->dir);
	rc = jsonl_open(&b->out, path);
	if (rc == -1)
		snprintf(err, n, "%s: %s", path, strerror(errno));
	free(path);
	if (rc == -1 || (job && queue_phase(bs, b, tasks, err, n) == -1)) {
		jsonl_close(&b->out);
		return -1;
	}
	b->name = ft_strdup(bt->name);
	b->state = B_RUNNING;
	b->t0 = ft_now();
	if (job) {
		b->job = job;
		b->plugin = ft_plugins_find(bs->pl, json_string_value(
			json_object_get(bt->job, "type")));
		json_decref(tasks);
		batch_text_free(bt);
	} else {
		queue_text(bs, b, bt);
		b->text = bt->text;	/* the specs point into it */
		bt->text = NULL;
		batch_text_free(bt);
	}
	if (bs->stats)
		bs->stats->batches_submitted++;
	ev_batch_submitted(bs->ev, b->id, b->name, b->total,
			   b->plugin ? b->plugin->name : NULL);
	log_info("batch %ld (%s): %u tasks", b->id, b->name, b->total);
	bs->ops.queued(bs->ops.ctx);
	return 0;
}

long
batches_submit(struct batches *bs, json_t *batch, char *err, size_t n)
{
	char *text = json_dumps(batch, JSON_COMPACT), *dir, *path;
	struct batch_text bt;
	struct job *job = NULL;
	json_t *tasks = NULL;
	long id = batches_reserve(bs, &dir);

	path = ft_asprintf("%s/batch.json", dir);
	if (text == NULL || ft_mkdirs(dir) == -1 ||
	    ft_write_file_atomic(path, text, strlen(text)) == -1) {
		snprintf(err, n, "%s: cannot write", path);
		free(text);
		goto fail;
	}
	free(path);
	path = ft_asprintf("%s/job", dir);
	if (ft_mkdirs(path) == -1) {
		snprintf(err, n, "%s: %s", path, strerror(errno));
		free(text);
		goto fail;
	}
	if (batch_text_read(&bt, "batch", text, strlen(text), bs->pl, 1, err,
			    n) == -1)
		goto fail;
	if (bt.job)
		job = job_start(ft_plugins_find(bs->pl, json_string_value(
					json_object_get(bt.job, "type"))),
				bs->pl, bt.job, path, &tasks, err, n);
	if ((bt.job && job == NULL) ||
	    batches_accept(bs, id, &bt, job, tasks, err, n) == -1) {
		batch_text_free(&bt);
		job_free(job);
		json_decref(tasks);
		goto fail;
	}
	free(path);
	free(dir);
	return id;
fail:
	free(path);
	free(dir);
	batches_release(bs, id);
	return -1;
}

/* ---- the end of a batch ---- */

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

/* Keep only B's counts: its file, specs and job go. */
static void
compact(struct batch *b)
{
	int i;

	jsonl_close(&b->out);
	free(b->text);
	b->text = NULL;
	for (i = 0; i < b->nphases; i++)
		free(b->phases[i]);
	free(b->phases);
	b->phases = NULL;
	b->nphases = 0;
	if (b->job) {
		if (job_error(b->job))
			b->error = ft_strdup(job_error(b->job));
		b->result = json_incref(job_summary(b->job));
		job_free(b->job);
		b->job = NULL;
	}
}

/* Past KEEP_FINISHED finished batches in memory, the oldest goes: it is
 * read back from its summary.json when asked for. */
static void
evict(struct batches *bs)
{
	int i;

	for (i = 0; i < bs->n && bs->nfinished > KEEP_FINISHED; i++) {
		struct batch *b = bs->v[i];

		if (b == NULL || !batch_finished(b))
			continue;
		bs->v[i] = NULL;
		batch_free(b);
		bs->nfinished--;
	}
	trim(bs);
}

static void
finish(struct batches *bs, struct batch *b)
{
	const char *error;

	b->state = B_FINISHED;
	b->seconds = ft_now() - b->t0;
	jsonl_flush(&b->out);
	compact(b);
	write_summary(b);
	error = batch_error(b);
	ev_batch_done(bs->ev, b->id, b->total, b->ok, b->failed, b->seconds,
		      error);
	if (error)
		log_warnx("batch %ld (%s): job failed: %s", b->id, b->name,
			  error);
	log_info("batch %ld (%s) finished: %u ok, %u failed in %.3f s", b->id,
		 b->name, b->ok, b->failed, b->seconds);
	bs->nfinished++;
	if (bs->stats)
		bs->stats->batches_finished++;
	bs->ops.finished(bs->ops.ctx, b);
	evict(bs);
	/* What the batch's tasks took goes back to the system, also from the
	 * intake thread's arena. */
	malloc_trim(0);
}

/* Queue the next phase of B's job (TASKS taken over); a phase that cannot
 * be queued fails the job. */
static void
next_phase(struct batches *bs, struct batch *b, json_t *tasks)
{
	char err[512] = "";

	if (queue_phase(bs, b, tasks, err, sizeof(err)) == -1) {
		json_decref(tasks);
		if (job_fail(b->job, err) == JOB_FAILED)
			finish(bs, b);
		return;
	}
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

/* The running batch ID, or NULL (logged: a result for nothing). */
static struct batch *
running(struct batches *bs, long id)
{
	struct batch *b = batches_find(bs, id);

	if (b && b->state == B_RUNNING)
		return b;
	log_warnx("a result for batch %ld, which is not running", id);
	return NULL;
}

void
batches_record(struct batches *bs, uint64_t tid, int worker,
	       const struct proto_result *r)
{
	const struct sched_task *t = sched_task(bs->sched, tid);
	struct batch *b = t ? running(bs, t->batch) : NULL;
	struct jsonl *o;
	char reason[256];

	if (b == NULL)
		return;
	o = &b->out;
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
batches_fail(struct batches *bs, uint32_t batch, uint32_t index,
	     uint32_t attempts, const char *reason)
{
	struct batch *b = running(bs, batch);
	struct jsonl *o;

	if (b == NULL)
		return;
	o = &b->out;
	jsonl_begin(o);
	jsonl_int(o, "task", index);
	jsonl_int(o, "attempt", attempts);
	jsonl_int(o, "worker", -1);
	jsonl_str(o, "status", "failed");
	jsonl_int(o, "exit", -1);
	jsonl_str(o, "stdout", "");
	jsonl_str(o, "reason", reason);
	jsonl_end(o);
	ev_task_failed(bs->ev, batch, index, reason);
	log_warnx("batch %ld task %u failed: %s", b->id, index, reason);
	count(bs, b, index, 0, "", 0, reason);
}

void
batches_reassigned(struct batches *bs, uint32_t batch)
{
	struct batch *b = batches_find(bs, batch);

	if (b && b->state == B_RUNNING)
		b->reassigned++;
}

void
batches_flush(struct batches *bs)
{
	int i;

	for (i = 0; i < bs->n; i++)
		if (bs->v[i] && bs->v[i]->state == B_RUNNING)
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
	bs->n = bs->cap = 0;
}
