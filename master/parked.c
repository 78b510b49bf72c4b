/* parked: task results held back for a moment (see parked.h). */
#include "parked.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

struct parked {
	struct parked_result *v;
	size_t n, cap;
};

int
parked_is_kill(const struct proto_result *r)
{
	/* A task killed past its memory limit was killed for itself, by
	 * its slot or in its own cgroup: no node's doing. */
	return !r->ok && r->signal == 9 &&
	       !(r->reason_len >= 7 && memcmp(r->reason, "memory:", 7) == 0);
}

struct parked *
parked_new(void)
{
	return ft_calloc(1, sizeof(struct parked));
}

static char *
copy(const char *s, size_t len)
{
	char *d = ft_malloc(len + 1);

	if (len)
		memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

static void
release(struct parked_result *x)
{
	free((char *)x->r.reason);
	free((char *)x->r.out);
	free((char *)x->r.err);
	free((char *)x->r.value);
	free((char *)x->r.out_path);
	free((char *)x->r.err_path);
}

void
parked_free(struct parked *p)
{
	size_t i;

	if (p == NULL)
		return;
	for (i = 0; i < p->n; i++)
		release(&p->v[i]);
	free(p->v);
	free(p);
}

void
parked_add(struct parked *p, int worker, unsigned gen, double until,
	   const struct proto_result *r)
{
	struct parked_result *x;

	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 8;
		p->v = ft_realloc(p->v, p->cap * sizeof(*p->v));
	}
	x = &p->v[p->n++];
	x->worker = worker;
	x->gen = gen;
	x->until = until;
	x->r = *r;
	x->r.reason = copy(r->reason, r->reason_len);
	x->r.out = copy(r->out, r->out_len);
	x->r.err = copy(r->err, r->err_len);
	x->r.value = copy(r->value, r->value_len);
	x->r.out_path = copy(r->out_path, r->out_path_len);
	x->r.err_path = copy(r->err_path, r->err_path_len);
}

size_t
parked_count(const struct parked *p)
{
	return p->n;
}

const struct parked_result *
parked_at(const struct parked *p, size_t i)
{
	return &p->v[i];
}

void
parked_drop(struct parked *p, size_t i)
{
	release(&p->v[i]);
	p->v[i] = p->v[--p->n];
}
