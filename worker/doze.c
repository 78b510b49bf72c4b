/* doze: the agent's sleeps between MPI polls (see doze.h). */
#include "doze.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#define RESCAN 2.0		/* seconds between listings of the sockets */
#define RESCAN_TRUSTED 10.0	/* ... once their hints have proved right */
#define TRUST 3			/* hinted messages before long sleeps */
#define HINTS_MAX 16		/* empty hints in a row: stop listening */

/* List the process's sockets after D->fds[0]. */
static void
scan_sockets(struct doze *d, double now)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	char link[64];
	ssize_t n;

	d->nfds = 1;
	d->scanned = now;
	if (dir == NULL)
		return;
	while ((e = readdir(dir)) != NULL && d->nfds < DOZE_MAX_FDS) {
		int fd = atoi(e->d_name);

		if (e->d_name[0] == '.' || fd == dirfd(dir) ||
		    (d->skip && d->skip(d->skip_arg, fd)))
			continue;
		n = readlinkat(dirfd(dir), e->d_name, link, sizeof(link) - 1);
		if (n <= 0 || strncmp(link, "socket:", 7) != 0)
			continue;
		d->fds[d->nfds].fd = fd;
		d->fds[d->nfds].events = POLLIN;
		d->nfds++;
	}
	closedir(dir);
}

int
doze(struct doze *d, int fd, double timeout)
{
	double now = ft_now();
	int n, i, listen = d->idle_hints < HINTS_MAX;

	if (listen && (d->nfds == 0 || now - d->scanned >
		       (doze_trusted(d) ? RESCAN_TRUSTED : RESCAN)))
		scan_sockets(d, now);
	d->fds[0].fd = fd;
	d->fds[0].events = POLLIN;
	n = poll(d->fds, listen ? (nfds_t)d->nfds : 1,
		 (int)ceil(timeout * 1000));
	d->woke_socket = 0;
	if (n <= 0)
		return 0;
	for (i = 1; listen && i < d->nfds; i++)
		if (d->fds[i].revents)
			d->woke_socket = 1;
	return 1;
}

void
doze_learn(struct doze *d, int got_message)
{
	if (got_message && d->woke_socket) {
		d->idle_hints = 0;
		if (d->trust < TRUST)
			d->trust++;
	} else if (got_message) {
		d->trust = 0;		/* it came without a hint */
	} else if (d->woke_socket) {
		/* A socket woke us for nothing (another thread's traffic,
		 * one at end of file): past HINTS_MAX in a row, stop
		 * listening to sockets until the next listing. */
		if (++d->idle_hints >= HINTS_MAX)
			d->trust = 0;
	}
	if (d->idle_hints >= HINTS_MAX && ft_now() - d->scanned > RESCAN)
		d->idle_hints = 0;
}

int
doze_trusted(const struct doze *d)
{
	return d->trust >= TRUST && d->idle_hints < HINTS_MAX;
}
