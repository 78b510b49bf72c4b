/*
 * deps: the tasks of one batch that wait for others of it (a task's
 * "after", common/batch.h); no I/O, no MPI.
 *
 * A batch with such tasks has one deps.  Each task is held here until
 * every task it waits for has succeeded, then handed back ready (its spec
 * kept meanwhile); when one of them fails, it is handed back doomed: the
 * batch fails it without running it, and its own waiters follow when that
 * failure is told here like any other.  The work is linear in the tasks
 * and their lists: a chain or a fan-in of a million tasks is planned in a
 * fraction of a second, and news are a queue, never a recursion.
 */
#ifndef FT_DEPS_H
#define FT_DEPS_H

#include <stdint.h>

/* What a held task needs to be queued once it is ready. */
struct deps_spec {
	const char *spec;		/* its JSON text (the batch's) */
	uint32_t len;
	float timeout;			/* its "timeout", 0: none */
	int8_t kind;			/* its plugin's index */
	uint8_t gpus;
	uint16_t cpus;
	uint32_t mem;			/* MiB, 0: none */
	uint32_t treq;			/* seconds asked, 0: none */
	int files;			/* it names output files */
};

/* deps_next's news. */
enum deps_news {
	DEPS_NONE = 0,
	DEPS_READY,			/* queue it */
	DEPS_DOOMED,			/* fail it: a task it waits for failed */
};

struct deps;

struct deps *deps_new(void);
void deps_free(struct deps *d);

/* Task INDEX, not ended, waits for the N tasks of AFTER.  DEPS_READY when
 * it need not wait (they all succeeded already), DEPS_DOOMED with *BLAME
 * when one of them failed already, else DEPS_NONE: it is held, with
 * SPEC, until deps_next hands it back. */
enum deps_news deps_hold(struct deps *d, uint32_t index, const uint32_t *after,
			 uint32_t n, const struct deps_spec *spec,
			 uint32_t *blame);
/* Hand task INDEX back doomed (BLAME: the task it waited for), as if it
 * had been held: deps_hold said so, and its waiters are to follow. */
void deps_doom(struct deps *d, uint32_t index, uint32_t blame);
/* Every task held is handed back doomed, with BLAME DEPS_CANCELLED (the
 * batch was cancelled). */
#define DEPS_CANCELLED (UINT32_MAX - 1)
void deps_cancel(struct deps *d);
/* Task INDEX ended, OK or not (also a task never held). */
void deps_ended(struct deps *d, uint32_t index, int ok);
/* The next task the news made ready (with *SPEC) or doomed (with *BLAME,
 * the task it waited for that failed), in the order they came;
 * DEPS_NONE when there is none. */
enum deps_news deps_next(struct deps *d, uint32_t *index,
			 struct deps_spec *spec, uint32_t *blame);
/* Has task INDEX been told of here (held, or ended)? */
int deps_knows(const struct deps *d, uint32_t index);
/* Tasks held now. */
uint32_t deps_held(const struct deps *d);

#endif
