/* taskgraph: the "after" lists of a batch's tasks (see taskgraph.h). */
#include "taskgraph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void
taskgraph_init(struct taskgraph_builder *b)
{
	memset(b, 0, sizeof(*b));
}

void
taskgraph_add(struct taskgraph_builder *b, const uint32_t *after, uint32_t n)
{
	if ((size_t)b->g.n + 2 > b->cap_off) {
		b->cap_off = b->cap_off ? 2 * b->cap_off : 64;
		b->g.off = ft_realloc(b->g.off, b->cap_off * sizeof(uint32_t));
	}
	if ((size_t)b->nidx + n > b->cap_idx) {
		while ((size_t)b->nidx + n > b->cap_idx)
			b->cap_idx = b->cap_idx ? 2 * b->cap_idx : 64;
		b->g.idx = ft_realloc(b->g.idx, b->cap_idx * sizeof(uint32_t));
	}
	b->g.off[b->g.n] = b->nidx;
	if (n)
		memcpy(b->g.idx + b->nidx, after, n * sizeof(uint32_t));
	b->nidx += n;
	b->g.n++;
	b->g.off[b->g.n] = b->nidx;
}

void
taskgraph_take(struct taskgraph_builder *b, struct taskgraph *g)
{
	*g = b->g;
	if (g->off == NULL) {
		g->off = ft_calloc(1, sizeof(uint32_t));
		g->n = 0;
	}
	memset(b, 0, sizeof(*b));
}

void
taskgraph_free(struct taskgraph *g)
{
	free(g->off);
	free(g->idx);
	memset(g, 0, sizeof(*g));
}

/* Every entry of G names another task of G.  0, or -1 with *TASK, WHY. */
static int
check_range(const struct taskgraph *g, uint32_t *task, char *why, size_t n)
{
	uint32_t i, k;

	for (i = 0; i < g->n; i++)
		for (k = g->off[i]; k < g->off[i + 1]; k++) {
			if (g->idx[k] == i) {
				*task = i;
				snprintf(why, n, "cycle: task %u waits for itself",
					 i);
				return -1;
			}
			if (g->idx[k] >= g->n) {
				*task = i;
				snprintf(why, n, "no task %u in this batch of %u",
					 g->idx[k], g->n);
				return -1;
			}
		}
	return 0;
}

/* A task of the list of I that is among those LEFT. */
static uint32_t
first_left(const struct taskgraph *g, const uint32_t *left, uint32_t i)
{
	uint32_t k;

	for (k = g->off[i]; k < g->off[i + 1]; k++)
		if (left[g->idx[k]])
			return g->idx[k];
	return i;		/* cannot happen: see name_cycle */
}

/* Name a cycle among the tasks LEFT (those Kahn's walk could not order:
 * each waits for another of them): from START, follow a task each waits
 * for that is left until one comes back; the cycle is the walk from it. */
static void
name_cycle(const struct taskgraph *g, const uint32_t *left, uint32_t start,
	   uint32_t *task, char *why, size_t n)
{
	uint8_t *seen = ft_calloc(g->n, 1);
	uint32_t i = start, cur;
	size_t len;

	while (!seen[i]) {
		seen[i] = 1;
		i = first_left(g, left, i);
	}
	*task = i;
	len = (size_t)snprintf(why, n, "cycle: %u", i);
	cur = i;
	do {
		cur = first_left(g, left, cur);
		if (len < n)
			len += (size_t)snprintf(why + len, n - len, " -> %u",
						cur);
	} while (cur != i);
	free(seen);
}

int
taskgraph_check(const struct taskgraph *g, uint32_t *task, char *why,
		size_t n)
{
	uint32_t *left, *head, *next, *from, *queue, i, k, qh = 0, qt = 0;
	uint32_t nidx = g->n ? g->off[g->n] : 0, done = 0;
	int rc = 0;

	if (g->n == 0 || nidx == 0)
		return 0;
	if (check_range(g, task, why, n) == -1)
		return -1;
	/* Kahn's walk: LEFT counts what each task still waits for; the
	 * entries naming task I are a list through HEAD[I] and NEXT, each
	 * entry's task in FROM. */
	left = ft_calloc(g->n, sizeof(uint32_t));
	head = ft_malloc(g->n * sizeof(uint32_t));
	next = ft_malloc((size_t)nidx * sizeof(uint32_t));
	from = ft_malloc((size_t)nidx * sizeof(uint32_t));
	queue = ft_malloc(g->n * sizeof(uint32_t));
	memset(head, 0xff, g->n * sizeof(uint32_t));
	for (i = 0; i < g->n; i++)
		for (k = g->off[i]; k < g->off[i + 1]; k++) {
			left[i]++;
			from[k] = i;
			next[k] = head[g->idx[k]];
			head[g->idx[k]] = k;
		}
	for (i = 0; i < g->n; i++)
		if (left[i] == 0)
			queue[qt++] = i;
	while (qh < qt) {
		uint32_t t = queue[qh++];

		done++;
		for (k = head[t]; k != UINT32_MAX; k = next[k])
			if (--left[from[k]] == 0)
				queue[qt++] = from[k];
	}
	if (done < g->n) {
		for (i = 0; left[i] == 0; i++)
			;
		name_cycle(g, left, i, task, why, n);
		rc = -1;
	}
	free(left);
	free(head);
	free(next);
	free(from);
	free(queue);
	return rc;
}
