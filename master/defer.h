/*
 * defer: work queued by a callback and run after it, once the caller is
 * out of whatever it was in the middle of.
 *
 * The scheduler calls its owner back from inside its own loops (a task
 * lost while deadlines are checked, a worker found hung while the slow
 * rule runs); handling such news at once would re-enter the scheduler.
 * Its owner queues the handling here instead, and the loop runs the queue
 * after each of its callbacks (defer_run), in the order things were
 * queued, until it is empty: work queued by queued work runs too.
 */
#ifndef FT_DEFER_H
#define FT_DEFER_H

#include <stdint.h>

/* CTX is the queue's owner's; A, B and TEXT (copied) are the call's own. */
typedef void (*defer_fn)(void *ctx, uint64_t a, uint64_t b, const char *text);

struct defer_item;

struct defer {
	void *ctx;
	struct defer_item *head, *tail;
	uint64_t queued, ran;		/* counters */
};

void defer_init(struct defer *d, void *ctx);
/* Queue FN(ctx, A, B, TEXT); TEXT may be NULL. */
void defer_call(struct defer *d, defer_fn fn, uint64_t a, uint64_t b,
		const char *text);
/* Run everything queued, oldest first, until nothing is left.  Returns
 * how many calls ran. */
int defer_run(struct defer *d);
/* Drop what is queued without running it. */
void defer_clear(struct defer *d);

#endif
