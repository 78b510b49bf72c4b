/* mdecode: MUNGE credentials decoded on threads (see mdecode.h). */
#include "mdecode.h"

#include <munge.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct job {
	uint64_t id;
	char *cred;
	mdecode_fn done;
	void *arg;
	int cancelled;			/* its answer is thrown away */
	double started;			/* monotonic, when a thread took it */
	struct mdecode_result res;
	void *payload;			/* res.payload, owned */
	struct job *next;
};

/* What the loop and the threads share, under mu.  It outlives the
 * owner's mdecode_free while a thread is still in munged's hands: the
 * last of the owner and the threads to leave frees it. */
struct mdecode {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct ev_loop *loop;
	ev_async wake;			/* answers are waiting in done */
	char *socket;			/* munged's, or NULL */
	struct job *todo, **todo_tail;	/* for the threads, in order */
	struct job *busy;		/* in munged's hands */
	struct job *done, **done_tail;	/* for the loop, in order */
	int nqueued, max_queued;
	uint64_t last_id;
	int closed;			/* the owner has gone */
	int refs;			/* the owner and each thread */
};

static void
job_free(struct job *j)
{
	free(j->cred);
	free(j->payload);
	free(j);
}

/* Drop one reference to D (mu held): the last one frees it. */
static void
unref_locked(struct mdecode *d)
{
	int last = --d->refs == 0;

	pthread_mutex_unlock(&d->mu);
	if (!last)
		return;
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
	free(d->socket);
	free(d);
}

/* Take J out of the list at HEAD.  1 if it was there. */
static int
unlink_job(struct job **head, struct job *j)
{
	struct job **p;

	for (p = head; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			return 1;
		}
	return 0;
}

/* ---- the threads ---- */

/* Ask munged (context CTX) about J's credential; fill J's result. */
static void
decode(munge_ctx_t ctx, struct job *j)
{
	struct mdecode_result *r = &j->res;
	munge_err_t e;
	const char *why;

	e = munge_decode(j->cred, ctx, &j->payload, &r->len, &r->uid,
			 &r->gid);
	r->ok = e == EMUNGE_SUCCESS;
	r->payload = j->payload;
	if (r->ok)
		return;
	why = munge_ctx_strerror(ctx) ? munge_ctx_strerror(ctx) :
	      munge_strerror(e);
	r->munged_failed = e == EMUNGE_SOCKET;
	snprintf(r->error, sizeof(r->error), "%s", why);
}

/* The next job for a thread (mu held), or NULL once closed. */
static struct job *
next_job(struct mdecode *d)
{
	struct job *j;

	while (!d->closed && d->todo == NULL)
		pthread_cond_wait(&d->cv, &d->mu);
	if (d->closed)
		return NULL;
	j = d->todo;
	d->todo = j->next;
	if (d->todo == NULL)
		d->todo_tail = &d->todo;
	d->nqueued--;
	j->started = ft_now();
	j->next = d->busy;
	d->busy = j;
	return j;
}

/* J was answered (mu held): to the loop, or away if nobody waits. */
static void
answered(struct mdecode *d, struct job *j)
{
	unlink_job(&d->busy, j);
	if (d->closed || j->cancelled) {
		job_free(j);
		return;
	}
	j->next = NULL;
	*d->done_tail = j;
	d->done_tail = &j->next;
	ev_async_send(d->loop, &d->wake);
}

static void *
decode_main(void *arg)
{
	struct mdecode *d = arg;
	munge_ctx_t ctx = munge_ctx_create();
	struct job *j;

	if (ctx && d->socket)
		munge_ctx_set(ctx, MUNGE_OPT_SOCKET, d->socket);
	pthread_mutex_lock(&d->mu);
	while ((j = next_job(d)) != NULL) {
		pthread_mutex_unlock(&d->mu);
		if (ctx)
			decode(ctx, j);
		else
			snprintf(j->res.error, sizeof(j->res.error),
				 "cannot create a MUNGE context");
		pthread_mutex_lock(&d->mu);
		answered(d, j);
	}
	if (ctx)
		munge_ctx_destroy(ctx);
	unref_locked(d);
	return NULL;
}

/* ---- the loop ---- */

/* Answers came: hand each to its caller, one at a time, so that a
 * callback may cancel the others. */
static void
on_wake(struct ev_loop *loop, ev_async *w, int revents)
{
	struct mdecode *d = w->data;
	struct job *j;

	(void)loop, (void)revents;
	for (;;) {
		pthread_mutex_lock(&d->mu);
		if ((j = d->done) != NULL) {
			d->done = j->next;
			if (d->done == NULL)
				d->done_tail = &d->done;
		}
		pthread_mutex_unlock(&d->mu);
		if (j == NULL)
			return;
		if (!j->cancelled)
			j->done(j->arg, &j->res);
		job_free(j);
	}
}

/* Start one detached thread with every signal blocked (the loop handles
 * them).  0 or -1. */
static int
start_thread(struct mdecode *d)
{
	pthread_attr_t attr;
	pthread_t t;
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&t, &attr, decode_main, d);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return rc == 0 ? 0 : -1;
}

struct mdecode *
mdecode_new(struct ev_loop *loop, const char *socket, int threads,
	    int max_queued, char *err, size_t n)
{
	struct mdecode *d = ft_calloc(1, sizeof(*d));
	int k;

	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	d->loop = loop;
	d->socket = socket ? ft_strdup(socket) : NULL;
	d->todo_tail = &d->todo;
	d->done_tail = &d->done;
	d->max_queued = max_queued;
	d->refs = 1;
	ev_async_init(&d->wake, on_wake);
	d->wake.data = d;
	ev_async_start(loop, &d->wake);
	for (k = 0; k < threads; k++) {
		pthread_mutex_lock(&d->mu);
		d->refs++;
		pthread_mutex_unlock(&d->mu);
		if (start_thread(d) == -1) {
			pthread_mutex_lock(&d->mu);
			d->refs--;
			pthread_mutex_unlock(&d->mu);
			ft_snprintf(err, n, "control: cannot start a thread "
				    "for MUNGE");
			mdecode_free(d);
			return NULL;
		}
	}
	return d;
}

uint64_t
mdecode_submit(struct mdecode *d, const char *cred, mdecode_fn done,
	       void *arg)
{
	struct job *j;
	uint64_t id = 0;

	pthread_mutex_lock(&d->mu);
	if (d->nqueued < d->max_queued) {
		j = ft_calloc(1, sizeof(*j));
		j->id = id = ++d->last_id;
		j->cred = ft_strdup(cred);
		j->done = done;
		j->arg = arg;
		*d->todo_tail = j;
		d->todo_tail = &j->next;
		d->nqueued++;
		pthread_cond_signal(&d->cv);
	}
	pthread_mutex_unlock(&d->mu);
	return id;
}

/* The job ID in the list at HEAD, or NULL. */
static struct job *
find(struct job *head, uint64_t id)
{
	for (; head; head = head->next)
		if (head->id == id)
			return head;
	return NULL;
}

void
mdecode_cancel(struct mdecode *d, uint64_t id)
{
	struct job *j;

	pthread_mutex_lock(&d->mu);
	if ((j = find(d->todo, id)) != NULL) {
		unlink_job(&d->todo, j);
		d->todo_tail = &d->todo;
		while (*d->todo_tail)
			d->todo_tail = &(*d->todo_tail)->next;
		d->nqueued--;
		job_free(j);
	} else if ((j = find(d->busy, id)) != NULL ||
		   (j = find(d->done, id)) != NULL) {
		j->cancelled = 1;
	}
	pthread_mutex_unlock(&d->mu);
}

int
mdecode_busy(struct mdecode *d, double *longest)
{
	const struct job *j;
	double now = ft_now();
	int k = 0;

	*longest = 0;
	pthread_mutex_lock(&d->mu);
	for (j = d->busy; j; j = j->next, k++)
		if (now - j->started > *longest)
			*longest = now - j->started;
	pthread_mutex_unlock(&d->mu);
	return k;
}

/* Free the jobs of the list at HEAD. */
static void
free_list(struct job *head)
{
	struct job *next;

	for (; head; head = next) {
		next = head->next;
		job_free(head);
	}
}

void
mdecode_free(struct mdecode *d)
{
	if (d == NULL)
		return;
	ev_async_stop(d->loop, &d->wake);
	pthread_mutex_lock(&d->mu);
	d->closed = 1;
	free_list(d->todo);
	free_list(d->done);
	d->todo = d->done = NULL;
	pthread_cond_broadcast(&d->cv);
	unref_locked(d);
}
