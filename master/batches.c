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

#include "adds.h"
#include "batch.h"
#include "batch_int.h"
#include "ctl.h"
#include "deps.h"
#include "inputs.h"
#include "jobs.h"
#include "journal.h"
#include "jsonl.h"
#include "log.h"
#include "memsize.h"
#include "store.h"
#include "util.h"

#define KEEP_FINISHED 256	/* finished batches kept in memory */
#define TRIM_IDLE 1.0		/* seconds without a finished batch before
				 * freed memory goes back */

static void fail_task(struct batches *bs, struct batch *b, uint32_t index,
		      uint32_t attempts, const char *reason, int loud);

void
batches_init(struct batches *bs, const struct ft_config *cfg,
	     const struct ft_plugins *pl, struct sched *sched,
	     struct events *ev, struct store *store,
	     const struct batches_ops *ops)
{
	memset(bs, 0, sizeof(*bs));
	bs->cfg = cfg;
	bs->store = store;
	bs->pl = pl;
	bs->sched = sched;
	bs->ev = ev;
	bs->ops = *ops;
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
	return b->total + (b->held ? b->held->ntasks : 0);
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

void
batch_usage_replayed(struct batch *b, const struct journal_results *r)
{
	b->cpu_s = r->cpu_s;
	b->task_s = r->seconds;
	b->max_rss = r->max_rss;
}

const char *
batch_state_name(enum bstate s)
{
	switch (s) {
	case B_WAITING:
		return "waiting";
	case B_FINISHED:
		return "finished";
	default:
		return "running";
	}
}

json_t *
batch_json(const struct batch *b)
{
	const struct ctl_col *c = ctl_batch_cols;
	json_t *o = json_object();

	ctl_row_int(o, &c[CTL_B_ID], b->id);
	ctl_row_str(o, &c[CTL_B_NAME], b->name);
	ctl_row_int(o, &c[CTL_B_TOTAL], batch_total(b));
	ctl_row_int(o, &c[CTL_B_DONE], b->d_ok + b->d_failed);
	ctl_row_int(o, &c[CTL_B_OK], b->d_ok);
	ctl_row_int(o, &c[CTL_B_FAILED], b->d_failed);
	ctl_row_int(o, &c[CTL_B_REASSIGNED], b->reassigned);
	ctl_row_str(o, &c[CTL_B_STATE], b->state == B_FINISHED &&
		   b->cancelled ? "cancelled" : batch_state_name(b->state));
	if (b->ok + b->failed > b->d_ok + b->d_failed)
		json_object_set_new(o, "unwritten", json_integer(
			b->ok + b->failed - b->d_ok - b->d_failed));
	ctl_row_num(o, &c[CTL_B_SECONDS],
		    batch_finished(b) ? b->seconds : ft_now() - b->t0);
	ctl_row_num(o, &c[CTL_B_CPU_S], b->cpu_s);
	ctl_row_int(o, &c[CTL_B_MAX_RSS], (long long)b->max_rss);
	ctl_row_num(o, &c[CTL_B_TASK_SECONDS], b->task_s);
	if (b->open)
		json_object_set_new(o, "open", json_true());
	if (b->after)
		json_object_set(o, "after", b->after);
	if (b->after_any)
		json_object_set(o, "after_any", b->after_any);
	if (b->plugin || b->gang)
		json_object_set_new(o, "job", json_string(
			b->plugin ? b->plugin->name : b->gang));
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
		bs->next = 1;		/* no replay: an empty state dir */
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
	b->adds.fd = -1;
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
chunks_free(struct batch *b)
{
	int i;

	for (i = 0; i < b->nchunks; i++)
		free(b->chunks[i].text);
	free(b->chunks);
	b->chunks = NULL;
	b->nchunks = b->capchunks = 0;
}

void
batch_free(struct batch *b)
{
	int i;

	if (b == NULL)
		return;
	job_free(b->job);
	jsonl_close(&b->out);
	jsonl_close(&b->adds);
	chunks_free(b);
	ft_buf_free(&b->kinds);
	free(b->results);
	free(b->token);
	free(b->text);
	for (i = 0; i < b->nphases; i++)
		free(b->phases[i]);
	free(b->phases);
	free(b->error);
	json_decref(b->result);
	free(b->gang);
	free(b->name);
	free(b->dir);
	deps_free(b->deps);
	inputs_free(b);
	for (i = 0; i < b->nstripped; i++)
		free(b->stripped[i]);
	free(b->stripped);
	json_decref(b->after);
	json_decref(b->after_any);
	if (b->held)
		batch_text_free(b->held);
	free(b->held);
	free(b);
}

/* Drop the slots of BS that are gone from its front. */
void
batches_trim_front(struct batches *bs)
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
	if (ft_rmtree(b->dir) == -1 && errno != ENOENT)
		log_warn("%s", b->dir);
	bs->v[id - bs->first] = NULL;
	batch_free(b);
	if (id == bs->next - 1 && id == bs->first + bs->n - 1) {
		bs->next--;		/* the last given: it is given again */
		bs->n--;
	}
	batches_trim_front(bs);
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

/* SPEC (*LEN bytes, a task too long to send with its "after") without
 * its "after", kept by B until it ends; *LEN its length. */
static const char *
strip_after(struct batch *b, const char *spec, uint32_t *len)
{
	json_t *t = json_loadb(spec, *len, 0, NULL);
	char *text = NULL;

	if (t == NULL || !batch_text_strip(t, &text)) {
		json_decref(t);
		return spec;	/* checked at submit: cannot happen */
	}
	json_decref(t);
	b->stripped = ft_realloc(b->stripped, (size_t)(b->nstripped + 1) *
				 sizeof(*b->stripped));
	b->stripped[b->nstripped++] = text;
	*len = (uint32_t)strlen(text);
	return text;
}

/* Does a task of plugin KIND that names output files when FILES write
 * files?  Those of a plugin that writes them do when the config names
 * them for every task. */
static int
writes_files(const struct batches *bs, int kind, int files)
{
	return files ||
	       ((bs->cfg->task_stdout || bs->cfg->task_stderr) && kind >= 0 &&
		kind < bs->pl->n &&
		(bs->pl->v[kind]->flags & FT_PLUGIN_OUTPUT_FILES));
}

/* Queue task INDEX of B, SP its spec.  A spec too long to send only for
 * its "after" (a fan-in's) goes without it (batchtext.h). */
static void
queue_spec(struct batches *bs, struct batch *b, uint32_t index,
	   const struct deps_spec *sp)
{
	struct sched_need need = {
		.cpus = sp->cpus ? sp->cpus : 1, .gpus = sp->gpus,
		.prio = b->priority, .mem = sp->mem, .treq = sp->treq,
		.nocopy = writes_files(bs, sp->kind, sp->files),
	};
	const char *spec = sp->spec;
	uint32_t len = sp->len;
	uint64_t tid;

	spec = inputs_spec(b, index, spec, &len);
	if (len > FT_SPEC_MAX)
		spec = strip_after(b, spec, &len);
	tid = sched_add_need(bs->sched, (uint32_t)b->id, index, spec, len,
			     sp->timeout > 0 ? sp->timeout :
			     bs->cfg->task_timeout, &need);
	kind_of(bs, tid, sp->kind);
}

/* Tell B's deps of the tasks of AFTER (N of them) that ended before it
 * knew of them: an open batch's tasks may wait for tasks of earlier
 * adds, ended before any task waited. */
static void
tell_ended(struct batch *b, const uint32_t *after, uint32_t n)
{
	char err[256] = "";
	uint32_t i;
	int ok;

	for (i = 0; i < n; i++) {
		if (deps_knows(b->deps, after[i]))
			continue;
		if (inputs_ended(b, after[i], &ok, err, sizeof(err)) == 1)
			deps_ended(b->deps, after[i], ok);
		else if (err[0])
			log_warnx("batch %ld: %s", b->id, err);
	}
}

/* Queue the tasks of BT, whose specs are spans of its text, but those
 * DONE has (NULL: none).  A task with an "after" is held until its
 * tasks have succeeded (deps.h); one doomed already fails at the next
 * batch_drain(). */
void
batch_queue_text(struct batches *bs, struct batch *b, struct batch_text *bt,
	   const struct journal_results *done)
{
	const struct taskgraph *g = &bt->graph;
	uint32_t i, blame;

	for (i = 0; i < bt->ntasks; i++) {
		const struct bt_span *sp = &bt->spans[i];
		struct deps_spec ds = {
			.spec = bt->text + sp->off, .len = sp->len,
			.timeout = sp->timeout, .kind = sp->kind,
			.gpus = sp->gpus, .cpus = sp->cpus, .mem = sp->mem,
			.treq = sp->treq, .files = sp->files,
		};
		uint32_t index = b->total + i;

		if (done && journal_done(done, index))
			continue;
		if (g->n && g->off[i + 1] > g->off[i]) {
			enum deps_news news;

			if (b->deps == NULL)
				b->deps = deps_new();
			tell_ended(b, g->idx + g->off[i],
				   g->off[i + 1] - g->off[i]);
			news = deps_hold(b->deps, index, g->idx + g->off[i],
					 g->off[i + 1] - g->off[i], &ds, &blame);
			if (news == DEPS_DOOMED)
				deps_doom(b->deps, index, blame);
			if (news != DEPS_READY)
				continue;
		}
		queue_spec(bs, b, index, &ds);
	}
	b->total += bt->ntasks;
}

/* Queue TASKS (a phase of B's job), printed into one buffer that B keeps
 * until it ends, but those DONE has (NULL: none).  0, or -1 with ERR when
 * a task is too big to send. */
int
batch_queue_phase(struct batches *bs, struct batch *b, json_t *tasks,
	    const struct journal_results *done, char *err, size_t n)
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
	json_array_foreach(tasks, i, t) {
		uint32_t index = b->total + (uint32_t)i;
		struct sched_need need = { .cpus = 1, .prio = b->priority };
		struct ft_need fn;

		if (done && journal_done(done, index))
			continue;
		ft_task_need(t, &fn);
		need.cpus = fn.cpus;
		need.gpus = fn.gpus;
		need.mem = memsize_mib(fn.mem);
		need.treq = fn.time_request;
		kind_of(bs, sched_add_need(bs->sched, (uint32_t)b->id, index,
					   buf.data + off[i],
					   (uint32_t)(off[i + 1] - off[i]),
					   ft_task_timeout(t, bs->cfg->task_timeout),
					   &need),
			ft_plugins_index(bs->pl, json_string_value(
						 json_object_get(t, "type"))));
	}
	b->total += (uint32_t)count;
	b->phases = ft_realloc(b->phases,
			       (size_t)(b->nphases + 1) * sizeof(*b->phases));
	b->phases[b->nphases++] = buf.data;
	free(off);
	return 0;
}

/* Open B's results.jsonl for appending.  0, or -1 with ERR. */
static int
open_results(struct batch *b, char *err, size_t n)
{
	b->results = ft_asprintf("%s/results.jsonl", b->dir);
	if (jsonl_open(&b->out, b->results, JSONL_CRC) == -1) {
		snprintf(err, n, "%s: %s", b->results, strerror(errno));
		return -1;
	}
	return 0;
}

int
batches_is_gang(const struct ft_plugins *pl, const json_t *job)
{
	return job && ft_plugins_find(pl, json_string_value(json_object_get(
		job, "type"))) == NULL;
}

/* B is the gang batch BT: one task, its job, run by a gang (BT freed). */
static void
accept_gang(struct batches *bs, struct batch *b, struct batch_text *bt)
{
	(void)bs;
	b->gang = ft_strdup(json_string_value(json_object_get(bt->job,
							      "type")));
	b->gang_job = json_incref(bt->job);
	b->total = 1;
	batch_text_free(bt);
}

int
batches_accept(struct batches *bs, long id, struct batch_text *bt,
	       struct job *job, json_t *tasks, const char *token, char *err,
	       size_t n)
{
	struct batch *b = batches_find(bs, id);

	if (b == NULL || b->state != B_INTAKE) {
		snprintf(err, n, "batch %ld was not reserved", id);
		return -1;
	}
	b->priority = bt->priority;
	b->open = bt->open;
	if (open_results(b, err, n) == -1 ||
	    (job && batch_queue_phase(bs, b, tasks, NULL, err, n) == -1)) {
		jsonl_close(&b->out);
		return -1;
	}
	b->token = token ? ft_strdup(token) : NULL;
	b->name = ft_strdup(bt->name);
	b->state = B_RUNNING;
	b->t0 = b->touched = ft_now();
	if (job == NULL && batches_is_gang(bs->pl, bt->job)) {
		accept_gang(bs, b, bt);
	} else if (job) {
		b->job = job;
		b->plugin = ft_plugins_find(bs->pl, json_string_value(
			json_object_get(bt->job, "type")));
		json_decref(tasks);
		batch_text_free(bt);
	} else if (bt->after || bt->after_any) {
		batch_hold(b, bt);		/* resolve_waiting decides, below */
	} else {
		batch_queue_text(bs, b, bt, NULL);
		b->text = bt->text;	/* the specs point into it */
		bt->text = NULL;
		batch_text_free(bt);
	}
	if (bs->stats)
		bs->stats->batches_submitted++;
	ev_batch_submitted(bs->ev, b->id, b->name, batch_total(b),
			   b->plugin ? b->plugin->name : b->gang);
	log_info("batch %ld (%s): %u tasks%s", b->id, b->name, batch_total(b),
		 b->state == B_WAITING ? ", after other batches" : "");
	if (b->gang && bs->ops.gang)
		bs->ops.gang(bs->ops.ctx, (uint32_t)b->id, 0, b->gang_job);
	else
		bs->ops.queued(bs->ops.ctx);
	json_decref(b->gang_job);
	b->gang_job = NULL;
	if (b->state == B_WAITING)
		batch_resolve_waiting(bs);
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
	if (batch_text_fit(&bt, "batch", bs->cfg, err, n) == -1) {
		batch_text_free(&bt);
		goto fail;
	}
	if (bt.job && !batches_is_gang(bs->pl, bt.job))
		job = job_start(ft_plugins_find(bs->pl, json_string_value(
					json_object_get(bt.job, "type"))),
				bs->pl, bt.job, path, &tasks, err, n);
	if ((bt.job && job == NULL && !batches_is_gang(bs->pl, bt.job)) ||
	    batches_accept(bs, id, &bt, job, tasks, NULL, err, n) == -1) {
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

/* Write summary.json.  0, or -1 (the store has the failure). */
static int
write_summary(struct batches *bs, struct batch *b)
{
	json_t *summary = batch_json(b);
	char *text = json_dumps(summary, JSON_COMPACT);
	char *path = ft_asprintf("%s/summary.json", b->dir);
	int rc = text ? store_put(bs->store, path, text, strlen(text)) : -1;

	free(path);
	free(text);
	json_decref(summary);
	return rc;
}

/* Keep only B's counts: its file, specs and job go. */
static void
compact(struct batches *bs, struct batch *b)
{
	int i;

	store_forget(bs->store, &b->out);
	jsonl_close(&b->out);
	store_forget(bs->store, &b->adds);
	jsonl_close(&b->adds);
	chunks_free(b);
	ft_buf_free(&b->kinds);
	b->kinds_off = 0;
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
	batches_trim_front(bs);
}

/* Batch ID ended at AT (wall clock): queued to be forgotten retain_s
 * later (batches_retain, retain.c). */
void
batch_retain(struct batches *bs, long id, double at)
{
	if (bs->ends_head > 0 && bs->ends_head == bs->nends) {
		bs->ends_head = bs->nends = 0;	/* all taken: start over */
	} else if (bs->nends == bs->capends && bs->ends_head >= bs->nends / 2) {
		memmove(bs->ends, bs->ends + bs->ends_head,
			(bs->nends - bs->ends_head) * sizeof(*bs->ends));
		bs->nends -= bs->ends_head;
		bs->ends_head = 0;
	}
	FT_PUSH(bs->ends, bs->nends, bs->capends,
		((struct batch_ended){ id, at }));
}

/* B's lines are all on disk: write its summary and tell.  A summary that
 * cannot be written leaves B finishing, to be tried again. */
static void
finish(struct batches *bs, struct batch *b)
{
	const char *error;

	b->seconds = ft_now() - b->t0;
	b->state = B_FINISHED;
	bs->shown++;
	if (write_summary(bs, b) == -1) {
		b->state = B_ENDING;
		return;
	}
	compact(bs, b);
	error = batch_error(b);
	ev_batch_done(bs->ev, b->id, b->total, b->ok, b->failed, b->seconds,
		      error);
	if (error)
		log_warnx("batch %ld (%s): %s%s", b->id, b->name,
			  b->cancelled ? "cancelled: " : "job failed: ", error);
	log_info("batch %ld (%s) finished: %u ok, %u failed in %.3f s", b->id,
		 b->name, b->ok, b->failed, b->seconds);
	bs->nfinished++;
	batch_retain(bs, b->id, ft_wall());
	if (bs->stats)
		bs->stats->batches_finished++;
	bs->ops.finished(bs->ops.ctx, b);
	batch_resolve_waiting(bs);
	evict(bs);
	bs->trim_due = ft_now() + TRIM_IDLE;
}

void
batches_trim(struct batches *bs, double now)
{
	/* Batches that follow each other reuse the pages the last one freed
	 * (a fresh page costs a fault, about 10 us on a paravirtualized VM);
	 * a master that has gone quiet gives them back (of the intake
	 * threads' heaps, their free chunks: glibc cannot shrink their tops,
	 * which is why batchtext maps the big spans itself). */
	if (bs->trim_due == 0 || now < bs->trim_due)
		return;
	bs->trim_due = 0;
	malloc_trim(0);
}

/* Count the lines of B that are done now (written, or synced: store.h). */
static void
count_done(struct batches *bs, struct batch *b)
{
	uint64_t lines = store_done_lines(bs->store, &b->out);

	if (b->counted < lines) {
		bs->shown++;
		if (b->watchers && bs->ops.results)
			bs->ops.results(bs->ops.ctx, b->id);
	}
	while (b->counted < lines && b->kinds_off < b->kinds.len) {
		if (b->kinds.data[b->kinds_off++] == 'o')
			b->d_ok++;
		else
			b->d_failed++;
		b->counted++;
	}
	if (b->kinds_off == b->kinds.len) {
		b->kinds.len = 0;
		b->kinds_off = 0;
	}
}

/* Write what B holds; count what is done; finish B once every line is
 * as durable as the policy wants (or ask for the sync it waits for). */
void
batch_settle(struct batches *bs, struct batch *b)
{
	if (b->state != B_RUNNING && b->state != B_ENDING)
		return;
	store_write(bs->store, &b->out, b->results);
	count_done(bs, b);
	if (b->state != B_ENDING)
		return;
	if (store_durable(bs->store, &b->out) &&
	    b->d_ok + b->d_failed == b->ok + b->failed)
		finish(bs, b);
	else if (jsonl_pending(&b->out) == 0)
		store_sync_soon(bs->store);	/* its end waits for no timer */
}

/* Every task of B has ended. */
void
batch_ending(struct batches *bs, struct batch *b)
{
	b->state = B_ENDING;
	batch_settle(bs, b);
}

/* Queue the next phase of B's job (TASKS taken over); a phase that cannot
 * be queued fails the job. */
static void
next_phase(struct batches *bs, struct batch *b, json_t *tasks)
{
	char err[512] = "";

	if (batch_queue_phase(bs, b, tasks, NULL, err, sizeof(err)) == -1) {
		json_decref(tasks);
		if (job_fail(b->job, err) == JOB_FAILED)
			batch_ending(bs, b);
		return;
	}
	json_decref(tasks);
	log_info("batch %ld (%s): next phase, %u tasks in all", b->id, b->name,
		 b->total);
	bs->ops.queued(bs->ops.ctx);
}

/* Forget the chunks at the front of B whose tasks have all ended, once
 * they are many: an open batch that runs for months keeps only those of
 * tasks still to end. */
static void
chunks_trim(struct batch *b)
{
	int k = 0;

	while (k < b->nchunks && b->chunks[k].text == NULL)
		k++;
	if (k < 64 && 2 * k < b->nchunks)
		return;
	memmove(b->chunks, b->chunks + k,
		(size_t)(b->nchunks - k) * sizeof(*b->chunks));
	b->nchunks -= k;
}

/* Task INDEX of B ended: the specs of its add go once all its tasks
 * have. */
static void
chunk_ended(struct batch *b, uint32_t index)
{
	int lo = 0, hi = b->nchunks - 1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		struct chunk *c = &b->chunks[mid];

		if (index < c->first) {
			hi = mid - 1;
		} else if (index - c->first >= c->count) {
			lo = mid + 1;
		} else {
			if (--c->left == 0) {
				free(c->text);
				c->text = NULL;
				chunks_trim(b);
			}
			return;
		}
	}
}

/* Hand out B's tasks that its deps made ready (queued) or doomed (failed
 * without running, naming the task they waited for).  A failure counted
 * meanwhile adds its own news to the queue, which this loop takes: a
 * chain of a million tasks fails in a loop, not a recursion. */
void
batch_drain(struct batches *bs, struct batch *b)
{
	struct deps_spec ds;
	uint32_t index, blame;
	enum deps_news news;
	int queued = 0;
	long id = b->id;
	char why[96];

	if (b->draining)
		return;
	b->draining = 1;
	while ((news = deps_next(b->deps, &index, &ds, &blame)) != DEPS_NONE) {
		if (news == DEPS_READY) {
			queue_spec(bs, b, index, &ds);
			queued = 1;
			continue;
		}
		if (blame == DEPS_CANCELLED)
			snprintf(why, sizeof(why), "cancelled");
		else
			snprintf(why, sizeof(why), "after task %u, which "
				 "failed", blame);
		fail_task(bs, b, index, 0, why, 0);
		if (batches_find(bs, id) != b)
			return;		/* it ended (and went) */
	}
	b->draining = 0;
	if (queued)
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
	ft_buf_add(&b->kinds, ok ? "o" : "f", 1);
	if (b->nchunks)
		chunk_ended(b, index);
	if (b->inputs)
		inputs_done(b, index);
	if (b->deps) {
		long id = b->id;

		deps_ended(b->deps, index, ok);
		batch_drain(bs, b);
		if (batches_find(bs, id) != b || b->state != B_RUNNING)
			return;		/* the tasks drain failed ended it */
	}
	if (b->job == NULL) {
		if (b->ok + b->failed == b->total && !b->open)
			batch_ending(bs, b);
		return;
	}
	switch (job_task_ended(b->job, index, ok, out, out_len, reason,
			       &tasks)) {
	case JOB_PHASE:
		next_phase(bs, b, tasks);
		break;
	case JOB_COMPLETE:
	case JOB_FAILED:
		batch_ending(bs, b);
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

/* A result line of B was made.  A fast batch writes its lines a chunk at
 * a time, not only at the loop's flush; one whose results clients stream
 * writes them at the loop's next turn (batches_flush_eager), so that each
 * reaches them at once. */
static void
line_added(struct batches *bs, struct batch *b)
{
	if (jsonl_pending(&b->out) >= JSONL_CHUNK && store_ok(bs->store))
		store_write(bs->store, &b->out, b->results);
	if (b->watchers == 0 || b->eager)
		return;
	b->eager = 1;
	if (bs->neager == bs->capeager) {
		bs->capeager = bs->capeager ? 2 * bs->capeager : 8;
		bs->eager = ft_realloc(bs->eager, (size_t)bs->capeager *
				       sizeof(*bs->eager));
	}
	bs->eager[bs->neager++] = b->id;
}

void
batches_record(struct batches *bs, uint64_t tid, int worker,
	       const char *host, const struct proto_result *r)
{
	const struct sched_task *t = sched_task(bs->sched, tid);
	struct batch *b = t ? running(bs, t->batch) : NULL;
	struct jsonl *o;
	char reason[256];

	if (b == NULL)
		return;
	o = &b->out;
	inputs_line(b, t->index, r->ok);
	jsonl_begin(o);
	jsonl_int(o, "task", t->index);
	jsonl_int(o, "attempt", r->attempt);
	jsonl_int(o, "worker", worker);
	jsonl_str(o, "host", host);
	jsonl_str(o, "status", r->ok ? "ok" : "failed");
	jsonl_int(o, "exit", r->exit_code);
	jsonl_secs(o, "seconds", r->seconds);
	/* Every byte of a line is copied into the page cache: a no-op
	 * task's 0 is one byte, not 0.000000. */
	if (r->cpu_s >= 0.0000005)
		jsonl_secs(o, "cpu_s", r->cpu_s);
	else
		jsonl_int(o, "cpu_s", 0);
	jsonl_int(o, "max_rss", (long long)r->max_rss);
	jsonl_strn(o, "stdout", r->out, r->out_len);
	jsonl_strn(o, "stderr", r->err, r->err_len);
	if (r->out_path_len)
		jsonl_strn(o, "stdout_path", r->out_path, r->out_path_len);
	if (r->err_path_len)
		jsonl_strn(o, "stderr_path", r->err_path, r->err_path_len);
	if (r->value_len)
		jsonl_strn(o, "value", r->value, r->value_len);
	if (!r->ok)
		jsonl_strn(o, "reason", r->reason, r->reason_len);
	jsonl_end(o);
	line_added(bs, b);
	ev_task_done(bs->ev, t->batch, t->index, r->attempt, worker, host,
		     r->ok ? "ok" : "failed");
	b->cpu_s += r->cpu_s;
	b->task_s += r->seconds;
	if (r->max_rss > b->max_rss)
		b->max_rss = r->max_rss;
	reason[0] = '\0';
	if (b->job)		/* only a job reads it: no printf per task */
		snprintf(reason, sizeof(reason), "%.*s", (int)r->reason_len,
			 r->reason);
	count(bs, b, t->index, r->ok, r->out, r->out_len, reason);
}

void
batches_gang_ended(struct batches *bs, uint32_t batch, uint32_t index,
		   uint32_t attempt, int ok, double seconds, json_t *figures,
		   const char *reason)
{
	struct batch *b = running(bs, batch);
	char *fig = json_dumps(figures, JSON_COMPACT | JSON_SORT_KEYS);
	struct jsonl *o;

	if (b == NULL) {
		free(fig);
		return;
	}
	o = &b->out;
	jsonl_begin(o);
	jsonl_int(o, "task", index);
	jsonl_int(o, "attempt", attempt);
	jsonl_int(o, "worker", -1);
	jsonl_str(o, "status", ok ? "ok" : "failed");
	jsonl_int(o, "exit", ok ? 0 : -1);
	jsonl_secs(o, "seconds", seconds);
	jsonl_int(o, "cpu_s", 0);	/* its ranks' own are in the figures */
	jsonl_int(o, "max_rss", 0);
	jsonl_str(o, "stdout", "");
	if (!ok)
		jsonl_str(o, "reason", reason);
	jsonl_str(o, "job", b->gang);
	jsonl_raw(o, "figures", fig ? fig : "{}");
	jsonl_end(o);
	line_added(bs, b);
	free(fig);
	json_decref(b->result);
	b->result = json_incref(figures);
	ev_task_done(bs->ev, batch, index, attempt, -1, "", /* on its ranks' hosts */
		     ok ? "ok" : "failed");
	if (!ok)
		log_warnx("batch %ld gang task %u failed: %s", b->id, index,
			  reason);
	count(bs, b, index, ok, "", 0, ok ? NULL : reason);
}

/* Task INDEX of B failed for good after ATTEMPTS (0: it never ran), for
 * REASON: its line, its event, its count; logged when LOUD (a batch
 * cancelled before it ran, or a chain after a failed task, would log a
 * line per task). */
static void
fail_task(struct batches *bs, struct batch *b, uint32_t index,
	  uint32_t attempts, const char *reason, int loud)
{
	struct jsonl *o = &b->out;

	inputs_line(b, index, 0);
	jsonl_begin(o);
	jsonl_int(o, "task", index);
	jsonl_int(o, "attempt", attempts);
	jsonl_int(o, "worker", -1);
	jsonl_str(o, "status", "failed");
	jsonl_int(o, "exit", -1);
	jsonl_int(o, "cpu_s", 0);
	jsonl_int(o, "max_rss", 0);
	jsonl_str(o, "stdout", "");
	jsonl_str(o, "reason", reason);
	jsonl_end(o);
	line_added(bs, b);
	/* A cancelled batch's tasks are told of once, by batch_cancelled:
	 * a million of them are not a million events and log lines. */
	if (!b->cancelled)
		ev_task_failed(bs->ev, (uint32_t)b->id, index, reason);
	if (loud && !b->cancelled)
		log_warnx("batch %ld task %u failed: %s", b->id, index, reason);
	count(bs, b, index, 0, "", 0, reason);
}

void
batches_fail(struct batches *bs, uint32_t batch, uint32_t index,
	     uint32_t attempts, const char *reason)
{
	struct batch *b = running(bs, batch);

	if (b)
		fail_task(bs, b, index, attempts, reason, 1);
}

/* ---- batches after batches (batch.h: "after", "after_any") ---- */

/* B (accepted: its tasks in BT, taken over) waits for the batches it runs
 * after. */
void
batch_hold(struct batch *b, struct batch_text *bt)
{
	b->after = json_incref(bt->after);
	b->after_any = json_incref(bt->after_any);
	b->held = ft_malloc(sizeof(*b->held));
	*b->held = *bt;
	memset(bt, 0, sizeof(*bt));
	b->state = B_WAITING;
}

/* Has batch ID ended: 1 (*OK: every task of it succeeded, not
 * cancelled), 0 not yet, -1 no such batch now (forgotten, or never). */
static int
ended(const struct batches *bs, long id, int *ok)
{
	struct batch *d = batches_find(bs, id);
	int finished = 0;
	json_t *row;

	if (d && d->state != B_FINISHED)
		return d->state == B_INTAKE ? -1 : 0;
	if (d) {
		*ok = !d->cancelled && d->failed == 0 && batch_error(d) == NULL;
		return 1;
	}
	if ((row = batches_lookup(bs, id, &finished)) == NULL)
		return -1;
	*ok = strcmp(jget_str(row, "state", ""), "finished") == 0 &&
	      jget_int(row, "failed", 1) == 0 &&
	      json_object_get(row, "error") == NULL;
	json_decref(row);
	return 1;
}

/* What B may do now: 1 run, 0 wait, -1 be cancelled for WHY. */
static int
verdict(const struct batches *bs, const struct batch *b, char *why, size_t n)
{
	const json_t *lists[2] = { b->after, b->after_any }, *v;
	int k, ok, wait = 0;
	size_t i;

	for (k = 0; k < 2; k++)
		json_array_foreach(lists[k], i, v) {
			long id = (long)json_integer_value(v);
			int e = ended(bs, id, &ok);

			if (e == -1) {
				snprintf(why, n, "batch %ld, which it runs after, "
					 "is gone (forgotten): its outcome is "
					 "not known", id);
				return -1;
			}
			if (e == 0)
				wait = 1;
			else if (k == 0 && !ok) {
				snprintf(why, n, "batch %ld, which it runs after, "
					 "failed", id);
				return -1;
			}
		}
	return wait ? 0 : 1;
}

/* B waited: its tasks go to the queue now. */
static void
release_waiting(struct batches *bs, struct batch *b)
{
	struct batch_text *bt = b->held;

	b->held = NULL;
	b->state = B_RUNNING;
	batch_queue_text(bs, b, bt, NULL);
	b->text = bt->text;
	bt->text = NULL;
	batch_text_free(bt);
	free(bt);
	log_info("batch %ld (%s): the batches it runs after have ended; its "
		 "%u tasks are queued", b->id, b->name, b->total);
	if (b->deps)
		batch_drain(bs, b);
	bs->ops.queued(bs->ops.ctx);
}

/* B is cancelled before it ran (WHY): every task fails without running,
 * each with its line. */
void
batch_cancel_waiting(struct batches *bs, struct batch *b, const char *why)
{
	uint32_t i, n = b->held->ntasks;
	long id = b->id;

	batch_text_free(b->held);
	free(b->held);
	b->held = NULL;
	b->state = B_RUNNING;
	b->cancelled = 1;
	b->open = 0;
	b->total = n;
	free(b->error);
	b->error = ft_strdup(why);	/* its entry's "error", summary.json's */
	ev_batch_cancelled(bs->ev, id, (long long)n, 0);
	log_info("batch %ld (%s) cancelled before it ran: %s", id, b->name,
		 why);
	for (i = 0; i < n && batches_find(bs, id) == b; i++)
		fail_task(bs, b, i, 0, why, 0);
}

void
batch_resolve_waiting(struct batches *bs)
{
	long id, last = bs->first + bs->n;
	char why[256];

	for (id = bs->first; id < last; id++) {
		struct batch *b = batches_find(bs, id);
		int v;

		if (b == NULL || b->state != B_WAITING)
			continue;
		v = verdict(bs, b, why, sizeof(why));
		if (v == 1)
			release_waiting(bs, b);
		else if (v == -1)
			batch_cancel_waiting(bs, b, why);
	}
}

int
batches_check_after(const struct batches *bs, const struct batch_text *bt,
		    char *err, size_t n)
{
	const json_t *lists[2] = { bt->after, bt->after_any }, *v;
	int k, ok;
	size_t i;

	for (k = 0; k < 2; k++)
		json_array_foreach(lists[k], i, v)
			if (ended(bs, (long)json_integer_value(v), &ok) == -1) {
				snprintf(err, n, "%s[%zu]: no batch %lld%s",
					 k ? "after_any" : "after", i,
					 (long long)json_integer_value(v),
					 bs->next > json_integer_value(v) ?
					 " (forgotten)" : "");
				return -1;
			}
	return 0;
}

void
batches_reassigned(struct batches *bs, uint32_t batch)
{
	struct batch *b = batches_find(bs, batch);

	if (b && b->state == B_RUNNING)
		b->reassigned++;
}

int
batches_flush(struct batches *bs)
{
	long id, last = bs->first + bs->n;
	int rc = 0;

	/* settle may finish and evict batches: walk by id. */
	for (id = bs->first; id < last; id++) {
		struct batch *b = batches_find(bs, id);

		if (b == NULL)
			continue;
		batch_settle(bs, b);
		b = batches_find(bs, id);
		if (b && jsonl_pending(&b->out) > 0)
			rc = -1;
	}
	return rc;
}

void
batches_close(struct batches *bs)
{
	int i;

	for (i = 0; i < bs->n; i++) {
		if (bs->v[i])
			store_forget(bs->store, &bs->v[i]->out);
		batch_free(bs->v[i]);
	}
	free(bs->v);
	bs->v = NULL;
	bs->n = bs->cap = 0;
	free(bs->eager);
	bs->eager = NULL;
	bs->neager = bs->capeager = 0;
}

/* ---- the submitter's token ---- */

long
batches_by_token(const struct batches *bs, const char *token)
{
	int i;

	for (i = 0; token && i < bs->n; i++) {
		const struct batch *b = bs->v[i];

		if (b && batch_listed(b) && b->token &&
		    strcmp(b->token, token) == 0)
			return b->id;
	}
	return 0;
}

