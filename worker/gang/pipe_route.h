/*
 * pipe_route: the grid of the pipeline job (seed 003, part 1), its routes,
 * its chunks and its time model (pure functions, no MPI).
 *
 * A W x H grid of nodes (x, y); the message goes from (0,0) to (W-1,H-1)
 * over `routes` L-shaped routes of hops = (W-1) + (H-1) links each:
 *
 *   route 0 (horizontal first): (0,0) (1,0) .. (W-1,0) (W-1,1) .. (W-1,H-1)
 *   route 1 (vertical first):   (0,0) (0,1) .. (0,H-1) (1,H-1) .. (W-1,H-1)
 *
 * Only the nodes on a route take part, one process each (nodes off the
 * routes would never send or receive): world rank 0 is the source, ranks
 * 1 + r*(hops-1) .. r*(hops-1) + hops - 1 the inner nodes of route r in
 * order, the last rank the far corner.  The two routes share only their
 * ends, so they are link-disjoint.
 *
 * Chunks: byte range of chunk c of K over L bytes is [c*L/K, (c+1)*L/K)
 * (integer division); chunk c travels on route c % routes.  Unpipelined
 * (store and forward): route r carries part r of `routes` equal parts as
 * one message, which every node receives whole before sending it on.
 *
 * Model, with Ts the start-up time of a hop and Tb its time per byte:
 *   pipelined      T = (ceil(K / routes) + hops - 1) * (Ts + (L / K) * Tb)
 *   store&forward  T = hops * (Ts + (L / routes) * Tb)
 *   seed's         T = L * Tb  (long message: start-up and filling of the
 *                               pipeline neglected, one route)
 */
#ifndef FT_PIPE_ROUTE_H
#define FT_PIPE_ROUTE_H

#include <stdint.h>

struct pipe_grid {
	int w, h, routes;
	int hops;		/* links per route */
	int nranks;		/* processes of the gang */
};

/* The grid of W x H (W * H >= 2) with ROUTES routes (2 needs W, H >= 2). */
void pipe_grid_init(struct pipe_grid *g, int w, int h, int routes);
/* World rank of node HOP (0 .. hops) of ROUTE. */
int pipe_rank(const struct pipe_grid *g, int route, int hop);
/* Coordinates of node HOP of ROUTE. */
void pipe_coord(const struct pipe_grid *g, int route, int hop, int *x,
		int *y);
/* Route and hop of world rank R (the source and the far corner are on
 * every route: route 0 is given). */
void pipe_where(const struct pipe_grid *g, int r, int *route, int *hop);

/* Byte range [*OFF, *OFF + *LEN) of part C of K parts of L bytes. */
void pipe_part(uint64_t l, int k, int c, uint64_t *off, uint64_t *len);
/* How many of K chunks travel on ROUTE. */
int pipe_route_chunks(const struct pipe_grid *g, int k, int route);

double pipe_model_pipelined(const struct pipe_grid *g, uint64_t l, int k,
			    double ts, double tb);
double pipe_model_store_forward(const struct pipe_grid *g, uint64_t l,
				double ts, double tb);
double pipe_model_seed(uint64_t l, double tb);

#endif
