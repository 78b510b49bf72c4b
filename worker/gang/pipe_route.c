/* pipe_route: grid, routes, chunks and model of the pipeline job. */
#include "pipe_route.h"

void
pipe_grid_init(struct pipe_grid *g, int w, int h, int routes)
{
	g->w = w;
	g->h = h;
	g->routes = routes;
	g->hops = (w - 1) + (h - 1);
	g->nranks = 2 + routes * (g->hops - 1);
}

int
pipe_rank(const struct pipe_grid *g, int route, int hop)
{
	if (hop == 0)
		return 0;
	if (hop == g->hops)
		return g->nranks - 1;
	return 1 + route * (g->hops - 1) + (hop - 1);
}

void
pipe_coord(const struct pipe_grid *g, int route, int hop, int *x, int *y)
{
	int first = route == 0 ? g->w - 1 : g->h - 1;	/* hops of leg 1 */

	if (hop <= first) {
		*x = route == 0 ? hop : 0;
		*y = route == 0 ? 0 : hop;
	} else {
		*x = route == 0 ? g->w - 1 : hop - first;
		*y = route == 0 ? hop - first : g->h - 1;
	}
}

void
pipe_where(const struct pipe_grid *g, int r, int *route, int *hop)
{
	if (r == 0 || r == g->nranks - 1) {
		*route = 0;
		*hop = r == 0 ? 0 : g->hops;
		return;
	}
	*route = (r - 1) / (g->hops - 1);
	*hop = 1 + (r - 1) % (g->hops - 1);
}

void
pipe_part(uint64_t l, int k, int c, uint64_t *off, uint64_t *len)
{
	uint64_t a = l * (uint64_t)c / (uint64_t)k;
	uint64_t b = l * (uint64_t)(c + 1) / (uint64_t)k;

	*off = a;
	*len = b - a;
}

int
pipe_route_chunks(const struct pipe_grid *g, int k, int route)
{
	return (k - route + g->routes - 1) / g->routes;
}

double
pipe_model_pipelined(const struct pipe_grid *g, uint64_t l, int k, double ts,
		     double tb)
{
	int per_route = (k + g->routes - 1) / g->routes;

	return (per_route + g->hops - 1) * (ts + (double)l / k * tb);
}

double
pipe_model_store_forward(const struct pipe_grid *g, uint64_t l, double ts,
			 double tb)
{
	return g->hops * (ts + (double)l / g->routes * tb);
}

double
pipe_model_seed(uint64_t l, double tb)
{
	return (double)l * tb;
}
