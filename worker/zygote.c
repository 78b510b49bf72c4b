/* zygote: an ftfarm-slot that starts its node's other slots by forking
 * (see zygote.h). */
#include "zygote.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

/* Read one request: 1 with *SLOT and *FD (-1 if it carried none; the
 * slot ZYGOTE_READY if it was malformed), 0 at end of file, -1 on a
 * failure. */
static int
take_ask(int ctl, uint32_t *slot, int *fd)
{
	struct zygote_ask ask;
	ssize_t n = ft_recv_fd(ctl, &ask, sizeof(ask), fd);

	if (n <= 0)
		return n == 0 ? 0 : -1;
	*slot = (size_t)n == sizeof(ask) ? ask.slot : ZYGOTE_READY;
	return 1;
}

static int
answer(int ctl, uint32_t slot, int32_t pid)
{
	struct zygote_answer a = { .slot = slot, .pid = pid };
	ssize_t n;

	do
		n = send(ctl, &a, sizeof(a), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(a) ? 0 : -1;
}

/* In the new slot: make it the agent's (AGENT's) for good. */
static int
become_slot(int ctl, pid_t agent)
{
	close(ctl);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != agent)
		_exit(127);		/* the agent is gone already */
	prctl(PR_SET_NAME, "ftfarm-slot");
	return 1;
}

int
zygote_serve(int ctl, uint32_t *slot, int *fd)
{
	pid_t agent = getppid();

	prctl(PR_SET_NAME, "ftfarm-zygote");
	if (answer(ctl, ZYGOTE_READY, 0) == -1)
		return -1;
	for (;;) {
		int rc = take_ask(ctl, slot, fd);
		long pid;

		if (rc <= 0)
			return rc;
		if (*fd < 0 || *slot == ZYGOTE_READY) {
			if (*fd >= 0)
				close(*fd);
			if (answer(ctl, *slot, -EBADF) == -1)
				return -1;
			continue;
		}
		/* The parent is the agent's: see zygote.h. */
		pid = syscall(SYS_clone, (unsigned long)(CLONE_PARENT | SIGCHLD),
			      NULL, NULL, NULL, 0UL);
		if (pid == 0)
			return become_slot(ctl, agent);
		if (pid < 0)
			pid = -errno;
		close(*fd);
		if (answer(ctl, *slot, (int32_t)pid) == -1)
			return -1;
	}
}
