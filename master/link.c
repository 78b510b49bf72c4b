/* link: each node agent's connection, whatever its kind (see link.h). */
#include "link.h"

#include <stdio.h>
#include <stdlib.h>

#include "proto.h"

void
links_init(struct links *ls, int n, struct treq_set *treqs,
	   struct ev_loop *loop, const struct link_ops *ops, int own_comms,
	   double send_timeout, double ping_timeout)
{
	ls->treqs = treqs;
	ls->loop = loop;
	ls->v = NULL;
	ls->n = 0;
	ls->ops = *ops;
	ls->own_comms = own_comms;
	ls->send_timeout = send_timeout;
	ls->ping_timeout = ping_timeout;
	ls->msgs_in = ls->msgs_out = ls->work_in = 0;
	links_grow(ls, n);
}

void
links_grow(struct links *ls, int n)
{
	int i;

	if (n <= ls->n)
		return;
	ls->v = ft_realloc(ls->v, (size_t)n * sizeof(*ls->v));
	for (i = ls->n; i < n; i++) {
		struct link *l = ft_calloc(1, sizeof(*l));

		l->ls = ls;
		l->id = i;
		l->comm = MPI_COMM_NULL;
		ls->v[i] = l;
	}
	ls->n = n;
}

void
links_free(struct links *ls)
{
	int i;

	for (i = 0; i < ls->n; i++)
		free(ls->v[i]);
	free(ls->v);
	ls->v = NULL;
	ls->n = 0;
}

void
link_opened(struct link *l, const struct link_impl *impl)
{
	l->impl = impl;
	l->pinging = 0;
	l->last_heard = l->last_ping = ft_now();
	l->open = 1;
}

void
link_close(struct links *ls, int id)
{
	struct link *l = ls->v[id];

	l->open = 0;
	l->pinging = 0;
	if (l->impl)
		l->impl->close(l);
	l->impl = NULL;
}

void
links_close_all(struct links *ls)
{
	int i;

	for (i = 0; i < ls->n; i++)
		link_close(ls, i);
}

int
link_send(struct links *ls, int id, int tag, struct ft_buf *msg)
{
	struct link *l = ls->v[id];

	if (!l->open || l->impl->send(l, tag, msg) == -1) {
		ft_buf_free(msg);
		return -1;
	}
	ls->msgs_out++;
	return 0;
}

int
link_ping(struct links *ls, int id, double now)
{
	struct link *l = ls->v[id];

	if (!l->open)
		return -1;
	l->ping_seq++;
	if (l->impl->ping(l, now) == -1)
		return -1;
	l->pinging = 1;
	l->last_ping = now;
	ls->msgs_out++;
	return 0;
}

void
link_pong(struct links *ls, int id, uint64_t seq)
{
	struct link *l = ls->v[id];

	if (l->open && l->pinging && seq == l->ping_seq) {
		l->pinging = 0;
		l->impl->pong(l);
	}
}

int
link_pinging(const struct links *ls, int id)
{
	return ls->v[id]->open && ls->v[id]->pinging;
}

const char *
link_kind(const struct links *ls, int id)
{
	return ls->v[id]->impl ? ls->v[id]->impl->name : "";
}

void
link_received(struct link *l, int tag, const void *p, size_t n)
{
	struct links *ls = l->ls;

	ls->msgs_in++;
	if (tag != FT_MSG_PONG)
		ls->work_in++;
	l->last_heard = ft_now();
	ls->ops.message(ls->ops.ctx, l->id, tag, p, n);
}

void
link_ping_expired(struct link *l)
{
	struct links *ls = l->ls;
	char why[96];

	l->pinging = 0;
	if (!l->open)
		return;
	/* Heard from since the ping went out: alive, only slow to answer
	 * (a node starting hundreds of processes on a few CPUs).  The next
	 * round pings it again; a stopped or dead peer says nothing. */
	if (l->last_heard > l->last_ping)
		return;
	if (ls->ops.starved && ls->ops.starved(ls->ops.ctx, l->id))
		return;
	snprintf(why, sizeof(why), "no answer to a ping in %.3g s",
		 ls->ping_timeout);
	ls->ops.failed(ls->ops.ctx, l->id, why);
}

void
link_failed(struct link *l, const char *reason)
{
	if (l->open)
		l->ls->ops.failed(l->ls->ops.ctx, l->id, reason);
}
