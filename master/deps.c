/* deps: the tasks of one batch that wait for others of it (see deps.h). */
#include "deps.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* A task's state here. */
enum { T_UNKNOWN = 0, T_HELD, T_OK, T_FAILED, T_RELEASED };

/* An entry of the list of tasks that wait for one task. */
struct edge {
	uint32_t waiter;
	uint32_t next;			/* the next edge, or NO_EDGE */
};

#define NO_EDGE UINT32_MAX

/* News waiting for deps_next. */
struct news {
	uint32_t index;
	uint32_t blame;			/* DOOMED: who failed; READY: UINT32_MAX */
};

struct deps {
	uint32_t ntasks;		/* entries of the per-task arrays */
	uint8_t *state;
	uint32_t *left;			/* tasks it still waits for */
	uint32_t *head;			/* its waiters' first edge */
	struct deps_spec *spec;		/* a held task's spec */
	struct edge *edges;
	uint32_t nedges, capedges;
	struct news *q;			/* news, a ring-less FIFO */
	uint32_t qh, qt, capq;
	uint32_t held;
};

struct deps *
deps_new(void)
{
	return ft_calloc(1, sizeof(struct deps));
}

void
deps_free(struct deps *d)
{
	if (d == NULL)
		return;
	free(d->state);
	free(d->left);
	free(d->head);
	free(d->spec);
	free(d->edges);
	free(d->q);
	free(d);
}

/* Room in the per-task arrays for task INDEX. */
static void
grow(struct deps *d, uint32_t index)
{
	uint32_t n = d->ntasks, cap;

	if (index < n)
		return;
	cap = n ? n : 64;
	while (cap <= index)
		cap = cap > UINT32_MAX / 2 ? UINT32_MAX : 2 * cap;
	d->state = ft_realloc(d->state, cap);
	d->left = ft_realloc(d->left, (size_t)cap * sizeof(*d->left));
	d->head = ft_realloc(d->head, (size_t)cap * sizeof(*d->head));
	d->spec = ft_realloc(d->spec, (size_t)cap * sizeof(*d->spec));
	memset(d->state + n, T_UNKNOWN, cap - n);
	memset(d->left + n, 0, (size_t)(cap - n) * sizeof(*d->left));
	memset(d->head + n, 0xff, (size_t)(cap - n) * sizeof(*d->head));
	d->ntasks = cap;
}

static void
push(struct deps *d, uint32_t index, uint32_t blame)
{
	if (d->qt == d->capq) {
		if (d->qh > 0) {		/* reuse what was taken */
			memmove(d->q, d->q + d->qh,
				(size_t)(d->qt - d->qh) * sizeof(*d->q));
			d->qt -= d->qh;
			d->qh = 0;
		}
		if (d->qt == d->capq) {
			d->capq = d->capq ? 2 * d->capq : 64;
			d->q = ft_realloc(d->q, (size_t)d->capq * sizeof(*d->q));
		}
	}
	d->q[d->qt++] = (struct news){ index, blame };
}

/* WAITER waits for task OF. */
static void
link_waiter(struct deps *d, uint32_t of, uint32_t waiter)
{
	if (d->nedges == d->capedges) {
		d->capedges = d->capedges ? 2 * d->capedges : 64;
		d->edges = ft_realloc(d->edges, (size_t)d->capedges *
				      sizeof(*d->edges));
	}
	d->edges[d->nedges] = (struct edge){ waiter, d->head[of] };
	d->head[of] = d->nedges++;
}

enum deps_news
deps_hold(struct deps *d, uint32_t index, const uint32_t *after, uint32_t n,
	  const struct deps_spec *spec, uint32_t *blame)
{
	uint32_t i, max = index;

	for (i = 0; i < n; i++)
		if (after[i] > max)
			max = after[i];
	grow(d, max);
	for (i = 0; i < n; i++)
		if (d->state[after[i]] == T_FAILED) {
			*blame = after[i];
			return DEPS_DOOMED;
		}
	d->left[index] = 0;
	for (i = 0; i < n; i++)
		if (d->state[after[i]] != T_OK) {
			d->left[index]++;
			link_waiter(d, after[i], index);
		}
	if (d->left[index] == 0)
		return DEPS_READY;
	d->state[index] = T_HELD;
	d->spec[index] = *spec;
	d->held++;
	return DEPS_NONE;
}

/* WAITER, held, is ready or doomed: hand it out. */
static void
release(struct deps *d, uint32_t waiter, uint32_t blame)
{
	d->state[waiter] = T_RELEASED;
	d->held--;
	push(d, waiter, blame);
}

void
deps_ended(struct deps *d, uint32_t index, int ok)
{
	uint32_t e;

	grow(d, index);
	d->state[index] = ok ? T_OK : T_FAILED;
	for (e = d->head[index]; e != NO_EDGE; e = d->edges[e].next) {
		uint32_t w = d->edges[e].waiter;

		if (d->state[w] != T_HELD)
			continue;	/* doomed by another already */
		if (!ok)
			release(d, w, index);
		else if (--d->left[w] == 0)
			release(d, w, UINT32_MAX);
	}
	d->head[index] = NO_EDGE;	/* its waiters are told for good */
}

void
deps_doom(struct deps *d, uint32_t index, uint32_t blame)
{
	grow(d, index);
	d->state[index] = T_RELEASED;
	push(d, index, blame);
}

void
deps_cancel(struct deps *d)
{
	uint32_t i;

	for (i = 0; i < d->ntasks && d->held > 0; i++)
		if (d->state[i] == T_HELD)
			release(d, i, DEPS_CANCELLED);
}

enum deps_news
deps_next(struct deps *d, uint32_t *index, struct deps_spec *spec,
	  uint32_t *blame)
{
	struct news n;

	if (d->qh == d->qt)
		return DEPS_NONE;
	n = d->q[d->qh++];
	*index = n.index;
	*spec = d->spec[n.index];
	*blame = n.blame;
	return n.blame == UINT32_MAX ? DEPS_READY : DEPS_DOOMED;
}

int
deps_knows(const struct deps *d, uint32_t index)
{
	return index < d->ntasks && d->state[index] != T_UNKNOWN;
}

uint32_t
deps_held(const struct deps *d)
{
	return d->held;
}
