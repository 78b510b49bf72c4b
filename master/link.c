/* link: the MPI side of each worker (see link.h). */
#include "link.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "proto.h"

static void on_message(struct treq *t, enum treq_outcome outcome, void *arg);

void
links_init(struct links *ls, int n, struct treq_set *treqs,
	   const struct link_ops *ops, int own_comms, double send_timeout,
	   double ping_timeout)
{
	int i;

	ls->treqs = treqs;
	ls->n = n;
	ls->v = ft_calloc((size_t)n, sizeof(*ls->v));
	ls->ops = *ops;
	ls->own_comms = own_comms;
	ls->send_timeout = send_timeout;
	ls->ping_timeout = ping_timeout;
	ls->msgs_in = ls->msgs_out = 0;
	for (i = 0; i < n; i++) {
		ls->v[i].ls = ls;
		ls->v[i].id = i;
		ls->v[i].comm = MPI_COMM_NULL;
	}
}

void
links_free(struct links *ls)
{
	free(ls->v);
	ls->v = NULL;
	ls->n = 0;
}

static int
post_receive(struct link *l)
{
	l->recv = treq_irecv(l->ls->treqs, FT_MSG_MAX, l->rank, MPI_ANY_TAG,
			     l->comm, INFINITY, on_message, l);
	return l->recv ? 0 : -1;
}

int
link_open(struct links *ls, int id, MPI_Comm comm, int rank)
{
	struct link *l = &ls->v[id];

	l->comm = comm;
	l->rank = rank;
	l->ping = NULL;
	l->last_heard = l->last_ping = ft_now();
	if (post_receive(l) == -1)
		return -1;
	l->open = 1;
	return 0;
}

void
link_close(struct links *ls, int id)
{
	struct link *l = &ls->v[id];

	l->open = 0;
	l->recv = NULL;
	l->ping = NULL;
	if (l->comm == MPI_COMM_NULL)
		return;
	treq_retire_peer(ls->treqs, l->comm, l->rank);
	if (ls->own_comms) {
		MPI_Comm_free(&l->comm);
		l->comm = MPI_COMM_NULL;
	}
}

void
links_close_all(struct links *ls)
{
	int i;

	for (i = 0; i < ls->n; i++)
		link_close(ls, i);
}

static void
on_message(struct treq *t, enum treq_outcome outcome, void *arg)
{
	struct link *l = arg;
	struct links *ls = l->ls;

	if (l->recv != t)
		return;
	l->recv = NULL;
	if (outcome != TREQ_DONE || !l->open)
		return;
	if (t->error != MPI_SUCCESS) {
		ls->ops.failed(ls->ops.ctx, l->id,
			       "receive failed (message too long?)");
		return;
	}
	ls->msgs_in++;
	if (t->status.MPI_TAG != FT_MSG_PONG)
		ls->work_in++;
	l->last_heard = ft_now();
	/* Post the next receive first: handling may send and expect answers. */
	if (post_receive(l) == -1) {
		ls->ops.failed(ls->ops.ctx, l->id, "cannot post a receive");
		return;
	}
	ls->ops.message(ls->ops.ctx, l->id, t->status.MPI_TAG, t->buf,
			(size_t)t->count);
}

/* A send expired: the worker does not take messages any more. */
static void
on_sent(struct treq *t, enum treq_outcome outcome, void *arg)
{
	struct link *l = arg;

	(void)t;
	if (outcome == TREQ_EXPIRED && l->open)
		l->ls->ops.failed(l->ls->ops.ctx, l->id,
				  "a send did not complete in time");
}

int
link_send(struct links *ls, int id, int tag, struct ft_buf *msg)
{
	struct link *l = &ls->v[id];
	struct treq *t;

	t = treq_isend(ls->treqs, msg, l->rank, tag, l->comm,
		       ft_now() + ls->send_timeout, 0, on_sent, l);
	if (t == NULL)
		return -1;
	ls->msgs_out++;
	return 0;
}

static void
on_ping_done(struct treq *t, enum treq_outcome outcome, void *arg)
{
	struct link *l = arg;
	char why[96];

	if (l->ping == t)
		l->ping = NULL;
	if (outcome != TREQ_EXPIRED || !l->open)
		return;
	/* Heard from since the ping went out: alive, only slow to answer
	 * (a node starting hundreds of processes on a few CPUs).  The next
	 * round pings it again; a stopped or dead peer says nothing. */
	if (l->last_heard > l->last_ping)
		return;
	if (l->ls->ops.starved && l->ls->ops.starved(l->ls->ops.ctx, l->id))
		return;
	snprintf(why, sizeof(why), "no answer to a ping in %.3g s",
		 l->ls->ping_timeout);
	l->ls->ops.failed(l->ls->ops.ctx, l->id, why);
}

int
link_ping(struct links *ls, int id, double now)
{
	struct link *l = &ls->v[id];
	struct ft_buf msg = { 0 };
	struct treq *t;

	l->ping_seq++;
	proto_put_ping(&msg, l->ping_seq);
	t = treq_isend(ls->treqs, &msg, l->rank, FT_MSG_PING, l->comm,
		       now + ls->ping_timeout, 1, on_ping_done, l);
	if (t == NULL)
		return -1;
	t->key = l->ping_seq;
	l->ping = t;
	l->last_ping = now;
	ls->msgs_out++;
	return 0;
}

void
link_pong(struct links *ls, int id, uint64_t seq)
{
	struct link *l = &ls->v[id];

	if (l->ping && l->ping->key == seq) {
		treq_reply(l->ping);
		l->ping = NULL;
	}
}
