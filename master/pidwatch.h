/*
 * pidwatch: a worker process on the master's machine is seen to exit at
 * once.
 *
 * Otherwise a worker is found dead only when a request to it expires
 * (link.h): up to a heartbeat and its timeout after a SIGKILL, while its
 * task waits.  When the process runs here, a pidfd (pidfd_open(2)) turns
 * readable the moment it exits, and the loop hears of it through an
 * ev_io.  A hung process does not exit: deadlines still find those.
 * Where a process cannot be watched (another host, no pidfds, out of
 * descriptors) nothing changes and deadlines are all there is.
 *
 * One slot per node agent, parallel to the agents.  A slot watches at
 * most one process, known by pid and start time, so that a pid the
 * kernel has handed to another process is never taken for the worker.
 */
#ifndef FT_PIDWATCH_H
#define FT_PIDWATCH_H

#include <ev.h>
#include <sys/types.h>

struct pidwatches;

struct pidwatch {
	ev_io io;
	struct pidwatches *set;
	int id;
	int fd;				/* the pidfd, -1: nothing watched */
};

struct pidwatches {
	struct ev_loop *loop;
	struct pidwatch **v;		/* apart: their watchers stay put */
	int n;
	/* Worker ID's watched process has exited (its watch is closed). */
	void (*exited)(void *ctx, int id);
	void *ctx;
};

void pidwatches_init(struct pidwatches *ps, int n,
		     void (*exited)(void *ctx, int id), void *ctx);
/* N slots from now on (more than before). */
void pidwatches_grow(struct pidwatches *ps, int n);
/* Close every watch and free the slots. */
void pidwatches_free(struct pidwatches *ps);
/* Watch worker ID's process PID, started at START (ft_proc_start), on
 * LOOP, in place of what ID watched before.  1 if watched; 0 if it cannot
 * be (see above); a process that is gone already is reported through
 * EXITED from the loop. */
int pidwatch_start(struct pidwatches *ps, struct ev_loop *loop, int id,
		   pid_t pid, unsigned long long start);
/* Stop watching worker ID's process (nothing if none). */
void pidwatch_stop(struct pidwatches *ps, int id);

#endif
