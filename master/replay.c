/* replay: the batches a starting master finds in its state dir, rebuilt
 * (see batches.h: batches_replay, and journal.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adds.h"
#include "batch_int.h"
#include "batches.h"
#include "deps.h"
#include "jobs.h"
#include "journal.h"
#include "log.h"
#include "store.h"
#include "util.h"

static int
cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

/* What the batches directory holds, read in one pass: the ids without
 * summary.json (to replay), ascending; the ended ones, by the time they
 * ended (their summary's), for retention; the highest id. */
struct scan {
	long *open;
	size_t nopen, capopen;
	struct batch_ended *ended;
	size_t nended, capended;
	long max;
};

static int
cmp_ended(const void *a, const void *b)
{
	const struct batch_ended *x = a, *y = b;

	return (x->at > y->at) - (x->at < y->at);
}

/* Scan the batches directory into SC.  0, or -1 with ERR (it cannot be
 * read; a missing one holds nothing). */
static int
scan(const struct batches *bs, struct scan *sc, char *err, size_t n)
{
	char *dir = ft_asprintf("%s/batches", bs->cfg->state_dir), *sum;
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat st;

	memset(sc, 0, sizeof(*sc));
	if (d == NULL) {
		if (errno != ENOENT)
			snprintf(err, n, "%s: %s", dir, strerror(errno));
		free(dir);
		return errno == ENOENT ? 0 : -1;
	}
	while ((e = readdir(d)) != NULL) {
		char *end;
		long id = strtol(e->d_name, &end, 10);

		if (*end != '\0' || id <= 0 || e->d_name[0] == '0')
			continue;
		if (id > sc->max)
			sc->max = id;
		sum = ft_asprintf("%s/%s/summary.json", dir, e->d_name);
		if (lstat(sum, &st) == 0) {
			FT_PUSH(sc->ended, sc->nended, sc->capended,
				((struct batch_ended){ id, (double)st.st_mtim.tv_sec +
						 st.st_mtim.tv_nsec / 1e9 }));
		} else {
			FT_PUSH(sc->open, sc->nopen, sc->capopen, id);
		}
		free(sum);
	}
	closedir(d);
	free(dir);
	qsort(sc->open, sc->nopen, sizeof(*sc->open), cmp_long);
	qsort(sc->ended, sc->nended, sizeof(*sc->ended), cmp_ended);
	return 0;
}

/* The highest batch id ever given, as batches/last_id says (written by
 * the reaper before it removes a forgotten batch's directory: reaper.h),
 * or 0. */
static long
last_id(const struct batches *bs)
{
	char *path = ft_asprintf("%s/batches/last_id", bs->cfg->state_dir);
	size_t len;
	char *text = ft_read_file(path, &len);
	long v = text ? strtol(text, NULL, 10) : 0;

	free(text);
	free(path);
	return v > 0 ? v : 0;
}

static int
exists(const char *dir, const char *name)
{
	char *path = ft_asprintf("%s/%s", dir, name);
	struct stat st;
	int rc = lstat(path, &st) == 0;

	free(path);
	return rc;
}

/* Empty slots up to (not including) id END. */
static void
pad(struct batches *bs, long end)
{
	while (bs->first + bs->n < end) {
		if (bs->n == bs->cap) {
			bs->cap = bs->cap ? bs->cap * 2 : 64;
			bs->v = ft_realloc(bs->v,
					   (size_t)bs->cap * sizeof(*bs->v));
		}
		bs->v[bs->n++] = NULL;
	}
}

/* A slot for batch ID, replayed: ids come in ascending order before any
 * reservation. */
static struct batch *
restore_slot(struct batches *bs, long id)
{
	struct batch *b = ft_calloc(1, sizeof(*b));

	if (bs->n == 0)
		bs->first = id;
	pad(bs, id + 1);
	b->id = id;
	b->state = B_RUNNING;
	b->out.fd = -1;
	b->adds.fd = -1;
	b->dir = ft_asprintf("%s/batches/%ld", bs->cfg->state_dir, id);
	b->t0 = ft_now();
	bs->v[id - bs->first] = b;
	return b;
}

static char *
read_token(const char *dir)
{
	char *path = ft_asprintf("%s/token", dir);
	size_t len = 0;
	char *t = ft_read_file(path, &len);

	free(path);
	if (t && (len == 0 || len > 256 || strlen(t) != len)) {
		free(t);
		t = NULL;
	}
	return t;
}

/* The dependencies B's submit request brought (after.json, intake.h),
 * added to those of its batch.json (BT). */
static void
read_deps(const struct batch *b, struct batch_text *bt)
{
	char *path = ft_asprintf("%s/after.json", b->dir);
	json_t *deps = json_load_file(path, 0, NULL);

	if (deps && json_is_object(deps))
		batch_text_merge_after(bt, deps);
	json_decref(deps);
	free(path);
}

/* Say what was cut out of B's results file, and rewrite it. */
static int
repair(struct batches *bs, struct batch *b, const struct journal_results *r,
       char *err, size_t n)
{
	size_t i;

	for (i = 0; i < r->ncuts; i++) {
		const struct journal_cut *c = &r->cuts[i];

		log_warnx("batch %ld: %s: cut %llu bytes at offset %llu: %s; "
			  "the task runs again", b->id, b->results,
			  (unsigned long long)c->bytes,
			  (unsigned long long)c->offset, c->reason);
		ev_journal_repaired(bs->ev, b->id, b->results,
				    (long long)c->offset, (long long)c->bytes,
				    c->reason);
	}
	if (r->ncuts == 0)
		return 0;
	if (store_check_lease(bs->store, 1) == -1)
		return -1;
	return journal_repair(b->results, r, err, n);
}

/* Feed B's job the reports of R's lines, in their order, queueing each
 * phase it plans (without the tasks R has).  0, or -1 with ERR when the
 * lines do not fit the job's plan. */
static int
replay_job(struct batches *bs, struct batch *b, json_t *tasks,
	   const struct journal_results *r, char *err, size_t n)
{
	enum job_step step = JOB_RUNNING;
	size_t i;

	if (batch_queue_phase(bs, b, tasks, r, err, n) == -1)
		return -1;
	for (i = 0; i < r->nlines && step != JOB_COMPLETE &&
		    step != JOB_FAILED; i++) {
		const struct journal_line *l = &r->lines[i];

		if (l->task >= b->total) {
			snprintf(err, n, "a result for task %u, which the "
				 "job's plan does not have (yet)", l->task);
			return -1;
		}
		if (l->ok)
			b->ok++;
		else
			b->failed++;
		tasks = NULL;
		step = job_task_ended(b->job, l->task, l->ok, l->out,
				      l->out_len, l->reason ? l->reason : "",
				      &tasks);
		if (step == JOB_PHASE) {
			int rc = batch_queue_phase(bs, b, tasks, r, err, n);

			json_decref(tasks);
			if (rc == -1)
				return -1;
		}
	}
	if (step == JOB_COMPLETE || step == JOB_FAILED)
		b->state = B_ENDING;
	return 0;
}

/* The adds of an open batch read back (adds.h), each scanned. */
struct added {
	struct batch_text *v;
	int n, cap;
	uint32_t total;			/* tasks of batch.json and the adds */
	int closed;
	const struct ft_plugins *pl;
	char *path;			/* tasks.jsonl's (malloc'd) */
};

static int
added_one(void *ctx, uint32_t first, char *text, size_t len)
{
	struct added *a = ctx;
	struct batch_text bt;
	char err[512];

	if (first != a->total || a->closed) {
		free(text);
		return -1;
	}
	if (batch_text_scan(&bt, a->path, text, len, a->pl, err,
			    sizeof(err)) == -1) {
		log_warnx("%s", err);
		return -1;
	}
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 16;
		a->v = ft_realloc(a->v, (size_t)a->cap * sizeof(*a->v));
	}
	a->v[a->n++] = bt;
	a->total += bt.ntasks;
	return 0;
}

static void
added_close(void *ctx, uint32_t total)
{
	struct added *a = ctx;

	(void)total;
	a->closed = 1;
}

static void
added_free(struct added *a)
{
	int i;

	for (i = 0; i < a->n; i++)
		batch_text_free(&a->v[i]);
	free(a->v);
	free(a->path);
}

/* Read the adds of the open batch B (BT its batch.json) into A, cutting
 * a damaged tail of its tasks.jsonl.  0, or -1 with ERR. */
static int
read_adds(struct batches *bs, struct batch *b, const struct batch_text *bt,
	  struct added *a, char *err, size_t n)
{
	char *path = ft_asprintf("%s/tasks.jsonl", b->dir);
	struct adds_ops ops = { a, added_one, added_close };
	uint64_t good = 0, size = 0;
	int rc;

	memset(a, 0, sizeof(*a));
	a->total = bt->ntasks;
	a->pl = bs->pl;
	a->path = path;
	rc = bt->open ? adds_read(path, &ops, &good, &size, err, n) : 0;
	if (rc == 0 && good < size) {
		log_warnx("batch %ld: %s: cut %llu bytes at offset %llu: a torn "
			  "or damaged record; its tasks are not the batch's",
			  b->id, path, (unsigned long long)(size - good),
			  (unsigned long long)good);
		ev_journal_repaired(bs->ev, b->id, path, (long long)good,
				    (long long)(size - good),
				    "torn or damaged record");
		if (store_check_lease(bs->store, 1) == -1 ||
		    truncate(path, (off_t)good) == -1) {
			snprintf(err, n, "%s: cannot cut: %s", path,
				 strerror(errno));
			rc = -1;
		}
	}
	return rc;		/* PATH goes with A (its errors name it) */
}

/* Tell B's deps (made when BT or its adds A have tasks with "after") of
 * the tasks R has done, before the others are held. */
static void
replay_deps(struct batch *b, const struct batch_text *bt,
	    const struct added *a, const struct journal_results *r)
{
	uint32_t i;
	int k, any = bt->graph.n > 0;

	for (k = 0; k < a->n; k++)
		any |= a->v[k].graph.n > 0;
	if (!any)
		return;
	b->deps = deps_new();
	for (i = 0; i < a->total; i++)
		if (journal_done(r, i))
			deps_ended(b->deps, i, !journal_failed(r, i));
}

/* Check the tasks of A not done in R: each add's own bits of R's. */
static int
check_adds(struct added *a, const struct journal_results *r,
	   const struct ft_plugins *pl, uint32_t first, char *err, size_t n)
{
	uint8_t *skip = NULL;
	int i, rc = 0;

	for (i = 0; rc == 0 && i < a->n; i++) {
		struct batch_text *bt = &a->v[i];
		uint32_t k;

		skip = ft_realloc(skip, bt->ntasks / 8 + 1);
		memset(skip, 0, bt->ntasks / 8 + 1);
		for (k = 0; k < bt->ntasks; k++)
			if (journal_done(r, first + k))
				skip[k / 8] |= (uint8_t)(1u << (k % 8));
		bt->base = first;	/* its tasks wait for earlier ones */
		rc = batch_text_check(bt, a->path, pl, 2, skip, bt->ntasks,
				      err, n);
		first += bt->ntasks;
	}
	free(skip);
	return rc;
}

/* Rebuild B from its batch.json (BT) and its trusted lines (R). */
/* Rebuild the gang batch B of BT: ended if its one line is there, else
 * its task runs again from its first attempt (a gang cannot be picked up
 * where a dead master left it). */
static int
rebuild_gang(struct batches *bs, struct batch *b, struct batch_text *bt,
	     const struct journal_results *r)
{
	batch_usage_replayed(b, r);
	b->gang = ft_strdup(json_string_value(json_object_get(bt->job,
							      "type")));
	b->total = 1;
	b->ok = r->ok;
	b->failed = r->failed;
	if (b->ok + b->failed >= 1)
		b->state = B_ENDING;
	else if (bs->ops.gang)
		bs->ops.gang(bs->ops.ctx, (uint32_t)b->id, 0, bt->job);
	return 0;
}

static int
rebuild(struct batches *bs, struct batch *b, struct batch_text *bt,
	struct added *a, const struct journal_results *r, char *err,
	size_t n)
{
	const struct ft_plugin *p = NULL;
	json_t *tasks = NULL;
	char *dir;
	int i;

	batch_usage_replayed(b, r);
	b->name = ft_strdup(bt->name);
	b->priority = bt->priority;
	b->open = bt->open && !a->closed;
	if (bt->job == NULL && r->ok + r->failed > a->total) {
		/* Only an open batch whose adds were cut gets here (its
		 * results were not checked against a count of 0). */
		snprintf(err, n, "results for tasks it does not have");
		return -1;
	}
	if (bt->job == NULL && (bt->after || bt->after_any) &&
	    r->ok + r->failed == 0) {
		batch_hold(b, bt);		/* batches_replay resolves it */
		return 0;
	}
	if (bt->job == NULL) {
		b->after = json_incref(bt->after);
		b->after_any = json_incref(bt->after_any);
		replay_deps(b, bt, a, r);
		batch_queue_text(bs, b, bt, r);
		for (i = 0; i < a->n; i++)
			batch_queue_add(bs, b, &a->v[i], r);
		b->ok = r->ok;
		b->failed = r->failed;
		b->text = bt->text;
		bt->text = NULL;
		if (b->deps)
			batch_drain(bs, b);	/* tasks after a failed one, unwritten */
		if (b->state == B_RUNNING && b->ok + b->failed == b->total &&
		    !b->open)
			b->state = B_ENDING;
		return 0;
	}
	if (batches_is_gang(bs->pl, bt->job))
		return rebuild_gang(bs, b, bt, r);
	p = ft_plugins_find(bs->pl, json_string_value(json_object_get(bt->job,
								      "type")));
	dir = ft_asprintf("%s/job", b->dir);
	b->plugin = p;
	b->job = job_start(p, bs->pl, bt->job, dir, &tasks, err, n);
	free(dir);
	if (b->job == NULL)
		return -1;
	return replay_job(bs, b, tasks, r, err, n);
}

/* The batch cannot be replayed (WHY): it ends, failed, with what its
 * results file holds. */
static void
give_up(struct batch *b, const char *why)
{
	log_warnx("batch %ld: cannot be replayed: %s", b->id, why);
	job_free(b->job);
	b->job = NULL;
	free(b->error);
	b->error = ft_asprintf("cannot be replayed after a restart: %s", why);
	if (b->name == NULL)
		b->name = ft_strdup("?");
	b->state = B_ENDING;
}

/* Replay batch ID (results.jsonl there, no summary.json). */
static void
replay_one(struct batches *bs, long id, struct replay_stats *st)
{
	struct batch *b = restore_slot(bs, id);
	struct journal_results r = { 0 };
	struct batch_text bt = { 0 };
	struct added a = { 0 };
	char err[1024] = "", *path, *text;
	size_t len = 0;
	int rc;

	b->touched = ft_now();
	b->results = ft_asprintf("%s/results.jsonl", b->dir);
	b->token = read_token(b->dir);
	path = ft_asprintf("%s/batch.json", b->dir);
	text = ft_read_file(path, &len);
	rc = text ? batch_text_scan(&bt, path, text, len, bs->pl, err,
				    sizeof(err)) : -1;
	if (text == NULL)
		snprintf(err, sizeof(err), "%s: %s", path, strerror(errno));
	if (rc == 0)
		read_deps(b, &bt);
	if (rc == 0)
		rc = read_adds(bs, b, &bt, &a, err, sizeof(err));
	if (rc == 0)
		rc = journal_read(b->results, bt.job ? 0 : a.total,
				  bt.job != NULL, &r, err, sizeof(err));
	/* The tasks done need no check: they will not run again. */
	if (rc == 0)
		rc = batch_text_check(&bt, path, bs->pl, 2, r.done,
				      r.ndone_bits, err, sizeof(err));
	if (rc == 0)
		rc = check_adds(&a, &r, bs->pl, bt.ntasks, err, sizeof(err));
	free(path);
	if (rc == 0)
		rc = repair(bs, b, &r, err, sizeof(err));
	if (rc == 0 && jsonl_open(&b->out, b->results, JSONL_CRC) == -1) {
		snprintf(err, sizeof(err), "%s: %s", b->results,
			 strerror(errno));
		rc = -1;
	}
	if (rc == 0)
		rc = rebuild(bs, b, &bt, &a, &r, err, sizeof(err));
	if (rc == -1)
		give_up(b, err);
	b->d_ok = b->ok;
	b->d_failed = b->failed;
	st->batches++;
	st->cuts += (int)r.ncuts;
	st->done += b->ok + b->failed;
	st->pending += b->total - b->ok - b->failed;
	log_info("batch %ld (%s): replayed, %u of %u tasks done%s", b->id,
		 b->name, b->ok + b->failed, b->total,
		 r.ncuts ? ", damaged lines cut out" : "");
	journal_results_free(&r);
	batch_text_free(&bt);
	added_free(&a);
}

/* Remove the directories of batches read and not yet given an id
 * (intake.h: new.N), and of batches forgotten and not yet removed
 * (reaper.h: forgotten.ID), when the master before stopped. */
static void
drop_new(struct batches *bs)
{
	char *dir = ft_asprintf("%s/batches", bs->cfg->state_dir), *sub;
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d)) != NULL) {
		if ((strncmp(e->d_name, "new.", 4) != 0 &&
		     strncmp(e->d_name, "forgotten.", 10) != 0) ||
		    store_check_lease(bs->store, 1) == -1)
			continue;
		sub = ft_asprintf("%s/%s", dir, e->d_name);
		log_info("%s: %s; removed", sub, e->d_name[0] == 'n' ?
			 "a batch never accepted" : "a batch forgotten");
		if (ft_rmtree(sub) == -1)
			log_warn("%s", sub);
		free(sub);
	}
	if (d)
		closedir(d);
	free(dir);
}

/* Remove batch directory ID, never accepted (no results.jsonl). */
static void
drop_unaccepted(struct batches *bs, long id)
{
	char *dir = ft_asprintf("%s/batches/%ld", bs->cfg->state_dir, id);

	if (store_check_lease(bs->store, 1) == 0) {
		log_info("batch dir %s: never accepted; removed", dir);
		if (ft_rmtree(dir) == -1)
			log_warn("%s", dir);
	}
	free(dir);
}

int
batches_replay(struct batches *bs, struct replay_stats *st, char *err,
	       size_t n)
{
	struct scan sc;
	size_t count, i;
	long *ids;
	long id;

	memset(st, 0, sizeof(*st));
	err[0] = '\0';
	drop_new(bs);
	if (scan(bs, &sc, err, n) == -1)
		return -1;
	ids = sc.open;
	count = sc.nopen;
	bs->next = (sc.max > last_id(bs) ? sc.max : last_id(bs)) + 1;
	for (i = 0; i < sc.nended; i++)
		batch_retain(bs, sc.ended[i].id, sc.ended[i].at);
	free(sc.ended);
	for (i = 0; i < count; i++) {
		char *dir = ft_asprintf("%s/batches/%ld", bs->cfg->state_dir,
					ids[i]);
		int accepted = exists(dir, "results.jsonl");

		free(dir);
		if (accepted)
			replay_one(bs, ids[i], st);
		else
			drop_unaccepted(bs, ids[i]);
	}
	free(ids);
	/* Reservations go on after the last id there ever was. */
	if (bs->n > 0)
		pad(bs, bs->next);
	for (id = bs->first; id < bs->first + bs->n; id++) {
		struct batch *b = batches_find(bs, id);

		if (b && b->state == B_ENDING) {
			st->finished++;
			batch_settle(bs, b);
		}
	}
	batch_resolve_waiting(bs);
	if (st->pending)
		bs->ops.queued(bs->ops.ctx);
	return 0;
}
