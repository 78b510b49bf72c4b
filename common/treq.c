/* treq: timed MPI requests. */
#include "treq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void
treq_set_init(struct treq_set *s)
{
	memset(s, 0, sizeof(*s));
}

void
treq_set_destroy(struct treq_set *s)
{
	int i;

	for (i = 0; i < s->n; i++) {
		free(s->items[i]->buf);
		free(s->items[i]);
	}
	for (i = 0; i < s->nretired; i++)
		free(s->retired[i]);
	free(s->reqs);
	free(s->items);
	free(s->done_idx);
	free(s->done_st);
	free(s->retired);
	memset(s, 0, sizeof(*s));
}

static void
set_add(struct treq_set *s, struct treq *t)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 16;
		s->reqs = ft_realloc(s->reqs, s->cap * sizeof(*s->reqs));
		s->items = ft_realloc(s->items, s->cap * sizeof(*s->items));
		s->done_idx = ft_realloc(s->done_idx, s->cap * sizeof(int));
		s->done_st = ft_realloc(s->done_st, s->cap * sizeof(MPI_Status));
	}
	t->idx = s->n;
	s->items[s->n] = t;
	s->reqs[s->n] = t->req;
	s->n++;
}

/* Take T out of the arrays (the last item moves into its place). */
static void
set_remove(struct treq_set *s, struct treq *t)
{
	int i = t->idx, last = s->n - 1;

	s->items[i] = s->items[last];
	s->reqs[i] = s->reqs[last];
	s->items[i]->idx = i;
	s->n--;
	t->idx = -1;
}

static void
keep_retired(struct treq_set *s, void *buf)
{
	if (buf == NULL)
		return;
	if (s->nretired == s->capretired) {
		s->capretired = s->capretired ? s->capretired * 2 : 16;
		s->retired = ft_realloc(s->retired, s->capretired * sizeof(void *));
	}
	s->retired[s->nretired++] = buf;
}

struct treq *
treq_isend(struct treq_set *s, struct ft_buf *msg, int peer, int tag,
	   MPI_Comm comm, double deadline, int awaiting, treq_cb cb, void *arg)
{
	struct treq *t = ft_calloc(1, sizeof(*t));

	t->comm = comm;
	t->peer = peer;
	t->tag = tag;
	t->awaiting = awaiting;
	t->deadline = deadline;
	t->buf = msg->data;
	t->len = msg->len;
	t->cb = cb;
	t->arg = arg;
	msg->data = NULL;
	msg->len = msg->cap = 0;
	if (MPI_Isend(t->buf, (int)t->len, MPI_BYTE, peer, tag, comm,
		      &t->req) != MPI_SUCCESS) {
		free(t->buf);
		free(t);
		return NULL;
	}
	set_add(s, t);
	return t;
}

struct treq *
treq_irecv(struct treq_set *s, size_t len, int peer, int tag, MPI_Comm comm,
	   double deadline, treq_cb cb, void *arg)
{
	struct treq *t = ft_calloc(1, sizeof(*t));

	t->comm = comm;
	t->peer = peer;
	t->tag = tag;
	t->is_recv = 1;
	t->deadline = deadline;
	t->buf = ft_malloc(len);
	t->len = len;
	t->cb = cb;
	t->arg = arg;
	if (MPI_Irecv(t->buf, (int)len, MPI_BYTE, peer, tag, comm,
		      &t->req) != MPI_SUCCESS) {
		free(t->buf);
		free(t);
		return NULL;
	}
	set_add(s, t);
	return t;
}

/* Run T's callback, then free it. */
static void
finish(struct treq *t, enum treq_outcome outcome)
{
	if (t->cb)
		t->cb(t, outcome, t->arg);
	free(t->buf);
	free(t);
}

/* Let go of T's MPI request: a pending receive is cancelled, anything
 * still pending is freed, and its buffer moves to the retired list. */
static void
abandon(struct treq_set *s, struct treq *t)
{
	if (t->req != MPI_REQUEST_NULL) {
		if (t->is_recv)
			MPI_Cancel(&t->req);
		MPI_Request_free(&t->req);
		keep_retired(s, t->buf);
		t->buf = NULL;
	}
}

/* Mark what MPI completed; collect the requests that are now finished. */
static int
collect_completed(struct treq_set *s, struct treq **ready)
{
	int outcount = 0, i, nready = 0, rc;

	rc = MPI_Testsome(s->n, s->reqs, &outcount, s->done_idx, s->done_st);
	if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)
		outcount = 0;
	if (outcount == MPI_UNDEFINED)
		outcount = 0;
	for (i = 0; i < outcount; i++) {
		struct treq *t = s->items[s->done_idx[i]];

		t->req = MPI_REQUEST_NULL;
		t->sent = 1;
		t->status = s->done_st[i];
		t->error = rc == MPI_ERR_IN_STATUS ? t->status.MPI_ERROR
						   : MPI_SUCCESS;
		if (t->is_recv)
			MPI_Get_count(&t->status, MPI_BYTE, &t->count);
		if (!t->awaiting)
			ready[nready++] = t;
	}
	return nready;
}

/* Detach the NREADY requests of READY and run their callbacks (an
 * expired one, marked awaiting -1, is abandoned first).  Returns how many
 * ran; a callback may retire entries still in READY (treq_retire clears
 * them). */
static int
run_ready(struct treq_set *s, struct treq **ready, int nready)
{
	int i, ran = 0;

	for (i = 0; i < nready; i++)
		set_remove(s, ready[i]);
	s->ready = ready;
	s->nready = nready;
	for (i = 0; i < nready; i++) {
		struct treq *t = ready[i];

		if (t == NULL)
			continue;
		ready[i] = NULL;
		if (t->awaiting == -1) {
			abandon(s, t);
			s->expired++;
			finish(t, TREQ_EXPIRED);
		} else {
			s->completed++;
			finish(t, TREQ_DONE);
		}
		ran++;
	}
	s->ready = NULL;
	s->nready = 0;
	return ran;
}

int
treq_test(struct treq_set *s, double now)
{
	struct treq **ready;
	int nready, i, nexp = 0, ran;

	if (s->n == 0)
		return 0;
	/* What MPI completed first: a pong that came before NOW closes its
	 * ping however late this poll is, before deadlines are judged. */
	ready = ft_malloc(s->n * sizeof(*ready));
	nready = collect_completed(s, ready);
	ran = run_ready(s, ready, nready);
	free(ready);
	if (s->n == 0)
		return ran;
	ready = ft_malloc(s->n * sizeof(*ready));
	nready = 0;
	for (i = 0; i < s->n; i++) {
		struct treq *t = s->items[i];

		if (t->awaiting == 2 && t->sent)
			ready[nready++] = t;
		else if (t->req != MPI_REQUEST_NULL &&
			 now >= t->deadline)
			t->awaiting = -1, nexp++;
		else if (t->awaiting == 1 && now >= t->deadline)
			t->awaiting = -1, nexp++;
	}
	/* Gather expired ones after the completed ones, then detach all. */
	for (i = 0; i < s->n && nexp > 0; i++)
		if (s->items[i]->awaiting == -1)
			ready[nready++] = s->items[i], nexp--;
	ran += run_ready(s, ready, nready);
	free(ready);
	return ran;
}

double
treq_next_deadline(const struct treq_set *s)
{
	double d = INFINITY;
	int i;

	for (i = 0; i < s->n; i++)
		if (s->items[i]->deadline < d)
			d = s->items[i]->deadline;
	return d;
}

void
treq_delay_all(struct treq_set *s, double dt)
{
	int i;

	for (i = 0; i < s->n; i++)
		s->items[i]->deadline += dt;
}

void
treq_reply(struct treq *t)
{
	if (t->awaiting == 1)
		t->awaiting = 2;
}

struct treq *
treq_find(struct treq_set *s, MPI_Comm comm, int peer, int tag, uint64_t key)
{
	int i;

	for (i = 0; i < s->n; i++) {
		struct treq *t = s->items[i];

		if (t->comm == comm && t->peer == peer && t->tag == tag &&
		    t->key == key)
			return t;
	}
	return NULL;
}

void
treq_retire(struct treq_set *s, struct treq *t)
{
	int i;

	if (t->idx < 0) {
		for (i = 0; i < s->nready; i++)
			if (s->ready[i] == t)
				s->ready[i] = NULL;
	} else {
		set_remove(s, t);
	}
	abandon(s, t);
	free(t->buf);
	free(t);
}

void
treq_retire_peer(struct treq_set *s, MPI_Comm comm, int peer)
{
	int i = 0;

	while (i < s->n) {
		struct treq *t = s->items[i];

		if (t->comm == comm && t->peer == peer)
			treq_retire(s, t);	/* moves the last item to i */
		else
			i++;
	}
	for (i = 0; i < s->nready; i++) {
		struct treq *t = s->ready[i];

		if (t && t->comm == comm && t->peer == peer)
			treq_retire(s, t);
	}
}
