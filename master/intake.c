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
	long id;			/* given once it checks; 0 before */
	char *dir;			/* its directory: new.N, then its id's */
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
	/* The thread asks the loop for a checked batch's id (ids are the
	 * loop's): ASK is that batch until the loop answers. */
	pthread_cond_t answered;
	struct req *ask;
	unsigned long seq;		/* of new.N directories */
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

/* Ask the loop for R's id (the batch checks): 0 with R's id and its
 * directory renamed to it, or -1 with R's error (the loop refused it:
 * the batches it runs after; or the rename failed: the id given back). */
static int
take_id(struct req *r)
{
	char *dir;

	pthread_mutex_lock(&in.mu);
	in.ask = r;
	ev_async_send(in.m->loop, &in.wake);
	while (in.ask == r)
		pthread_cond_wait(&in.answered, &in.mu);
	pthread_mutex_unlock(&in.mu);
	if (r->id <= 0)
		return -1;
	dir = ft_asprintf("%s/batches/%ld", in.m->cfg.state_dir, r->id);
	if (rename(r->dir, dir) == -1 ||
	    (in.m->cfg.fsync != FT_FSYNC_NONE && ft_fsync_parent(dir) == -1)) {
		snprintf(r->err, sizeof(r->err), "%s: %s", dir,
			 strerror(errno));
		free(dir);
		r->status = 1;
		return -1;
	}
	free(r->dir);
	r->dir = dir;
	return 0;
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
	if (take_id(r) == -1)
		return;
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

/* Queue R's batch, or refuse it (its directory removed, its id, if it
 * had one, given back); tell R's caller. */
static void
finish(struct master *m, struct req *r)
{
	if (r->rc == 0 && batches_accept(&m->batches, r->id, &r->bt, r->job,
					 r->tasks, r->token, r->err,
					 sizeof(r->err)) == 0) {
		r->job = NULL;		/* the batch's now */
		r->tasks = NULL;
		r->done(m, r->arg, r->id, NULL, 0);
	} else {
		if (r->id > 0)
			batches_release(&m->batches, r->id);
		if (ft_rmtree(r->dir) == -1 && errno != ENOENT)
			log_warn("%s", r->dir);
		r->done(m, r->arg, -1, r->err, r->rc == 0 ? 1 : r->status);
	}
	in.pending--;
	req_free(r);
}

/* The thread asks for R's id: the loop checks the batches R runs after
 * (its data), and reserves the next id, or says why not. */
static void
answer_ask(struct master *m, struct req *r)
{
	char *dir = NULL;

	if (m->stopping) {
		snprintf(r->err, sizeof(r->err), "the master is stopping");
		r->status = 1;
	} else if (batches_check_after(&m->batches, &r->bt, r->err,
				       sizeof(r->err)) == 0) {
		r->id = batches_reserve(&m->batches, &dir);
		free(dir);
	}
	pthread_mutex_lock(&in.mu);
	in.ask = NULL;
	pthread_cond_signal(&in.answered);
	pthread_mutex_unlock(&in.mu);
}

static void
on_wake(struct ev_loop *loop, ev_async *w, int revents)
{
	struct master *m = w->data;
	struct req *list, *ask;

	(void)loop, (void)revents;
	pthread_mutex_lock(&in.mu);
	list = in.done;
	in.done = in.done_tail = NULL;
	ask = in.ask;
	pthread_mutex_unlock(&in.mu);
	if (ask)
		answer_ask(m, ask);
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
	pthread_cond_init(&in.answered, NULL);
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
	while (pthread_tryjoin_np(in.thread, NULL) == EBUSY) {
		on_wake(m->loop, &in.wake, 0);	/* an id it waits for */
		usleep(1000);
	}
	in.running = 0;
	on_wake(m->loop, &in.wake, 0);		/* what was read: queue it */
	while ((r = in.todo) != NULL) {
		in.todo = r->next;
		ft_rmtree(r->dir);
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
	r->dir = ft_asprintf("%s/batches/new.%lu", m->cfg.state_dir, ++in.seq);
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
