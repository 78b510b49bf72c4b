/* defer: work queued now, run after the current callback (see defer.h). */
#include "defer.h"

#include <stdlib.h>

#include "util.h"

struct defer_item {
	defer_fn fn;
	uint64_t a, b;
	char *text;
	struct defer_item *next;
};

void
defer_init(struct defer *d, void *ctx)
{
	d->ctx = ctx;
	d->head = d->tail = NULL;
	d->queued = d->ran = 0;
}

void
defer_call(struct defer *d, defer_fn fn, uint64_t a, uint64_t b,
	   const char *text)
{
	struct defer_item *it = ft_calloc(1, sizeof(*it));

	it->fn = fn;
	it->a = a;
	it->b = b;
	it->text = text ? ft_strdup(text) : NULL;
	if (d->tail)
		d->tail->next = it;
	else
		d->head = it;
	d->tail = it;
	d->queued++;
}

int
defer_run(struct defer *d)
{
	int n = 0;

	while (d->head) {
		struct defer_item *it = d->head;

		d->head = it->next;
		if (d->head == NULL)
			d->tail = NULL;
		it->fn(d->ctx, it->a, it->b, it->text);
		free(it->text);
		free(it);
		d->ran++;
		n++;
	}
	return n;
}

void
defer_clear(struct defer *d)
{
	while (d->head) {
		struct defer_item *it = d->head;

		d->head = it->next;
		free(it->text);
		free(it);
	}
	d->tail = NULL;
}
