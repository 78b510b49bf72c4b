/*
 * doze: how the worker's agent sleeps between MPI polls.
 *
 * MPI offers nothing to wait on, so the agent sleeps in poll(2) on what it
 * can see: its slots' epoll descriptor and the process's other sockets
 * (the MPI library's connections; under Open MPI a message from the
 * master arrives on one).  A wake-up on a socket is only a hint: the agent
 * then polls MPI.  Whether the hints can be trusted is learnt: when a
 * message turns up after a sleep that no socket ended, messages arrive
 * some other way (shared memory, another MPI) and the socket list is
 * scanned again sooner.  The agent bounds every sleep itself (agent.c).
 */
#ifndef FT_DOZE_H
#define FT_DOZE_H

#include <poll.h>

#define DOZE_MAX_FDS 64

struct doze {
	struct pollfd fds[DOZE_MAX_FDS];	/* [0]: the caller's */
	int (*skip)(void *arg, int fd);	/* sockets not to list (NULL: none) */
	void *skip_arg;
	int nfds;
	double scanned;			/* when the sockets were listed */
	int trust;			/* messages that came with a socket's hint */
	int woke_socket;		/* the last sleep ended on a socket */
	int idle_hints;			/* hints in a row that led to nothing */
};

/* Sleep on FD and the sockets at most TIMEOUT seconds.  Returns 1 if a
 * descriptor is ready (FD's news, or a hint of a message), 0 after the
 * whole TIMEOUT. */
int doze(struct doze *d, int fd, double timeout);
/* What the agent found after the sleep: GOT_MESSAGE, a message from the
 * master; the trust follows. */
void doze_learn(struct doze *d, int got_message);
/* Have the last messages all come with a socket's hint? */
int doze_trusted(const struct doze *d);

#endif
