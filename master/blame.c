/* blame: who is charged with a worker's death (see blame.h). */
#include "blame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* One task charged with deaths: the nodes they were on, in order. */
struct rec {
	uint64_t tid;			/* 0: free slot */
	int deaths;
	int nnodes;
	int nodes[BLAME_NODES_MAX];
};

/* Open addressing with linear probing; deletion by backward shift. */
struct blame {
	struct rec *v;
	size_t cap;			/* a power of two, or 0 */
	size_t n;
};

struct blame *
blame_new(void)
{
	return ft_calloc(1, sizeof(struct blame));
}

void
blame_free(struct blame *b)
{
	if (b == NULL)
		return;
	free(b->v);
	free(b);
}

static size_t
slot_of(const struct blame *b, uint64_t tid)
{
	return (size_t)(tid * 0x9e3779b97f4a7c15ull >> 17) & (b->cap - 1);
}

/* The record of TID, or NULL. */
static struct rec *
find(const struct blame *b, uint64_t tid)
{
	size_t i;

	if (b->n == 0 || tid == 0)
		return NULL;
	for (i = slot_of(b, tid); b->v[i].tid != 0; i = (i + 1) & (b->cap - 1))
		if (b->v[i].tid == tid)
			return &b->v[i];
	return NULL;
}

static void
grow(struct blame *b)
{
	struct rec *old = b->v;
	size_t ocap = b->cap, i, k;

	b->cap = ocap ? ocap * 2 : 16;
	b->v = ft_calloc(b->cap, sizeof(*b->v));
	for (i = 0; i < ocap; i++) {
		if (old[i].tid == 0)
			continue;
		for (k = slot_of(b, old[i].tid); b->v[k].tid != 0;
		     k = (k + 1) & (b->cap - 1))
			;
		b->v[k] = old[i];
	}
	free(old);
}

/* The record of TID, made if needed. */
static struct rec *
get(struct blame *b, uint64_t tid)
{
	struct rec *r = find(b, tid);
	size_t i;

	if (r)
		return r;
	if ((b->n + 1) * 2 > b->cap)
		grow(b);
	for (i = slot_of(b, tid); b->v[i].tid != 0; i = (i + 1) & (b->cap - 1))
		;
	memset(&b->v[i], 0, sizeof(b->v[i]));
	b->v[i].tid = tid;
	b->n++;
	return &b->v[i];
}

/* Remove R from the table, shifting back the entries after it. */
static void
drop(struct blame *b, struct rec *r)
{
	size_t i = (size_t)(r - b->v), j = i, home;

	for (;;) {
		j = (j + 1) & (b->cap - 1);
		if (b->v[j].tid == 0)
			break;
		home = slot_of(b, b->v[j].tid);
		/* May entry j move into the hole at i? */
		if ((i <= j) ? (home <= i || home > j) : (home <= i && home > j)) {
			b->v[i] = b->v[j];
			i = j;
		}
	}
	b->v[i].tid = 0;
	b->n--;
}

static int
has_node(const struct rec *r, int node)
{
	int i;

	for (i = 0; i < r->nnodes; i++)
		if (r->nodes[i] == node)
			return 1;
	return 0;
}

static void
charge(struct blame *b, uint64_t tid, int node)
{
	struct rec *r = get(b, tid);

	r->deaths++;
	if (!has_node(r, node) && r->nnodes < BLAME_NODES_MAX)
		r->nodes[r->nnodes++] = node;
}

enum blame_verdict
blame_death(struct blame *b, uint64_t tid, int node, int hung,
	    int node_healthy, char *why, size_t n)
{
	struct rec *r = find(b, tid);

	if (tid == 0) {
		snprintf(why, n, "died running no task");
		return BLAME_NODE;
	}
	if (hung) {
		snprintf(why, n, "hung (its process was still there)");
		return BLAME_NODE;
	}
	if (r && (r->nnodes > 1 || !has_node(r, node))) {
		charge(b, tid, node);
		snprintf(why, n, "it has killed workers on %d nodes: poison",
			 find(b, tid)->nnodes);
		return BLAME_TASK;
	}
	if (node_healthy) {
		charge(b, tid, node);
		snprintf(why, n, "the worker died running it on a node "
			 "healthy otherwise");
		return BLAME_TASK;
	}
	snprintf(why, n, "the worker died running it on a node already "
		 "suspect");
	return BLAME_NODE;
}

int
blame_task_ok(struct blame *b, uint64_t tid, int node)
{
	struct rec *r = find(b, tid);
	int back = -1;

	if (r == NULL)
		return -1;
	if (r->nnodes == 1 && r->nodes[0] != node)
		back = r->nodes[0];
	drop(b, r);
	return back;
}

int
blame_task_failed(struct blame *b, uint64_t tid, const char *const *names,
		  char *why, size_t n)
{
	struct rec *r = find(b, tid);
	size_t len;
	int i;

	if (r == NULL)
		return 0;
	len = (size_t)snprintf(why, n, "poison: killed its worker %d time%s "
			       "on ", r->deaths, r->deaths == 1 ? "" : "s");
	for (i = 0; i < r->nnodes && len < n; i++)
		len += (size_t)snprintf(why + len, n - len, "%s%s",
					i ? ", " : "", names[r->nodes[i]]);
	drop(b, r);
	return 1;
}

int
blame_task_deaths(const struct blame *b, uint64_t tid)
{
	const struct rec *r = find(b, tid);

	return r ? r->deaths : 0;
}

size_t
blame_records(const struct blame *b)
{
	return b->n;
}
