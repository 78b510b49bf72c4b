/* gang_req: request sets and the wait that never hangs on a dead peer. */
#include "gang_req.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

void
gang_reqs_init(struct gang_reqs *s)
{
	memset(s, 0, sizeof(*s));
	s->dead_peer = -1;
}

void
gang_reqs_clear(struct gang_reqs *s)
{
	s->n = 0;
	s->pending = 0;
	s->dead_peer = -1;
}

void
gang_reqs_free(struct gang_reqs *s)
{
	free(s->v);
	free(s->mpi);
	free(s->idx);
	free(s->sts);
	gang_reqs_init(s);
}

/* Room for one more request. */
static void
grow(struct gang_reqs *s)
{
	if (s->n < s->cap)
		return;
	s->cap = s->cap ? 2 * s->cap : 8;
	s->v = ft_realloc(s->v, s->cap * sizeof(*s->v));
	s->mpi = ft_realloc(s->mpi, s->cap * sizeof(*s->mpi));
	s->idx = ft_realloc(s->idx, s->cap * sizeof(*s->idx));
	s->sts = ft_realloc(s->sts, s->cap * sizeof(*s->sts));
}

/* Record request R (just started) with PEER. */
static int
add(struct gang_reqs *s, MPI_Request r, int peer, int is_recv, void *buf)
{
	struct gang_req *q;

	grow(s);
	q = &s->v[s->n];
	memset(q, 0, sizeof(*q));
	q->peer = peer;
	q->is_recv = is_recv;
	q->buf = buf;
	s->mpi[s->n] = r;
	s->pending++;
	return s->n++;
}

int
gang_isend(struct gang *g, struct gang_reqs *s, const void *buf, int count,
	   MPI_Datatype type, int peer, int tag)
{
	MPI_Request r;

	if (MPI_Isend(buf, count, type, peer, tag, gang_comm(g), &r) !=
	    MPI_SUCCESS)
		return -1;
	return add(s, r, peer, 0, (void *)buf);
}

int
gang_irecv(struct gang *g, struct gang_reqs *s, void *buf, int count,
	   MPI_Datatype type, int peer, int tag)
{
	MPI_Request r;

	if (MPI_Irecv(buf, count, type, peer, tag, gang_comm(g), &r) !=
	    MPI_SUCCESS)
		return -1;
	return add(s, r, peer, 1, buf);
}

/* Mark what MPI finished.  How many completed, or -1 on an MPI error. */
static int
collect(struct gang_reqs *s)
{
	int out = 0, i, rc;

	rc = MPI_Testsome(s->n, s->mpi, &out, s->idx, s->sts);
	if (rc != MPI_SUCCESS)
		return -1;
	if (out == MPI_UNDEFINED)
		return 0;
	for (i = 0; i < out; i++) {
		struct gang_req *q = &s->v[s->idx[i]];

		q->done = 1;
		q->st = s->sts[i];
		s->pending--;
	}
	return out;
}

/* The peer of a pending request that the master declared dead, or -1. */
static int
dead_peer(struct gang *g, const struct gang_reqs *s)
{
	int i;

	for (i = 0; i < s->n; i++)
		if (!s->v[i].done && gang_is_dead(g, s->v[i].peer))
			return s->v[i].peer;
	return -1;
}

int
gang_wait(struct gang *g, struct gang_reqs *s, unsigned flags,
	  uint32_t epoch)
{
	struct gang_nap nap = { 0 };
	int got;

	for (;;) {
		got = s->pending ? collect(s) : 0;
		if (got < 0)
			return GANG_ERR;
		if (s->pending == 0 || (got > 0 && (flags & GANG_WAIT_SOME)))
			return GANG_OK;
		if ((s->dead_peer = dead_peer(g, s)) >= 0)
			return GANG_DIED;
		if ((flags & GANG_WAIT_ANY_DEATH) && gang_epoch(g) != epoch)
			return GANG_EPOCH;
		if (gang_poll(g) == GANG_STOP)
			return GANG_STOP;
		if (got > 0)
			gang_nap_reset(&nap);
		else
			gang_nap(&nap);
	}
}

void
gang_abandon(struct gang *g, struct gang_reqs *s)
{
	int i;

	for (i = 0; i < s->n; i++) {
		struct gang_req *q = &s->v[i];

		if (q->done || s->mpi[i] == MPI_REQUEST_NULL)
			continue;
		if (q->is_recv)
			MPI_Cancel(&s->mpi[i]);
		MPI_Request_free(&s->mpi[i]);
		gang_retire(g, q->buf);
	}
	gang_reqs_clear(s);
}
