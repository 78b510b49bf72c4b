/*
 * ftar_plan: the summation order of ftallreduce and the layouts of its
 * ranks, before and after failures (pure functions, no MPI).
 *
 * The order.  With P active ranks holding vectors v_0 .. v_{P-1}, let
 * pp = the largest power of two <= P and top = log2(pp).  The sum is a
 * fixed binary tree over pp leaves, elementwise:
 *
 *   node(0, b)   = v_b + v_{b+pp}    when b + pp < P
 *                = v_b               otherwise           (0 <= b < pp)
 *   node(L+1, b) = node(L, 2b) + node(L, 2b+1)           (0 <= b < pp>>(L+1))
 *   result       = node(top, 0)
 *
 * each "+" one IEEE double addition with the lower-numbered operand on
 * the left.  Every rank that computes a node computes it with exactly these
 * operands in this order, whoever it is and whatever failed before, so the
 * result is bit-identical to a serial evaluation of the tree.
 *
 * Positions.  Recursive doubling runs on npos positions (a power of two),
 * each held by one world rank.  A layout starts at level `level`: node
 * (level, b) is held by the d = npos >> (top - level) positions b*d ..
 * b*d + d - 1; at the step of level L, position q exchanges with position
 * q ^ (d << (L - level)) and both compute node(L+1, ..).  Ranks without a
 * position are free (spares, and the ranks beyond pp once they handed
 * their vector over); at the end each free rank gets the result from one
 * position.
 *
 * Recovery.  Every surviving rank says what it holds (struct ftar_hold).
 * The gang resumes at the level of its slowest surviving active rank,
 * level L: each node of level L must be held by a survivor, which then
 * sends it to the ranks that take the other positions of that node (the
 * spare replacing a dead rank, as in the seed: a healthy rank of the same
 * block sends the data).  At level 0 a node is rebuilt from the job's input
 * (a file, or the seed), so a rank that dies before its first exchange
 * loses nothing.  A node of level > 0 that no survivor holds (two deaths in
 * one block) fails the gang.  Without enough ranks to fill every position
 * the gang shrinks to the largest power of two of survivors (at least one
 * position per node of level L).
 */
#ifndef FT_FTAR_PLAN_H
#define FT_FTAR_PLAN_H

#include <stddef.h>

/* pos_src values besides a world rank. */
#define FTAR_SRC_HELD (-1)	/* the rank already holds its node */
#define FTAR_SRC_RELOAD (-2)	/* the rank rebuilds its node from input */

/* What one rank holds. */
struct ftar_hold {
	int active;		/* has a position in the layout it follows */
	int leaf;		/* a leaf under its nodes, -1: holds nothing */
	int f, l;		/* it holds node(L, leaf >> L) for f <= L <= l */
};

struct ftar_layout {
	int pp, top;		/* leaves and levels of the tree */
	int level;		/* where the steps start */
	int npos, d;		/* positions, positions per node of `level` */
	int *pos_rank;		/* [npos] world rank at each position */
	int *pos_src;		/* [npos] FTAR_SRC_* or the world rank that
				 * sends node(level, q / d) to position q */
	int *free_rank;		/* world ranks without a position */
	int *free_src;		/* [nfree] the position that sends the result
				 * to each, or -1 when it holds it already */
	int nfree;
};

/* The largest power of two <= N (N >= 1), and log2 of a power of two. */
int ftar_pow2_floor(int n);
int ftar_log2(int pow2);

/* The layout of a gang of P active ranks and S spares before any death:
 * positions 0 .. pp-1 on world ranks 0 .. pp-1 (they build their leaves by
 * the fold), free ranks pp .. P+S-1. */
void ftar_layout_initial(int P, int S, struct ftar_layout *lo);

/* The layout after failures, for a tree of PP leaves: HOLD[r] says what
 * world rank r (of NRANKS) holds, DEAD[r] whether it is dead.  0, or -1
 * with WHY when the gang cannot go on.  Every survivor computes the same
 * layout from the same input. */
int ftar_layout_plan(int pp, const struct ftar_hold *hold,
		     const unsigned char *dead, int nranks,
		     struct ftar_layout *lo, char *why, size_t n);

/* Position of world rank R in LO, or -1; index of R among the free, or -1. */
int ftar_layout_pos(const struct ftar_layout *lo, int r);
int ftar_layout_free_index(const struct ftar_layout *lo, int r);

void ftar_layout_free(struct ftar_layout *lo);

#endif
