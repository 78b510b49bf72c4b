/* ftar_plan: ftallreduce's summation order and layouts (see ftar_plan.h). */
#include "ftar_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int
ftar_pow2_floor(int n)
{
	int p = 1;

	while (p <= n / 2)
		p *= 2;
	return p;
}

int
ftar_log2(int pow2)
{
	int k = 0;

	while ((1 << k) < pow2)
		k++;
	return k;
}

void
ftar_layout_free(struct ftar_layout *lo)
{
	free(lo->pos_rank);
	free(lo->pos_src);
	free(lo->free_rank);
	free(lo->free_src);
	memset(lo, 0, sizeof(*lo));
}

/* Allocate LO for NPOS positions and at most NFREE free ranks. */
static void
layout_alloc(struct ftar_layout *lo, int pp, int npos, int nfree)
{
	memset(lo, 0, sizeof(*lo));
	lo->pp = pp;
	lo->top = ftar_log2(pp);
	lo->npos = npos;
	lo->pos_rank = ft_calloc(npos, sizeof(int));
	lo->pos_src = ft_calloc(npos, sizeof(int));
	lo->free_rank = ft_calloc(nfree > 0 ? nfree : 1, sizeof(int));
	lo->free_src = ft_calloc(nfree > 0 ? nfree : 1, sizeof(int));
}

void
ftar_layout_initial(int P, int S, struct ftar_layout *lo)
{
	int pp = ftar_pow2_floor(P), q, j;

	layout_alloc(lo, pp, pp, P + S - pp);
	lo->level = 0;
	lo->d = 1;
	for (q = 0; q < pp; q++) {
		lo->pos_rank[q] = q;
		lo->pos_src[q] = FTAR_SRC_HELD;
	}
	for (j = 0; j < P + S - pp; j++) {
		lo->free_rank[j] = pp + j;
		lo->free_src[j] = j % pp;
	}
	lo->nfree = P + S - pp;
}

int
ftar_layout_pos(const struct ftar_layout *lo, int r)
{
	int q;

	for (q = 0; q < lo->npos; q++)
		if (lo->pos_rank[q] == r)
			return q;
	return -1;
}

int
ftar_layout_free_index(const struct ftar_layout *lo, int r)
{
	int j;

	for (j = 0; j < lo->nfree; j++)
		if (lo->free_rank[j] == r)
			return j;
	return -1;
}

/* Does H hold node(L, B)? */
static int
holds(const struct ftar_hold *h, int L, int b)
{
	return h->leaf >= 0 && h->f <= L && L <= h->l && (h->leaf >> L) == b;
}

/* The level to resume at: that of the slowest live active rank (one that
 * holds nothing yet counts as level 0), 0 when no active rank is left. */
static int
resume_level(const struct ftar_hold *hold, const unsigned char *dead,
	     int nranks, int top)
{
	int r, level = -1, l;

	for (r = 0; r < nranks; r++) {
		if (dead[r] || !hold[r].active)
			continue;
		l = hold[r].leaf >= 0 ? hold[r].l : 0;
		if (l > top)
			l = top;
		if (level < 0 || l < level)
			level = l;
	}
	return level < 0 ? 0 : level;
}

/* Order of preference among the holders of a node: active ranks first,
 * then by world rank (so that positions move as little as possible). */
static int
better_holder(const struct ftar_hold *hold, int a, int b)
{
	if (hold[a].active != hold[b].active)
		return hold[a].active > hold[b].active;
	return a < b;
}

/* The holders of node (L, B) among live ranks, best first, into OUT.
 * Returns how many. */
static int
holders_of(const struct ftar_hold *hold, const unsigned char *dead,
	   int nranks, int L, int b, int *out)
{
	int r, k = 0, i;

	for (r = 0; r < nranks; r++) {
		if (dead[r] || !holds(&hold[r], L, b))
			continue;
		for (i = k; i > 0 && better_holder(hold, r, out[i - 1]); i--)
			out[i] = out[i - 1];
		out[i] = r;
		k++;
	}
	return k;
}

/* Give each node of LO's level up to d of its holders; a position left
 * empty gets -1 and the node's best holder (or RELOAD at level 0) as its
 * source.  TAKEN marks the ranks placed.  0, or -1 with WHY. */
static int
place_holders(struct ftar_layout *lo, const struct ftar_hold *hold,
	      const unsigned char *dead, int nranks, unsigned char *taken,
	      char *why, size_t n)
{
	int *hs = ft_malloc(nranks * sizeof(int));
	int nodes = lo->npos / lo->d, b, k, i, rc = 0;

	for (b = 0; b < nodes && rc == 0; b++) {
		k = holders_of(hold, dead, nranks, lo->level, b, hs);
		if (k == 0 && lo->level > 0) {
			snprintf(why, n, "the sum of leaves %d-%d (level %d) "
				 "is lost: no survivor holds it",
				 b << lo->level, ((b + 1) << lo->level) - 1,
				 lo->level);
			rc = -1;
		}
		for (i = 0; i < lo->d && rc == 0; i++) {
			int q = b * lo->d + i;

			if (i < k) {
				lo->pos_rank[q] = hs[i];
				lo->pos_src[q] = FTAR_SRC_HELD;
				taken[hs[i]] = 1;
			} else {
				lo->pos_rank[q] = -1;
				lo->pos_src[q] = k ? hs[0] : FTAR_SRC_RELOAD;
			}
		}
	}
	free(hs);
	return rc;
}

/* Fill the empty positions, then list the free ranks, from the live ranks
 * not TAKEN, in world rank order. */
static void
fill_and_free(struct ftar_layout *lo, const struct ftar_hold *hold,
	      const unsigned char *dead, int nranks, unsigned char *taken)
{
	int r = 0, q, needy = 0;

	for (q = 0; q < lo->npos; q++) {
		if (lo->pos_rank[q] >= 0)
			continue;
		while (dead[r] || taken[r])
			r++;
		lo->pos_rank[q] = r;
		taken[r] = 1;
	}
	lo->nfree = 0;
	for (r = 0; r < nranks; r++) {
		if (dead[r] || taken[r])
			continue;
		lo->free_rank[lo->nfree] = r;
		lo->free_src[lo->nfree] = holds(&hold[r], lo->top, 0) ? -1 :
					  needy++ % lo->npos;
		lo->nfree++;
	}
}

int
ftar_layout_plan(int pp, const struct ftar_hold *hold,
		 const unsigned char *dead, int nranks,
		 struct ftar_layout *lo, char *why, size_t n)
{
	int top = ftar_log2(pp), level, nodes, live = 0, npos, r, rc;
	unsigned char *taken;

	for (r = 0; r < nranks; r++)
		live += !dead[r];
	if (live == 0) {
		snprintf(why, n, "no rank is left");
		return -1;
	}
	level = resume_level(hold, dead, nranks, top);
	nodes = pp >> level;
	npos = ftar_pow2_floor(live);
	if (npos > pp)
		npos = pp;
	if (npos < nodes) {
		snprintf(why, n, "%d survivors cannot hold the %d partial sums "
			 "of level %d", live, nodes, level);
		return -1;
	}
	layout_alloc(lo, pp, npos, live);
	lo->level = level;
	lo->d = npos / nodes;
	taken = ft_calloc(nranks, 1);
	rc = place_holders(lo, hold, dead, nranks, taken, why, n);
	if (rc == 0)
		fill_and_free(lo, hold, dead, nranks, taken);
	else
		ftar_layout_free(lo);
	free(taken);
	return rc;
}
