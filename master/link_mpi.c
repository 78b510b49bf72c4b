/* link_mpi: a node agent's link over MPI, its timed requests (link.h). */
#include "link.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "proto.h"

static const struct link_impl mpi_impl;

static void on_message(struct treq *t, enum treq_outcome outcome, void *arg);

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
	struct link *l = ls->v[id];

	l->comm = comm;
	l->rank = rank;
	l->ping = NULL;
	if (post_receive(l) == -1)
		return -1;
	link_opened(l, &mpi_impl);
	return 0;
}

static void
mpi_close(struct link *l)
{
	struct links *ls = l->ls;

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

static void
on_message(struct treq *t, enum treq_outcome outcome, void *arg)
{
	struct link *l = arg;

	if (l->recv != t)
		return;
	l->recv = NULL;
	if (outcome != TREQ_DONE || !l->open)
		return;
	if (t->error != MPI_SUCCESS) {
		link_failed(l, "receive failed (message too long?)");
		return;
	}
	/* Post the next receive first: handling may send and expect answers. */
	if (post_receive(l) == -1) {
		link_failed(l, "cannot post a receive");
		return;
	}
	link_received(l, t->status.MPI_TAG, t->buf, (size_t)t->count);
}

/* A send expired: the agent does not take messages any more. */
static void
on_sent(struct treq *t, enum treq_outcome outcome, void *arg)
{
	struct link *l = arg;

	(void)t;
	if (outcome == TREQ_EXPIRED)
		link_failed(l, "a send did not complete in time");
}

static int
mpi_send(struct link *l, int tag, struct ft_buf *msg)
{
	struct links *ls = l->ls;

	return treq_isend(ls->treqs, msg, l->rank, tag, l->comm,
			  ft_now() + ls->send_timeout, 0, on_sent, l) ? 0 : -1;
}

static void
on_ping_done(struct treq *t, enum treq_outcome outcome, void *arg)
{
	struct link *l = arg;

	if (l->ping != t)
		return;
	l->ping = NULL;
	if (outcome == TREQ_EXPIRED)
		link_ping_expired(l);
}

static int
mpi_ping(struct link *l, double now)
{
	struct links *ls = l->ls;
	struct ft_buf msg = { 0 };
	struct treq *t;

	proto_put_ping(&msg, l->ping_seq);
	t = treq_isend(ls->treqs, &msg, l->rank, FT_MSG_PING, l->comm,
		       now + ls->ping_timeout, 1, on_ping_done, l);
	if (t == NULL)
		return -1;
	t->key = l->ping_seq;
	l->ping = t;
	return 0;
}

static void
mpi_pong(struct link *l)
{
	if (l->ping) {
		treq_reply(l->ping);
		l->ping = NULL;
	}
}

static const struct link_impl mpi_impl = {
	.name = "mpi",
	.send = mpi_send,
	.ping = mpi_ping,
	.pong = mpi_pong,
	.close = mpi_close,
};
