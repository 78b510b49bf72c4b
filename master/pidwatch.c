/* pidwatch: a worker process here is seen to exit at once (see pidwatch.h). */
#include "pidwatch.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

static void on_exit_seen(struct ev_loop *loop, ev_io *io, int revents);

void
pidwatches_init(struct pidwatches *ps, int n,
		void (*exited)(void *ctx, int id), void *ctx)
{
	ps->loop = NULL;
	ps->n = 0;
	ps->v = NULL;
	ps->exited = exited;
	ps->ctx = ctx;
	pidwatches_grow(ps, n);
}

void
pidwatches_grow(struct pidwatches *ps, int n)
{
	int i;

	if (n <= ps->n)
		return;
	ps->v = ft_realloc(ps->v, (size_t)n * sizeof(*ps->v));
	for (i = ps->n; i < n; i++) {
		ps->v[i] = ft_calloc(1, sizeof(*ps->v[i]));
		ps->v[i]->set = ps;
		ps->v[i]->id = i;
		ps->v[i]->fd = -1;
	}
	ps->n = n;
}

void
pidwatches_free(struct pidwatches *ps)
{
	int i;

	for (i = 0; i < ps->n; i++) {
		pidwatch_stop(ps, i);
		free(ps->v[i]);
	}
	free(ps->v);
	ps->v = NULL;
	ps->n = 0;
}

int
pidwatch_start(struct pidwatches *ps, struct ev_loop *loop, int id,
	       pid_t pid, unsigned long long start)
{
	struct pidwatch *p = ps->v[id];
	int fd;

	pidwatch_stop(ps, id);
	if (pid <= 0 || start == 0)
		return 0;
	fd = ft_pidfd_open(pid);
	if (fd == -1) {
		if (errno != ESRCH)
			log_debug("worker %d: no pidfd of %d: %s", id, (int)pid,
				  strerror(errno));
		return 0;
	}
	/* The pidfd is of whatever process held PID a moment ago; it is
	 * the worker's if PID still names a process of the worker's start
	 * time now (a pid is handed on only once its process is reaped,
	 * and the worker was there before we looked). */
	if (ft_proc_start(pid) != start) {
		close(fd);
		return 0;
	}
	ps->loop = loop;
	p->fd = fd;
	ev_io_init(&p->io, on_exit_seen, fd, EV_READ);
	p->io.data = p;
	ev_io_start(loop, &p->io);
	return 1;
}

void
pidwatch_stop(struct pidwatches *ps, int id)
{
	struct pidwatch *p = ps->v[id];

	if (p->fd == -1)
		return;
	ev_io_stop(ps->loop, &p->io);
	close(p->fd);
	p->fd = -1;
}

static void
on_exit_seen(struct ev_loop *loop, ev_io *io, int revents)
{
	struct pidwatch *p = io->data;
	struct pidwatches *ps = p->set;

	(void)loop, (void)revents;
	pidwatch_stop(ps, p->id);
	ps->exited(ps->ctx, p->id);
}
