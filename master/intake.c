/* intake: submitted batches read off the loop (see intake.h). */
#include "intake.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batches.h"
#include "batchtext.h"
#include "jobs.h"
#include "log.h"

#define CHECK_THREADS 2		/* threads that check a big batch */

struct req {
	/* Set by the loop. */
	long id;			/* reserved */
	char *dir;			/* the batch's directory */
	char *file;			/* for messages */
	char *text;
	size_t len;
	char *token;			/* the submitter's, or NULL */
	json_t *deps;			/* the request's "after", "after_any" */
	intake_done_fn done;
	void *arg;
	/* Set by the thread. */
	int rc;
	int status;			/* for a refusal: 2 bad input, 1 else */
	char err[1024];
	struct batch_text bt;
	struct job *job;
	json_t *tasks;			/* a job's first phase */
	struct req *next;
};

struct intake {
	struct master *m;
	pthread_t thread;
	int running;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct req *todo, *todo_tail;	/* for the thread, in order */
	struct req *done, *done_tail;	/* for the loop, in order */
	int stop;
	int pending;
	ev_async wake;
};

static struct intake in;

/* ---- the thread ---- */

/* May the thread write into the state dir (the master still holds its
 * lease)?  0, or -1 with R's error set.  A lost lease is the loop's to
 * act on: it finds out at its next write. */
static int
fenced(struct req *r)
{
	struct lease_rec cur;
	struct master *m = in.m;

	if (m->lease.fd < 0 ||
	    lease_check(&m->lease, m->epoch, &cur) == 0)
		return 0;
	snprintf(r->err, sizeof(r->err), "the master is stepping down");
	return -1;
}

/* The request's dependencies beside batch.json, as after.json (a batch
 * file's own are in it).  0 or -1 with R's error. */
static int
write_deps(struct req *r, int sync)
{
	char *path, *text;
	int rc = 0;

	if (r->deps == NULL)
		return 0;
	path = ft_asprintf("%s/after.json", r->dir);
	text = json_dumps(r->deps, JSON_COMPACT);
	if (text == NULL ||
	    ft_write_file_durable(path, text, strlen(text), sync) == -1) {
		snprintf(r->err, sizeof(r->err), "%s: %s", path,
			 strerror(errno));
		rc = -1;
	}
	free(text);
	free(path);
	return rc;
}

/* Write the batch's bytes as batch.json in its directory, and the
 * submitter's token and dependencies beside them; synced (with the
 * directories) when the policy syncs, before anyone learns the batch's
 * id.  0 or -1. */
static int
write_batch_file(struct req *r)
{
	int sync = in.m->cfg.fsync != FT_FSYNC_NONE;
	char *path = NULL, *tok = NULL;
	int rc = -1;

	if (fenced(r) == -1)
		return -1;
	if (ft_mkdirs(r->dir) == -1) {
		snprintf(r->err, sizeof(r->err), "%s: %s", r->dir,
			 strerror(errno));
		return -1;
	}
	path = ft_asprintf("%s/batch.json", r->dir);
	tok = ft_asprintf("%s/token", r->dir);
	if (ft_write_file_durable(path, r->text, r->len, sync) == -1 ||
	    (r->token && ft_write_file_durable(tok, r->token,
					       strlen(r->token), sync) == -1))
		snprintf(r->err, sizeof(r->err), "%s: %s", path,
			 strerror(errno));
	else
		rc = write_deps(r, sync);
	free(path);
	free(tok);
	return rc;
}

/* The batch is good: results.jsonl marks it accepted, for a restarted
 * master too (journal.h).  Made (and synced into the batch's directory,
 * the directory into batches/) before the id is given.  0 or -1. */
static int
mark_accepted(struct req *r)
{
	char *path = ft_asprintf("%s/results.jsonl", r->dir);
	int fd = -1, rc = -1;

	if (fenced(r) == -1)
		goto out;
	fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd == -1 ||
	    (in.m->cfg.fsync != FT_FSYNC_NONE &&
	     (ft_fsync_dir(r->dir) == -1 || ft_fsync_parent(r->dir) == -1))) {
		snprintf(r->err, sizeof(r->err), "%s: %s", path,
			 strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(path);
	return rc;
}

/* Plan the first phase of R's job.  0 or -1. */
static int
plan_job(struct req *r, const struct ft_plugins *pl)
{
	const struct ft_plugin *p = ft_plugins_find(pl, json_string_value(
		json_object_get(r->bt.job, "type")));
	char *dir = ft_asprintf("%s/job", r->dir);

	if (mkdir(dir, 0755) == -1 && errno != EEXIST)
		snprintf(r->err, sizeof(r->err), "%s: %s", dir, strerror(errno));
	else
		r->job = job_start(p, pl, r->bt.job, dir, &r->tasks, r->err,
				   sizeof(r->err));
	free(dir);
	return r->job ? 0 : -1;
}

static void
process(struct req *r, const struct ft_plugins *pl)
{
	char *text = r->text;

	r->rc = -1;
	r->status = 1;
	if (write_batch_file(r) == -1)
		return;
	r->status = 2;
	r->text = NULL;		/* batch_text_read takes it */
	if (batch_text_read(&r->bt, r->file, text, r->len, pl, CHECK_THREADS,
			    r->err, sizeof(r->err)) == -1)
		return;
	if (batch_text_fit(&r->bt, r->file, &in.m->cfg, r->err,
			   sizeof(r->err)) == -1) {
		batch_text_free(&r->bt);
		return;
	}
	if (batch_text_merge_after(&r->bt, r->deps) == -1) {
		snprintf(r->err, sizeof(r->err), "%s: --after: a job's batch "
			 "does not wait for others: only a batch of tasks does",
			 r->file);
		batch_text_free(&r->bt);
		return;
	}
	if (r->bt.job && !batches_is_gang(pl, r->bt.job) &&
	    plan_job(r, pl) == -1)
		return;
	r->status = 1;
	if (mark_accepted(r) == -1)
		return;
	r->rc = 0;
}

static void *
intake_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&in.mu);
	for (;;) {
		struct req *r;

		while (!in.stop && in.todo == NULL)
			pthread_cond_wait(&in.cv, &in.mu);
		if (in.stop)
			break;
		r = in.todo;
		in.todo = r->next;
		if (in.todo == NULL)
			in.todo_tail = NULL;
		pthread_mutex_unlock(&in.mu);
		process(r, &in.m->plugins);
		pthread_mutex_lock(&in.mu);
		r->next = NULL;
		if (in.done_tail)
			in.done_tail->next = r;
		else
			in.done = r;
		in.done_tail = r;
		ev_async_send(in.m->loop, &in.wake);
	}
	pthread_mutex_unlock(&in.mu);
	return NULL;
}

/* ---- the loop ---- */

static void
req_free(struct req *r)
{
	batch_text_free(&r->bt);
	job_free(r->job);
	json_decref(r->tasks);
	free(r->text);
	free(r->dir);
	free(r->file);
	free(r->token);
	json_decref(r->deps);
	free(r);
}

/* Queue R's batch, or refuse it; tell R's caller. */
static void
finish(struct master *m, struct req *r)
{
	if (r->rc == 0 && batches_check_after(&m->batches, &r->bt, r->err,
					      sizeof(r->err)) == -1) {
		r->rc = -1;		/* bad input: the batches it names */
		r->status = 2;
	}
	if (r->rc == 0 && batches_accept(&m->batches, r->id, &r->bt, r->job,
					 r->tasks, r->token, r->err,
					 sizeof(r->err)) == 0) {
		r->job = NULL;		/* the batch's now */
		r->tasks = NULL;
		r->done(m, r->arg, r->id, NULL, 0);
	} else {
		batches_release(&m->batches, r->id);
		r->done(m, r->arg, -1, r->err, r->rc == 0 ? 1 : r->status);
	}
	in.pending--;
	req_free(r);
}

static void
on_wake(struct ev_loop *loop, ev_async *w, int revents)
{
	struct master *m = w->data;
	struct req *list;

	(void)loop, (void)revents;
	pthread_mutex_lock(&in.mu);
	list = in.done;
	in.done = in.done_tail = NULL;
	pthread_mutex_unlock(&in.mu);
	while (list) {
		struct req *next = list->next;

		finish(m, list);
		list = next;
	}
}

int
intake_init(struct master *m, char *err, size_t n)
{
	memset(&in, 0, sizeof(in));
	in.m = m;
	pthread_mutex_init(&in.mu, NULL);
	pthread_cond_init(&in.cv, NULL);
	ev_async_init(&in.wake, on_wake);
	in.wake.data = m;
	ev_async_start(m->loop, &in.wake);
	if (pthread_create(&in.thread, NULL, intake_main, NULL) != 0) {
		snprintf(err, n, "cannot start the intake thread");
		ev_async_stop(m->loop, &in.wake);
		return -1;
	}
	in.running = 1;
	return 0;
}

void
intake_free(struct master *m)
{
	struct req *r;

	if (!in.running)
		return;
	pthread_mutex_lock(&in.mu);
	in.stop = 1;
	pthread_cond_signal(&in.cv);
	pthread_mutex_unlock(&in.mu);
	pthread_join(in.thread, NULL);
	in.running = 0;
	on_wake(m->loop, &in.wake, 0);		/* what was read: queue it */
	while ((r = in.todo) != NULL) {
		in.todo = r->next;
		batches_release(&m->batches, r->id);
		r->done(m, r->arg, -1, "the master is stopping", 1);
		req_free(r);
	}
	ev_async_stop(m->loop, &in.wake);
}

void
intake_submit(struct master *m, const char *file, char *text, size_t len,
	      const char *token, const json_t *deps, intake_done_fn done,
	      void *arg)
{
	struct req *r = ft_calloc(1, sizeof(*r));

	r->file = ft_strdup(file ? file : "batch");
	r->token = token ? ft_strdup(token) : NULL;
	r->deps = deps ? json_deep_copy(deps) : NULL;
	r->text = text;
	r->len = len;
	r->done = done;
	r->arg = arg;
	r->id = batches_reserve(&m->batches, &r->dir);
	in.pending++;
	pthread_mutex_lock(&in.mu);
	if (in.todo_tail)
		in.todo_tail->next = r;
	else
		in.todo = r;
	in.todo_tail = r;
	pthread_cond_signal(&in.cv);
	pthread_mutex_unlock(&in.mu);
}

int
intake_pending(struct master *m)
{
	(void)m;
	return in.pending;
}
